package log

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/services/storage/internal/log/faultfs"
)

// cleanSetup builds a model log with several closed segments below the high
// watermark, flushed so the flusher stays idle during the pass.
func cleanSetup(t *testing.T, dir string, fs FileSystem) *cleanModel {
	t.Helper()
	cfg := testConfig()
	cfg.FS = fs
	m := newCleanModel(t, 42, dir, cfg)
	for range 150 {
		m.appendBatch()
	}
	m.l.SetHighWatermark(m.l.EndOffset())
	if err := m.l.WaitFlushed(context.Background(), m.l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	return m
}

// reopenAndFinish opens dir with the real file system, checks the model,
// runs a pass to the end and checks again; no leftover files remain.
func reopenAndFinish(t *testing.T, m *cleanModel, dir string, protected int64, opts CleanOptions) {
	t.Helper()
	l := openLog(t, dir, testConfig())
	if l.RecoveryCut() {
		t.Fatal("recovery cut the log")
	}
	m.check(l, protected)
	l.SetHighWatermark(protected) // the copy may predate the high-watermark checkpoint
	opts.Now = m.clock.Now()
	if _, err := l.Clean(opts); err != nil {
		t.Fatalf("pass after reopen: %v", err)
	}
	m.check(l, protected)
	if first := l.FirstDirtyOffset(); first == 0 {
		t.Fatal("first dirty offset 0 after a full pass")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) {
			t.Fatalf("leftover %s after a pass", e.Name())
		}
	}
	_ = l.Close()
}

// TestCleanCrashAtEachStep copies the directory at every step of a pass (what
// a kill -9 there leaves) and checks each copy opens to a log holding every
// record a reader could see, which a later pass finishes cleaning.
func TestCleanCrashAtEachStep(t *testing.T) {
	dir := t.TempDir()
	m := cleanSetup(t, dir, nil)
	protected := protectedFrom(m.l)
	var crashes []string
	var steps []string
	opts := CleanOptions{DeleteRetention: 30 * time.Second, MapBytes: mapBytesFor(300), Hook: func(step string) error {
		crashes = append(crashes, copyDir(t, dir))
		steps = append(steps, step)
		return nil
	}}
	crashes = append(crashes, copyDir(t, dir))
	steps = append(steps, "before")
	if _, err := m.clean(opts); err != nil {
		t.Fatal(err)
	}
	m.check(m.l, protected)
	if !strings.Contains(strings.Join(steps, " "), CleanStepSwapped) {
		t.Fatalf("steps %v: no swap", steps)
	}
	opts.Hook = nil
	for i, d := range crashes {
		t.Run(fmt.Sprintf("%d-%s", i, steps[i]), func(t *testing.T) {
			reopenAndFinish(t, m, d, protected, opts)
		})
	}
}

// TestCleanFileFaults fails each file step of a pass in turn (and the
// removal of what it leaves), then reopens with the real file system: the
// log opens, the model holds, and a later pass finishes. A failure before
// the swap aborts the pass and leaves the log usable; a failed swap rename
// fails the log; a failed checkpoint only reports.
func TestCleanFileFaults(t *testing.T) {
	type fault struct {
		rule    faultfs.Rule
		failLog bool // the log must be failed afterwards
	}
	var faults []fault
	for after := range 3 {
		for _, r := range []faultfs.Rule{
			{Op: faultfs.Open, Name: "*" + cleanedSuffix},
			{Op: faultfs.Write, Name: "*" + cleanedSuffix, Torn: true},
			{Op: faultfs.Sync, Name: "*" + cleanedSuffix},
			{Op: faultfs.Rename, Name: "*" + cleanedSuffix},
			{Op: faultfs.Open, Name: CleanerCheckpointFile + tmpSuffix},
			{Op: faultfs.Rename, Name: CleanerCheckpointFile + tmpSuffix},
		} {
			r.After = after
			faults = append(faults, fault{rule: r})
		}
		faults = append(faults, fault{rule: faultfs.Rule{Op: faultfs.Rename, Name: "*" + swapSuffix, After: after}, failLog: true})
	}
	for i, f := range faults {
		t.Run(fmt.Sprintf("%d-%s-%s-%d", i, f.rule.Op, f.rule.Name, f.rule.After), func(t *testing.T) {
			fsys := faultfs.New()
			dir := t.TempDir()
			m := cleanSetup(t, dir, fsys)
			protected := protectedFrom(m.l)
			fsys.Add(f.rule)
			// The pass's own clean-up fails too: recovery must cope.
			fsys.Add(faultfs.Rule{Op: faultfs.Remove, Name: "*" + cleanedSuffix})
			fsys.Add(faultfs.Rule{Op: faultfs.Remove, Name: "*" + swapSuffix})
			opts := CleanOptions{DeleteRetention: 30 * time.Second, MapBytes: mapBytesFor(300)}
			_, err := m.clean(opts)
			injected := fsys.Injected() > 0
			if injected && err == nil {
				t.Fatal("a failed step went unreported")
			}
			m.l.mu.RLock()
			failed := m.l.failed
			m.l.mu.RUnlock()
			if f.failLog && injected && !errors.Is(failed, ErrFailed) {
				t.Fatalf("failed swap rename left the log usable: %v", err)
			}
			if !f.failLog && failed != nil {
				t.Fatalf("the log failed: %v", failed)
			}
			if failed == nil {
				m.check(m.l, protected) // still serving, same records
			}
			_ = m.l.Close()
			reopenAndFinish(t, m, dir, protected, opts)
		})
	}
}

// TestCleanAbortsOnConcurrentChange: retention or truncation changing the
// segments a pass read makes the swap abort with ErrCleanAborted, leaving
// the log as they made it; the next pass succeeds.
func TestCleanAbortsOnConcurrentChange(t *testing.T) {
	for _, change := range []string{"retention", "truncate"} {
		t.Run(change, func(t *testing.T) {
			dir := t.TempDir()
			m := cleanSetup(t, dir, nil)
			done := false
			opts := CleanOptions{DeleteRetention: time.Hour, Hook: func(step string) error {
				if step != CleanStepSwapReady || done {
					return nil
				}
				done = true
				m.l.mu.RLock()
				second := m.l.segs[1].base
				m.l.mu.RUnlock()
				var err error
				if change == "retention" {
					_, err = m.l.RaiseStartOffset(second)
					if err == nil {
						_, err = m.l.EnforceRetention(m.clock.Now())
					}
				} else {
					err = m.l.TruncateTo(second)
				}
				if err != nil {
					t.Errorf("%s: %v", change, err)
				}
				return nil
			}}
			_, err := m.clean(opts)
			if !errors.Is(err, ErrCleanAborted) {
				t.Fatalf("Clean: %v, want ErrCleanAborted", err)
			}
			if change == "truncate" {
				for off := range m.recs {
					if off >= m.l.EndOffset() {
						delete(m.recs, off)
					}
				}
			}
			m.check(m.l, m.l.EndOffset())
			opts.Hook = nil
			if _, err := m.clean(opts); err != nil {
				t.Fatal(err)
			}
			m.check(m.l, protectedFrom(m.l))
			_ = m.l.Close()
			l := openLog(t, dir, testConfig())
			m.check(l, protectedFrom(l))
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if filepath.Ext(e.Name()) == swapSuffix || filepath.Ext(e.Name()) == cleanedSuffix {
					t.Fatalf("leftover %s", e.Name())
				}
			}
		})
	}
}
