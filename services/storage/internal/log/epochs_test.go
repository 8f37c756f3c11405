package log

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/record"
)

// epochBatch builds a batch of n records as a leader would have stamped it:
// leader epoch epoch (through the Builder) and base offset base.
func epochBatch(t testing.TB, epoch int32, base int64, n int) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	b.SetLeaderEpoch(epoch)
	for i := range n {
		b.Append(record.Record{Timestamp: base + int64(i), Value: bytes.Repeat([]byte{'e'}, 40)})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	out = bytes.Clone(out)
	record.SetBaseOffset(out, base)
	return out
}

// appendEpochs appends, as leader, one batch of 3 records per listed epoch.
func appendEpochs(t testing.TB, l *Log, epochs ...int32) {
	t.Helper()
	for _, e := range epochs {
		if _, err := l.Append(nBatch(t, 3, 40, 1), e); err != nil {
			t.Fatalf("Append with epoch %d: %v", e, err)
		}
	}
}

func wantEpochs(t testing.TB, l *Log, want ...EpochEntry) {
	t.Helper()
	if got := l.Epochs(); !slices.Equal(got, want) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
}

func epochFile(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, EpochCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkEpochInvariants checks that the cache is strictly increasing, lies
// within [start, end) of the log, and matches the checkpoint file.
func checkEpochInvariants(t testing.TB, l *Log) {
	t.Helper()
	got := l.Epochs()
	start, end := l.StartOffset(), l.EndOffset()
	for i, e := range got {
		if e.StartOffset < start || e.StartOffset >= end || e.Epoch < 0 ||
			(i > 0 && (e.Epoch <= got[i-1].Epoch || e.StartOffset <= got[i-1].StartOffset)) {
			t.Fatalf("epoch cache %v breaks its invariants in a log [%d, %d)", got, start, end)
		}
	}
	onDisk, err := decodeEpochs([]byte(epochFile(t, l.Dir())))
	if err != nil || !slices.Equal(onDisk, got) {
		t.Fatalf("checkpoint file holds %v (%v), the cache %v", onDisk, err, got)
	}
}

func TestLeaderEpochsFromAppends(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	wantEpochs(t, l)
	if l.LatestEpoch() != UndefinedEpoch {
		t.Fatalf("latest epoch %d of an empty log", l.LatestEpoch())
	}
	appendEpochs(t, l, 0, 0, 2, 2, 2, 5)
	wantEpochs(t, l, EpochEntry{0, 0}, EpochEntry{2, 6}, EpochEntry{5, 15})
	if l.LatestEpoch() != 5 {
		t.Fatalf("latest epoch %d", l.LatestEpoch())
	}
	if got, want := epochFile(t, dir), "0\n3\n0 0\n2 6\n5 15\n"; got != want {
		t.Fatalf("checkpoint file %q, want %q", got, want)
	}
	// The batches carry the epochs they were appended with.
	s, err := l.Read(0, 1<<20, l.EndOffset())
	must(t, err)
	var epochs []int32
	for _, h := range sliceBatches(t, s) {
		epochs = append(epochs, h.LeaderEpoch)
	}
	s.Release()
	if !slices.Equal(epochs, []int32{0, 0, 2, 2, 2, 5}) {
		t.Fatalf("stamped epochs %v", epochs)
	}
	checkEpochInvariants(t, l)
}

func TestStaleEpochRejected(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	appendEpochs(t, l, 3)
	size, end := l.Size(), l.EndOffset()
	_, err := l.Append(nBatch(t, 2, 10, 1), 2)
	wantErr(t, err, ErrStaleEpoch)
	_, err = l.Append(nBatch(t, 2, 10, 1), record.NoLeaderEpoch)
	wantErr(t, err, ErrStaleEpoch)
	if l.Size() != size || l.EndOffset() != end {
		t.Fatalf("a fenced append wrote: size %d, end %d", l.Size(), l.EndOffset())
	}
	appendEpochs(t, l, 3, 4)
	wantEpochs(t, l, EpochEntry{3, 0}, EpochEntry{4, 6})
	// A log used without replication: epoch -1 is stamped, never cached.
	plain := openLog(t, t.TempDir(), testConfig())
	appendEpochs(t, plain, record.NoLeaderEpoch, record.NoLeaderEpoch)
	wantEpochs(t, plain)
}

func TestReplicaEpochsFromHeaders(t *testing.T) {
	dir := t.TempDir()
	f := openLog(t, dir, testConfig())
	// Epoch -1 (never stamped) adds nothing; each rise starts an entry, also
	// inside one append; an epoch below the latest adds nothing.
	var in []byte
	for i, e := range []int32{-1, 1, 1, 3, 3, 4} {
		in = append(in, epochBatch(t, e, int64(2*i), 2)...)
	}
	if _, err := f.AppendReplica(in); err != nil {
		t.Fatal(err)
	}
	wantEpochs(t, f, EpochEntry{1, 2}, EpochEntry{3, 6}, EpochEntry{4, 10})
	in = append(epochBatch(t, 2, 12, 2), epochBatch(t, 4, 14, 2)...)
	in = append(in, epochBatch(t, 6, 16, 3)...)
	if _, err := f.AppendReplica(in); err != nil {
		t.Fatal(err)
	}
	wantEpochs(t, f, EpochEntry{1, 2}, EpochEntry{3, 6}, EpochEntry{4, 10}, EpochEntry{6, 16})
	checkEpochInvariants(t, f)

	// A follower copying a leader ends with the leader's cache.
	leader := openLog(t, t.TempDir(), testConfig())
	appendEpochs(t, leader, 1, 1, 2, 7, 7, 9)
	follower := openLog(t, t.TempDir(), testConfig())
	for follower.EndOffset() < leader.EndOffset() {
		s, err := leader.Read(follower.EndOffset(), 300, leader.EndOffset())
		must(t, err)
		b, err := s.ReadAll()
		s.Release()
		must(t, err)
		if _, err := follower.AppendReplica(b); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := follower.Epochs(), leader.Epochs(); !slices.Equal(got, want) {
		t.Fatalf("follower epochs %v, leader %v", got, want)
	}
}

func TestTruncateToDropsEpochs(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	appendEpochs(t, l, 1, 1, 2, 2, 4, 4) // (1,0) (2,6) (4,12), end 18
	must(t, l.TruncateTo(15))
	wantEpochs(t, l, EpochEntry{1, 0}, EpochEntry{2, 6}, EpochEntry{4, 12})
	must(t, l.TruncateTo(12)) // epoch 4 starts at 12: gone
	wantEpochs(t, l, EpochEntry{1, 0}, EpochEntry{2, 6})
	checkEpochInvariants(t, l)
	must(t, l.TruncateTo(9))
	wantEpochs(t, l, EpochEntry{1, 0}, EpochEntry{2, 6})
	must(t, l.TruncateTo(6))
	wantEpochs(t, l, EpochEntry{1, 0})
	checkEpochInvariants(t, l)
	// The next epoch starts at the new end; epoch 1 is still not stale.
	appendEpochs(t, l, 1, 3)
	wantEpochs(t, l, EpochEntry{1, 0}, EpochEntry{3, 9})
	must(t, l.TruncateTo(0))
	wantEpochs(t, l)
	checkEpochInvariants(t, l)
}

func TestEndOffsetForEpoch(t *testing.T) {
	cache := []EpochEntry{{2, 10}, {4, 20}, {7, 35}}
	const end = 50
	for _, c := range []struct {
		name      string
		entries   []EpochEntry
		epoch     int32
		wantEnd   int64
		wantEpoch int32
	}{
		{"empty cache", nil, 3, UndefinedEpochOffset, UndefinedEpoch},
		{"undefined epoch", cache, -1, UndefinedEpochOffset, UndefinedEpoch},
		{"below every epoch", cache, 1, UndefinedEpochOffset, UndefinedEpoch},
		{"equal to the first", cache, 2, 20, 2},
		{"between first and second", cache, 3, 20, 2},
		{"equal to a middle one", cache, 4, 35, 4},
		{"between middle and latest", cache, 6, 35, 4},
		{"equal to the latest", cache, 7, end, 7},
		{"above the latest", cache, 9, end, 7},
		{"single entry, equal", cache[:1], 2, end, 2},
	} {
		gotEnd, gotEpoch := endOffsetFor(c.entries, c.epoch, end)
		if gotEnd != c.wantEnd || gotEpoch != c.wantEpoch {
			t.Errorf("%s: endOffsetFor(%v, %d) = (%d, %d), want (%d, %d)",
				c.name, c.entries, c.epoch, gotEnd, gotEpoch, c.wantEnd, c.wantEpoch)
		}
	}
	// Through a log.
	l := openLog(t, t.TempDir(), testConfig())
	if e, ep := l.EndOffsetForEpoch(0); e != -1 || ep != -1 {
		t.Fatalf("empty log: (%d, %d)", e, ep)
	}
	appendEpochs(t, l, 2, 4, 4, 7)
	for epoch, want := range map[int32][2]int64{1: {-1, -1}, 2: {3, 2}, 3: {3, 2}, 5: {9, 4}, 7: {12, 7}, 8: {12, 7}} {
		if e, ep := l.EndOffsetForEpoch(epoch); e != want[0] || int64(ep) != want[1] {
			t.Errorf("EndOffsetForEpoch(%d) = (%d, %d), want %v", epoch, e, ep, want)
		}
	}
}

// epochsLog writes a log of several segments whose batches change epoch in
// older segments and the active one, closes it, and returns its epochs.
func epochsLog(t *testing.T, dir string, cfg Config) []EpochEntry {
	t.Helper()
	l, err := Open(dir, cfg, nil)
	must(t, err)
	for i := range 20 {
		appendEpochs(t, l, int32(i/4)) // five epochs of four batches each
	}
	want := l.Epochs()
	if len(want) != 5 || l.Segments() < 4 {
		t.Fatalf("setup: epochs %v, %d segments", want, l.Segments())
	}
	must(t, l.Close())
	return want
}

func TestEpochCheckpointRecovery(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1200 // several segments
	for _, c := range []struct {
		name  string
		wreck func(t *testing.T, path string)
	}{
		{"intact", func(*testing.T, string) {}},
		{"deleted", func(t *testing.T, path string) { must(t, os.Remove(path)) }},
		{"garbage", func(t *testing.T, path string) {
			must(t, os.WriteFile(path, []byte("\x00\xffnot a checkpoint\n"), 0o644))
		}},
		{"empty", func(t *testing.T, path string) { must(t, os.WriteFile(path, nil, 0o644)) }},
		{"wrong version", func(t *testing.T, path string) { must(t, os.WriteFile(path, []byte("1\n1\n0 0\n"), 0o644)) }},
		{"count too large", func(t *testing.T, path string) { must(t, os.WriteFile(path, []byte("0\n9\n0 0\n"), 0o644)) }},
		{"not increasing", func(t *testing.T, path string) { must(t, os.WriteFile(path, []byte("0\n2\n3 0\n2 12\n"), 0o644)) }},
		{"torn write", func(t *testing.T, path string) { chop(t, path, 3) }},
		{"huge", func(t *testing.T, path string) {
			must(t, os.WriteFile(path, bytes.Repeat([]byte("1 1\n"), maxCheckpointBytes/2), 0o644))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			want := epochsLog(t, dir, cfg)
			path := filepath.Join(dir, EpochCheckpointFile)
			c.wreck(t, path)
			l := openLog(t, dir, cfg)
			wantEpochs(t, l, want...)
			checkEpochInvariants(t, l) // rewritten when it was wrong
			appendEpochs(t, l, want[len(want)-1].Epoch)
			_, err := l.Append(nBatch(t, 1, 10, 1), want[len(want)-1].Epoch-1)
			wantErr(t, err, ErrStaleEpoch)
		})
	}
}

func TestEpochCheckpointBeyondTornTail(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, testConfig(), nil)
	must(t, err)
	appendEpochs(t, l, 1, 1, 2, 3) // (1,0) (2,6) (3,9)
	must(t, l.Close())
	// The last batch (epoch 3) is torn: its entry goes with it.
	chop(t, segPath(dir, 0, ".log"), 10)
	l = openLog(t, dir, testConfig())
	if l.EndOffset() != 9 {
		t.Fatalf("end %d after the torn tail", l.EndOffset())
	}
	wantEpochs(t, l, EpochEntry{1, 0}, EpochEntry{2, 6})
	checkEpochInvariants(t, l)
	must(t, l.Close())

	// An entry past the end (written before a batch that never reached the
	// disk) is dropped; one for a batch the file lacks (a crash after
	// TruncateTo's rewrite, before the cut reached the disk) comes back from
	// the scan of the active segment.
	path := filepath.Join(dir, EpochCheckpointFile)
	must(t, os.WriteFile(path, []byte("0\n2\n1 0\n8 9\n"), 0o644))
	l = openLog(t, dir, testConfig())
	wantEpochs(t, l, EpochEntry{1, 0}, EpochEntry{2, 6})
	checkEpochInvariants(t, l)
}

func TestRetentionMovesFirstEpoch(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1200
	l := openLog(t, dir, cfg)
	for i := range 20 {
		appendEpochs(t, l, int32(1+i/10)) // (1,0) (2,30)
	}
	l.mu.RLock()
	first := l.segs[0].size
	l.mu.RUnlock()
	cfg.RetentionBytes = l.Size() - first - 1 // exactly the first segment goes
	cfg.RetentionMs = -1                      // the batches' timestamps are from 1970
	must(t, l.SetConfig(cfg))
	l.SetHighWatermark(l.EndOffset())
	if n, err := l.EnforceRetention(cfg.now()); n != 1 || err != nil {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	start := l.StartOffset()
	if start <= 0 || start >= 30 {
		t.Fatalf("setup: start offset %d should fall inside epoch 1", start)
	}
	wantEpochs(t, l, EpochEntry{1, start}, EpochEntry{2, 30})
	checkEpochInvariants(t, l)
	if l.HighWatermark() < start {
		t.Fatalf("high watermark %d, below the start offset %d", l.HighWatermark(), start)
	}
	must(t, l.Close())
	l = openLog(t, dir, cfg)
	wantEpochs(t, l, EpochEntry{1, start}, EpochEntry{2, 30})
}

func TestRecoveryKeepsCheckpointFiles(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, testConfig(), nil)
	must(t, err)
	appendEpochs(t, l, 1)
	l.SetHighWatermark(3)
	must(t, l.Close())
	leftover := filepath.Join(dir, EpochCheckpointFile+tmpSuffix)
	must(t, os.WriteFile(leftover, []byte("half"), 0o644))
	var logs bytes.Buffer
	l, err = Open(dir, testConfig(), slog.New(slog.NewTextHandler(&logs, nil)))
	must(t, err)
	must(t, l.Close())
	for _, name := range []string{EpochCheckpointFile, HighWatermarkFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("leftover temporary checkpoint not removed: %v", err)
	}
	if strings.Contains(logs.String(), "level=WARN") { // such as "unknown file"
		t.Errorf("warnings on a clean reopen:\n%s", logs.String())
	}
}

func TestEpochCheckpointCodec(t *testing.T) {
	for _, entries := range [][]EpochEntry{nil, {{0, 0}}, {{0, 0}, {3, 150}, {2147483647, 1 << 62}}} {
		b := encodeEpochs(entries)
		got, err := decodeEpochs(b)
		if err != nil || !slices.Equal(got, entries) {
			t.Errorf("round trip of %v through %q: %v, %v", entries, b, got, err)
		}
	}
	for _, bad := range []string{"", "0\n", "0\n0", "0\n1\n", "0\n1\n1\n", "0\n1\n1 2 3\n", "0\n1\n-1 0\n",
		"0\n1\n0 -5\n", "0\n1\n2147483648 0\n", "0\n2\n1 5\n2 5\n", "0\n-1\n", "0\n1\n1  2\n", "0\r\n0\r\n"} {
		if _, err := decodeEpochs([]byte(bad)); err == nil {
			t.Errorf("decodeEpochs(%q) accepted", bad)
		}
	}
}

// FuzzEpochCheckpoint feeds arbitrary bytes to the checkpoint decoder: it
// must not panic, and what it accepts must keep the invariants and survive a
// round trip.
//
//	go test -run '^$' -fuzz 'FuzzEpochCheckpoint$' ./internal/log/
func FuzzEpochCheckpoint(f *testing.F) {
	for _, seed := range []string{"0\n0\n", "0\n2\n0 0\n3 150\n", "0\n1\n5 7", "1\n0\n", "0\n2\n3 0\n2 12\n", "garbage"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := decodeEpochs(data)
		if err != nil {
			return
		}
		for i, e := range entries {
			if e.Epoch < 0 || e.StartOffset < 0 || (i > 0 && (e.Epoch <= entries[i-1].Epoch || e.StartOffset <= entries[i-1].StartOffset)) {
				t.Fatalf("accepted %v", entries)
			}
		}
		again, err := decodeEpochs(encodeEpochs(entries))
		if err != nil || !slices.Equal(again, entries) {
			t.Fatalf("round trip of %v: %v, %v", entries, again, err)
		}
	})
}

func ExampleLog_EndOffsetForEpoch() {
	dir, _ := os.MkdirTemp("", "epochs")
	defer os.RemoveAll(dir)
	l, _ := Open(dir, DefaultConfig(), nil)
	defer l.Close()
	for _, epoch := range []int32{1, 1, 4} {
		b := record.NewBuilder(record.CodecNone)
		b.Append(record.Record{Value: []byte("v")})
		batch, _ := b.Build()
		_, _ = l.Append(batch, epoch)
	}
	fmt.Println(l.Epochs())
	fmt.Println(l.EndOffsetForEpoch(1))
	fmt.Println(l.EndOffsetForEpoch(3))
	fmt.Println(l.EndOffsetForEpoch(4))
	fmt.Println(l.EndOffsetForEpoch(0))
	// Output:
	// [{1 0} {4 2}]
	// 2 1
	// 2 1
	// 3 4
	// -1 -1
}

func TestFenceRefusesOlderLeaderAppends(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	if _, err := l.Append(nBatch(t, 1, 10, 1), 3); err != nil {
		t.Fatal(err)
	}
	l.Fence(5)
	if _, err := l.Append(nBatch(t, 1, 10, 1), 3); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("append at a fenced epoch: %v", err)
	}
	if _, err := l.Append(nBatch(t, 1, 10, 1), 5); err != nil {
		t.Fatalf("append at the fence epoch: %v", err)
	}
}
