package fsm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicemq/sluice/libs/server/durable"
)

// Durability of the state file.
//
// The Raft log is the durable record of every command: raft fsyncs each
// append before an entry counts toward a commit. The state file therefore
// commits each batch of entries without an fsync of its own (bbolt's
// NoSync): a process that dies (kill -9, a panic, an OOM kill) leaves its
// writes in the operating system's page cache, which keeps them, and the
// file is whole at the next start, which replays the log from the applied
// index stored with the state. Only a crash of the machine itself (power,
// kernel) can lose unsynced writes or tear the file; then the file is not
// trusted, but set aside, and raft rebuilds the state from its latest
// snapshot and the log after it, as for a new replica.
//
// Which of the two happened is told by the sidecar file state.db.boot,
// written and fsynced before the state file is written in a new process:
// it names the kernel's boot id (/proc/sys/kernel/random/boot_id) and
// whether the process that wrote it closed the state file after an fsync.
// At start the file is trusted when that process closed it cleanly or ran
// in the current boot. Where the boot id cannot be read, every commit is
// synced, as before.

// bootID returns the kernel's id of the running boot, "" when unknown. A
// variable so that tests can play a reboot.
var bootID = func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Sidecar states.
const (
	sidecarOpen   = "open"
	sidecarClosed = "closed"
)

// sidecarPath is the state file's sidecar.
func sidecarPath(statePath string) string { return statePath + ".boot" }

// readSidecar returns the boot id and state of the sidecar; ok is false
// when there is none (a new directory, or one of a release that synced
// every commit).
func readSidecar(statePath string) (boot, state string, ok bool, err error) {
	b, err := os.ReadFile(sidecarPath(statePath))
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	boot, state, _ = strings.Cut(strings.TrimSpace(string(b)), " ")
	return boot, state, true, nil
}

// writeSidecar records boot and state durably.
func writeSidecar(statePath, boot, state string) error {
	return durable.WriteFile(sidecarPath(statePath), []byte(boot+" "+state+"\n"), 0o600)
}

// untrustedSuffix names a state file set aside after a machine crash.
const untrustedSuffix = ".untrusted"

// setAsideIfUntrusted moves the state file out of the way when the machine
// crashed while a process had it open with unsynced writes, and says why;
// raft then rebuilds the state from its snapshot and log.
func setAsideIfUntrusted(statePath, boot string) (string, error) {
	if _, err := os.Stat(statePath); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	was, state, ok, err := readSidecar(statePath)
	if err != nil || !ok || state == sidecarClosed || boot != "" && was == boot {
		return "", err
	}
	why := fmt.Sprintf("the machine restarted (boot %s, now %s) while the state file had writes that were not synced", was, boot)
	if err := os.Rename(statePath, statePath+untrustedSuffix); err != nil {
		return "", fmt.Errorf("offsets state %s: setting it aside: %w", statePath, err)
	}
	return why, durable.SyncDir(filepath.Dir(statePath))
}
