package baseline

import (
	"context"
	"os"
	"testing"
)

func TestDiskWritesEverythingWithTheCadence(t *testing.T) {
	dir := t.TempDir()
	r, err := Disk(context.Background(), DiskConfig{Dir: dir, Bytes: 4 << 20, Chunk: 64 << 10, FsyncEvery: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != 4<<20 || r.MBPerSec <= 0 {
		t.Fatalf("result %+v", r)
	}
	if r.Fsyncs != 4 {
		t.Fatalf("%d fsyncs for 4 MiB at one per MiB, want 4 (the last is the final one)", r.Fsyncs)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Fatalf("scratch file left behind: %v", left)
	}

	none, err := Disk(context.Background(), DiskConfig{Dir: dir, Bytes: 1 << 20, Chunk: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if none.Bytes != 1<<20 || none.Fsyncs != 1 {
		t.Fatalf("without a cadence: %+v, want every byte and only the final fsync", none)
	}
}

func TestDiskRejectsBadConfig(t *testing.T) {
	for _, cfg := range []DiskConfig{{Bytes: 0, Chunk: 1}, {Bytes: 1, Chunk: 0}, {Bytes: 1, Chunk: 1, FsyncEvery: -1}} {
		cfg.Dir = t.TempDir()
		if _, err := Disk(context.Background(), cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

func TestSendfileDeliversTheWholeFile(t *testing.T) {
	dir := t.TempDir()
	r, err := Sendfile(context.Background(), SendfileConfig{Dir: dir, Bytes: 8<<20 + 123, Chunk: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != 8<<20+123 || r.MBPerSec <= 0 {
		t.Fatalf("result %+v", r)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Fatalf("scratch file left behind: %v", left)
	}
}

func TestBaselinesStopWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Disk(ctx, DiskConfig{Dir: t.TempDir(), Bytes: 1 << 30, Chunk: 1 << 20}); err == nil {
		t.Fatal("disk baseline ran on with its context cancelled")
	}
}
