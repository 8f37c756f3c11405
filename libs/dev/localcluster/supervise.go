package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Restart back-off of a supervised cluster: a process that exits on its own
// is started again after BackoffMin, doubling with each exit that follows
// quickly, up to BackoffMax; a process that ran for BackoffReset starts over
// at BackoffMin. Docker's restart policy works the same way.
const (
	BackoffMin   = time.Second
	BackoffMax   = 30 * time.Second
	BackoffReset = 30 * time.Second
)

// tailLines is how many lines of its log an exit report quotes.
const tailLines = 10

// Supervisor keeps a cluster's processes running as docker-compose's
// `restart: unless-stopped` keeps containers running: a process that exits
// on its own (a crash, a kill -9 from outside) is reported, with its exit
// status and the last lines of its log, and started again after a back-off,
// while the rest of the cluster keeps serving. A process stopped through the
// supervisor (Kill, Stop) stays down until Start.
type Supervisor struct {
	c   *Cluster
	out io.Writer

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the restart timers

	mu     sync.Mutex // guards closed and procs
	closed bool
	procs  map[*Proc]*procState
}

// procState is what the supervisor keeps of one process.
type procState struct {
	held     bool   // stopped by Kill or Stop: down until Start
	failures int    // exits in a row that came before BackoffReset
	restarts int    // restarts after exits on its own
	last     string // how it last ended on its own
}

// stateLocked returns p's state, creating it; mu must be held.
func (s *Supervisor) stateLocked(p *Proc) *procState {
	st := s.procs[p]
	if st == nil {
		st = &procState{}
		s.procs[p] = st
	}
	return st
}

// Supervise starts watching the cluster's processes; out receives the
// reports. Close stops the watching (before the cluster is stopped).
func (c *Cluster) Supervise(out io.Writer) *Supervisor {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{c: c, out: out, ctx: ctx, cancel: cancel, procs: map[*Proc]*procState{}}
	c.exitMu.Lock()
	c.onExit = s.exited
	c.exitMu.Unlock()
	return s
}

// Close stops restarting processes and waits for pending restarts to be
// dropped. The processes keep running.
func (s *Supervisor) Close() {
	s.c.exitMu.Lock()
	s.c.onExit = nil
	s.c.exitMu.Unlock()
	s.mu.Lock()
	s.closed = true // no restart is scheduled from here on
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// exited reports e and schedules the restart.
func (s *Supervisor) exited(e Exit) {
	p := e.Proc
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	ps := s.stateLocked(p)
	if e.Ran >= BackoffReset {
		ps.failures = 0
	}
	ps.failures++
	delay := backoff(ps.failures)
	ps.last = e.Status
	held := ps.held
	if !held {
		s.wg.Add(1) // under mu, so before Close waits
	}
	s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s exited on its own after %s: %s\n", p.Name, e.Ran.Round(time.Millisecond), e.Status)
	if tail := lastLines(p.LogPath, tailLines); tail != "" {
		fmt.Fprintf(&b, "  last lines of %s:\n", p.LogPath)
		for line := range strings.SplitSeq(strings.TrimRight(tail, "\n"), "\n") {
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	if held {
		fmt.Fprintf(&b, "  %s was stopped by hand and stays down\n", p.Name)
	} else {
		fmt.Fprintf(&b, "  restarting %s in %s\n", p.Name, delay)
	}
	s.write(b.String())
	if held {
		return
	}
	go func() {
		defer s.wg.Done()
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(delay):
		}
		s.mu.Lock()
		held := ps.held
		if !held {
			ps.restarts++
		}
		s.mu.Unlock()
		if held || p.Running() {
			return
		}
		if err := s.c.launch(p); err != nil {
			// Counted as another quick exit: the next try waits longer.
			s.write(fmt.Sprintf("restarting %s failed: %v\n", p.Name, err))
			s.exited(Exit{Proc: p, Status: err.Error()})
		}
	}()
}

// backoff is the wait before restart n (1, 2, ...) of a run of quick exits.
func backoff(n int) time.Duration {
	d := BackoffMin
	for i := 1; i < n && d < BackoffMax; i++ {
		d *= 2
	}
	return min(d, BackoffMax)
}

func (s *Supervisor) write(text string) {
	if s.out != nil {
		_, _ = io.WriteString(s.out, text)
	}
}

// Kill stops p with SIGKILL, as a crash would, and keeps it down until
// Start.
func (s *Supervisor) Kill(p *Proc) { s.down(p, true) }

// Stop stops p with SIGTERM and keeps it down until Start.
func (s *Supervisor) Stop(p *Proc) { s.down(p, false) }

func (s *Supervisor) down(p *Proc, kill bool) {
	s.mu.Lock()
	s.stateLocked(p).held = true // a pending restart is dropped too
	s.mu.Unlock()
	s.c.StopProc(p, kill)
}

// Start starts p (stopped by Kill or Stop, or waiting for a restart) and
// waits until it is ready.
func (s *Supervisor) Start(ctx context.Context, p *Proc) error {
	s.mu.Lock()
	ps := s.stateLocked(p)
	ps.held, ps.failures = false, 0
	s.mu.Unlock()
	if p.Running() {
		return fmt.Errorf("%s is already running", p.Name)
	}
	return s.c.StartProc(ctx, p)
}

// Restart stops p with SIGTERM and starts it again.
func (s *Supervisor) Restart(ctx context.Context, p *Proc) error {
	s.Stop(p)
	return s.Start(ctx, p)
}

// ProcStatus is one line of Status.
type ProcStatus struct {
	Name     string `json:"name"`
	Pid      int    `json:"pid"` // 0 when down
	State    string `json:"state"`
	Restarts int    `json:"restarts"` // restarts after exits on its own
	LastExit string `json:"last_exit,omitempty"`
	Log      string `json:"log"`
}

// Process states of Status.
const (
	StateRunning    = "running"
	StateStopped    = "stopped"    // by Kill or Stop: down until Start
	StateRestarting = "restarting" // exited on its own; restart pending
)

// Status describes every process of the cluster.
func (s *Supervisor) Status() []ProcStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ProcStatus, 0, len(s.c.Procs))
	for _, p := range s.c.Procs {
		ps := s.stateLocked(p)
		st := ProcStatus{Name: p.Name, Pid: p.Pid(), Restarts: ps.restarts, LastExit: ps.last, Log: p.LogPath}
		switch {
		case st.Pid != 0:
			st.State = StateRunning
		case ps.held:
			st.State = StateStopped
		default:
			st.State = StateRestarting
		}
		out = append(out, st)
	}
	return out
}

// lastLines returns up to n last lines of the file at path ("" when it
// cannot be read).
func lastLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 16 << 10
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return ""
	}
	from := max(size-window, 0)
	buf := make([]byte, size-from)
	if _, err := f.ReadAt(buf, from); err != nil && err != io.EOF {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if from > 0 && len(lines) > 1 {
		lines = lines[1:] // the first may be cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
