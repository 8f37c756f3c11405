package faultfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
)

func TestRules(t *testing.T) {
	dir := t.TempDir()
	gate := make(chan struct{})
	f := New(
		Rule{Op: Write, Name: "*.log", After: 1, Torn: true},
		Rule{Op: Rename, Err: syscall.ENOSPC},
		Rule{Op: Sync, Name: "held", Hold: gate},
	)
	open := func(name string) *os.File {
		t.Helper()
		file, err := f.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = file.Close() })
		return file
	}
	a, idx := open("a.log"), open("a.index")
	if _, err := f.WriteAt(a, []byte("first"), 0); err != nil {
		t.Fatalf("first write, before After: %v", err)
	}
	n, err := f.WriteAt(a, []byte("torn"), 5)
	var pe *os.PathError
	if !errors.As(err, &pe) || !errors.Is(err, syscall.EIO) || n != 2 {
		t.Fatalf("second write: %d, %v; want 2 bytes and EIO in a *PathError", n, err)
	}
	if b, _ := os.ReadFile(a.Name()); string(b) != "firstto" {
		t.Fatalf("file holds %q after the torn write", b)
	}
	if _, err := f.WriteAt(idx, []byte("x"), 0); err != nil {
		t.Fatalf("write to a file no rule names: %v", err)
	}
	err = f.Rename(a.Name(), a.Name()+".new")
	var le *os.LinkError
	if !errors.As(err, &le) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("rename: %v, want ENOSPC in a *LinkError", err)
	}
	if f.Injected() != 2 {
		t.Fatalf("%d calls failed, want 2", f.Injected())
	}

	held := open("held")
	synced := make(chan error, 1)
	go func() { synced <- f.Sync(held) }()
	testkit.WaitFor(t, 10*time.Second, "the sync to be held", func() bool { return f.Holding() == 1 })
	close(gate)
	if err := <-synced; err != nil || f.Holding() != 0 {
		t.Fatalf("held sync: %v, %d still held", err, f.Holding())
	}
	f.Clear()
	if _, err := f.WriteAt(a, []byte("healthy"), 0); err != nil {
		t.Fatalf("write after Clear: %v", err)
	}
}
