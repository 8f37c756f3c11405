package app

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/sluicemq/sluice/libs/server/raftgroup"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// CheckStateCommand is the subcommand that checks a stopped replica's
// state file against its Raft log: `sluice-offsets check-state -data-dir D`.
const CheckStateCommand = "check-state"

// CheckState runs the check-state subcommand with args and returns its
// exit status: 0 when the state file equals the state rebuilt from the
// replica's own log (from its start, or from its oldest snapshot the log
// continues) up to the file's applied index, 1 when
// it differs (the first differences are printed), 2 when the check could
// not run.
func CheckState(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(Name+" "+CheckStateCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", DefaultConfig().Raft.DataDir, "data directory of the stopped replica to check")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	r, err := checkState(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", Name, CheckStateCommand, err)
		return 2
	}
	if len(r.differ) > 0 {
		fmt.Fprintf(stdout, "%s differs from its Raft log replayed up to index %d (%s); first differences (- in the file, + replayed):\n%s\n",
			r.file, r.applied, r.source, strings.Join(r.differ, "\n"))
		return 1
	}
	fmt.Fprintf(stdout, "%s matches its Raft log replayed up to index %d (%s)\n", r.file, r.applied, r.source)
	return 0
}

// stateCheck is what checkState found.
type stateCheck struct {
	file    string
	applied uint64
	source  string   // the snapshot and entries replayed
	differ  []string // the first differing lines of the dumps
}

// maxDifferences bounds the differences reported.
const maxDifferences = 10

// checkState rebuilds the state of the replica in dir, in a new state
// file, from the longest stretch of its log it can replay up to the state
// file's applied index (from the log's start, or from the oldest snapshot
// the log continues), and compares the two files' dumps.
func checkState(dir string) (*stateCheck, error) {
	r := &stateCheck{file: filepath.Join(dir, "state.db")}
	applied, err := fsm.AppliedIndexOf(r.file)
	if err != nil {
		return nil, err
	}
	r.applied = applied
	tmp, err := os.MkdirTemp("", "sluice-check-state-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	model, err := fsm.Open(filepath.Join(tmp, "state.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer model.Close()

	from, source, err := restoreOldest(dir, applied, model)
	if err != nil {
		return nil, err
	}
	replayed, err := replay(dir, from, applied, model)
	if err != nil {
		return nil, fmt.Errorf("replaying after %s: %w", source, err)
	}
	r.source = fmt.Sprintf("%s, %d log entries replayed", source, replayed)
	if err := model.Close(); err != nil {
		return nil, err
	}
	var have, want bytes.Buffer
	if err := fsm.DumpFile(r.file, &have); err != nil {
		return nil, err
	}
	if err := fsm.DumpFile(filepath.Join(tmp, "state.db"), &want); err != nil {
		return nil, err
	}
	r.differ = differences(have.String(), want.String(), maxDifferences)
	return r, nil
}

// restoreOldest restores into model the start of the longest replay the
// replica's log allows: nothing when the log holds its first entry, else
// the oldest snapshot the log covers. It returns the index to replay from
// and what it started with.
func restoreOldest(dir string, applied uint64, model *fsm.FSM) (from uint64, source string, err error) {
	snaps, err := raft.NewFileSnapshotStore(dir, 1, io.Discard)
	if err != nil {
		return 0, "", err
	}
	list, err := snaps.List()
	if err != nil {
		return 0, "", err
	}
	logFirst, _, err := raftgroup.ReadLog(dir, math.MaxUint64, func(*raft.Log) error { return nil })
	if err != nil || logFirst <= 1 {
		return 1, "no snapshot", err
	}
	for i := len(list) - 1; i >= 0; i-- { // oldest first
		s := list[i]
		if s.Index+1 < logFirst {
			continue
		}
		if s.Index > applied {
			// Raft's applied index counts the entries that never reach
			// the FSM (a new leader's no-op, configurations): a snapshot
			// past the file's applied index holds the same state when
			// only such entries lie between them.
			if ok, err := noCommands(dir, applied+1, s.Index); err != nil || !ok {
				if err != nil {
					return 0, "", err
				}
				continue
			}
		}
		_, rc, err := snaps.Open(s.ID)
		if err != nil {
			return 0, "", fmt.Errorf("snapshot %s: %w", s.ID, err)
		}
		if err := model.Restore(rc); err != nil {
			return 0, "", fmt.Errorf("snapshot %s: %w", s.ID, err)
		}
		return s.Index + 1, fmt.Sprintf("snapshot at %d", s.Index), nil
	}
	return 1, "no snapshot", nil
}

// replay applies the replica's log entries from..applied to model, in
// batches as the Raft node does, and returns how many it applied; the log
// must hold every one of them.
func replay(dir string, from, applied uint64, model *fsm.FSM) (int, error) {
	var batch []*raft.Log
	replayed := 0
	flush := func() {
		model.ApplyBatch(batch)
		replayed += len(batch)
		batch = batch[:0]
	}
	first, last, err := raftgroup.ReadLog(dir, from, func(l *raft.Log) error {
		if l.Index > applied {
			return errDone
		}
		batch = append(batch, l)
		if len(batch) == 64 {
			flush()
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDone) {
		return 0, err
	}
	flush()
	if applied >= from && (first > from || last < applied) {
		return 0, fmt.Errorf("the state file's applied index is %d, but the log holds %d..%d: entries it applied are not in the log", applied, first, last)
	}
	return replayed, nil
}

// noCommands reports whether the log entries from..to of the replica in
// dir hold no command.
func noCommands(dir string, from, to uint64) (bool, error) {
	found := errors.New("a command")
	_, _, err := raftgroup.ReadLog(dir, from, func(l *raft.Log) error {
		if l.Index > to {
			return errDone
		}
		if l.Type == raft.LogCommand {
			return found
		}
		return nil
	})
	switch {
	case errors.Is(err, found):
		return false, nil
	case err != nil && !errors.Is(err, errDone):
		return false, err
	}
	return true, nil
}

// errDone stops a read of the log early.
var errDone = errors.New("read far enough")

// differences returns up to max lines found in only one of the dumps
// a and b, prefixed "-" (a) or "+" (b).
func differences(a, b string, max int) []string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, l := range la {
		inA[l] = true
	}
	for _, l := range lb {
		inB[l] = true
	}
	var out []string
	for _, l := range la {
		if !inB[l] && len(out) < max {
			out = append(out, "- "+l)
		}
	}
	for _, l := range lb {
		if !inA[l] && len(out) < max {
			out = append(out, "+ "+l)
		}
	}
	return slices.Clip(out)
}
