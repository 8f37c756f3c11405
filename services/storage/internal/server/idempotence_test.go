package server

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// idemBatch builds the batch an idempotent producer sends: n records from
// sequence seq.
func idemBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	b := record.NewBuilder(record.CodecNone)
	b.SetProducer(pid, epoch, seq)
	for i := range n {
		b.Append(record.Record{Timestamp: 1_700_000_000_000, Value: fmt.Appendf(nil, "p%d-e%d-s%d", pid, epoch, int(seq)+i)})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(out)
}

func TestIdempotentProduce(t *testing.T) {
	s, mgr := startServer(t, t.TempDir(), snapshot("t", 1, nil), DefaultConfig())
	c := dial(t, s.Addr())
	r, _ := mgr.Get("t", 0)
	var first []protocol.ProduceResponse
	for i := range int32(6) {
		resp, err := produce(t, c, "t", 0, protocol.AcksAll, idemBatch(t, 42, 0, i*2, 2))
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, resp)
	}
	end := r.Log.EndOffset()
	// Retries of the last five batches (a lost answer), at every acks level:
	// the original offsets, nothing appended.
	for i := 1; i < 6; i++ {
		for _, acks := range []int8{protocol.AcksAll, protocol.AcksLeader} {
			resp, err := produce(t, c, "t", 0, acks, idemBatch(t, 42, 0, int32(i)*2, 2))
			if err != nil || resp.BaseOffset != first[i].BaseOffset || resp.LastOffset != first[i].LastOffset {
				t.Fatalf("retry of batch %d with acks %d: %+v, %v; want the offsets of %+v", i, acks, resp, err, first[i])
			}
		}
	}
	if r.Log.EndOffset() != end {
		t.Fatalf("retries appended: end %d -> %d", end, r.Log.EndOffset())
	}
	for _, tc := range []struct {
		name  string
		batch []byte
		want  protocol.Code
	}{
		{"older than the five remembered", idemBatch(t, 42, 0, 0, 2), protocol.DuplicateSequenceNumber},
		{"gap", idemBatch(t, 42, 0, 13, 1), protocol.OutOfOrderSequenceNumber},
		{"new epoch not from 0", idemBatch(t, 42, 1, 12, 1), protocol.OutOfOrderSequenceNumber},
		{"no sequence", idemBatch(t, 42, 0, record.NoSequence, 1), protocol.InvalidRecord},
	} {
		if _, err := produce(t, c, "t", 0, protocol.AcksAll, tc.batch); code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// A new epoch fences the old one.
	if _, err := produce(t, c, "t", 0, protocol.AcksAll, idemBatch(t, 42, 1, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := produce(t, c, "t", 0, protocol.AcksAll, idemBatch(t, 42, 0, 12, 1)); code(err) != protocol.InvalidProducerEpoch {
		t.Fatalf("old epoch after a new one: %v", err)
	}
	// The log holds each record once.
	_, payload, err := fetch(t, c, "t", 0, 0, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, vals := values(t, payload, 0); len(vals) != 13 || vals[11] != "p42-e0-s11" || vals[12] != "p42-e1-s0" {
		t.Fatalf("log holds %q", vals)
	}
}

// TestDuplicateRecognizedAfterLeaderChange: node 2 replicates node 1's log
// over real sockets and builds the same producer state; after it becomes
// leader, a producer's retry of a batch node 1 appended (its answer lost in
// the failover) is answered with the original offsets and appended nowhere.
func TestDuplicateRecognizedAfterLeaderChange(t *testing.T) {
	s1, m1 := startServer(t, t.TempDir(), snapshot("t", 1, map[string]string{"flush.policy": "replication"}), DefaultConfig())
	m2 := startFollowerManager(t)
	s2 := serve(t, m2)
	addrs := map[int32]string{1: s1.Addr(), 2: s2.Addr()}
	for _, m := range []*replica.Manager{m1, m2} {
		if err := m.Apply(twoNodeSnapshot(2, 1, 0, addrs), true); err != nil {
			t.Fatal(err)
		}
	}
	lead, _ := m1.Get("t", 0)
	fol, _ := m2.Get("t", 0)
	c1 := dial(t, s1.Addr())
	var last protocol.ProduceResponse
	for i := range int32(4) {
		for pid := int64(1); pid <= 2; pid++ {
			resp, err := produce(t, c1, "t", 0, protocol.AcksAll, idemBatch(t, pid, 0, i*3, 3))
			if err != nil {
				t.Fatal(err)
			}
			last = resp // producer 2's, sequences 9..11
		}
	}
	// acks=all answered, so node 2 holds the batches; wait for its state to
	// match too (it is built by the same appends).
	testkit.Eventually(t, 10*time.Second, func() error {
		if f, l := fol.Log.EndOffset(), lead.Log.EndOffset(); f != l {
			return fmt.Errorf("follower at %d, leader at %d", f, l)
		}
		return nil
	})
	if got, want := entries(fol), entries(lead); !maps.Equal(got, want) || len(got) != 2 {
		t.Fatalf("follower's producer state %v, leader's %v", got, want)
	}

	// Node 1 fails; node 2 leads epoch 1.
	for _, m := range []*replica.Manager{m2, m1} {
		if err := m.Apply(twoNodeSnapshot(3, 2, 1, addrs), true); err != nil {
			t.Fatal(err)
		}
	}
	c2 := dial(t, s2.Addr())
	end := fol.Log.EndOffset()
	resp, err := produce(t, c2, "t", 0, protocol.AcksLeader, idemBatch(t, 2, 0, 9, 3))
	if err != nil || resp.BaseOffset != last.BaseOffset || resp.LastOffset != last.LastOffset {
		t.Fatalf("retry on the new leader: %+v, %v; want the offsets of %+v", resp, err, last)
	}
	if fol.Log.EndOffset() != end {
		t.Fatalf("the retry was appended on the new leader: end %d -> %d", end, fol.Log.EndOffset())
	}
	if _, err := produce(t, c2, "t", 0, protocol.AcksLeader, idemBatch(t, 2, 0, 13, 1)); code(err) != protocol.OutOfOrderSequenceNumber {
		t.Fatalf("gap on the new leader: %v", err)
	}
	resp, err = produce(t, c2, "t", 0, protocol.AcksLeader, idemBatch(t, 2, 0, 12, 1))
	if err != nil || resp.BaseOffset != end {
		t.Fatalf("next batch on the new leader: %+v, %v; want it at %d", resp, err, end)
	}
}

// replicaEntry is a comparable view of a log's producer entry.
type replicaEntry struct {
	epoch   int16
	batches string
}

func entries(r *replica.Replica) map[int64]replicaEntry {
	out := map[int64]replicaEntry{}
	for pid, e := range r.Log.Producers() {
		out[pid] = replicaEntry{e.Epoch, fmt.Sprint(e.Batches)}
	}
	return out
}

// serve runs a protocol server over a manager on 127.0.0.1:0.
func serve(t *testing.T, mgr *replica.Manager) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	s, err := New(cfg, mgr, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return s
}
