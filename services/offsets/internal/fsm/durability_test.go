package fsm

import (
	"os"
	"path/filepath"
	"testing"
)

// playBoot makes bootID answer id until the test ends.
func playBoot(t *testing.T, id string) {
	t.Helper()
	was := bootID
	bootID = func() string { return id }
	t.Cleanup(func() { bootID = was })
}

// crashProcess drops the FSM as a killed process does: the state file's
// handle goes away without the sync and the clean mark of Close.
func crashProcess(t *testing.T, f *FSM) {
	t.Helper()
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStateFileTrust: the state file commits without fsync, so after a
// process crash in the same boot it is whole and kept (the log replays from
// its applied index); after a machine crash (another boot) with writes not
// synced it is set aside, and the FSM starts empty for raft to rebuild it;
// after a clean close, or from a release that synced every commit (no
// sidecar), it is kept whatever the boot.
func TestStateFileTrust(t *testing.T) {
	write := func(t *testing.T) (string, *FSM) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "state.db")
		f := open(t, path)
		if !f.db.NoSync {
			t.Fatal("the state file syncs every commit although the boot id is known")
		}
		apply(t, f, entry(t, 1, commit("g", "", 0, "t", 0, 5)), entry(t, 2, commit("g", "", 0, "t", 0, 7)))
		return path, f
	}
	kept := func(t *testing.T, path string) {
		t.Helper()
		f := open(t, path)
		if got := f.AppliedIndex(); got != 2 || offsetOf(t, f, "g", 0) != 7 {
			t.Fatalf("applied index %d, offset %d: the state file was not kept", got, offsetOf(t, f, "g", 0))
		}
		if _, err := os.Stat(path + untrustedSuffix); err == nil {
			t.Fatal("a state file was set aside")
		}
	}
	t.Run("process crash", func(t *testing.T) {
		playBoot(t, "boot-1")
		path, f := write(t)
		crashProcess(t, f)
		kept(t, path)
	})
	t.Run("machine crash", func(t *testing.T) {
		playBoot(t, "boot-1")
		path, f := write(t)
		crashProcess(t, f)
		playBoot(t, "boot-2")
		f = open(t, path)
		if got := f.AppliedIndex(); got != 0 {
			t.Fatalf("applied index %d after a machine crash: the unsynced state file was trusted", got)
		}
		if _, err := os.Stat(path + untrustedSuffix); err != nil {
			t.Fatalf("the untrusted state file was not kept aside: %v", err)
		}
	})
	t.Run("clean close, then a reboot", func(t *testing.T) {
		playBoot(t, "boot-1")
		path, f := write(t)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		playBoot(t, "boot-2")
		kept(t, path)
	})
	t.Run("a file of a release that synced every commit", func(t *testing.T) {
		playBoot(t, "boot-1")
		path, f := write(t)
		crashProcess(t, f)
		if err := os.Remove(sidecarPath(path)); err != nil {
			t.Fatal(err)
		}
		playBoot(t, "boot-2")
		kept(t, path)
	})
	t.Run("unknown boot id", func(t *testing.T) {
		playBoot(t, "")
		f := open(t, filepath.Join(t.TempDir(), "state.db"))
		if f.db.NoSync {
			t.Fatal("without a boot id every commit must be synced")
		}
	})
}
