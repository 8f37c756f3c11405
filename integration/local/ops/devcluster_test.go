package ops

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// devCluster is a cluster run by the sluice-dev binary, as `make run` runs
// it, on free ports; its URLs come from the banner it prints.
type devCluster struct {
	cmd       *exec.Cmd
	data      string
	bin       string
	out       *syncLines
	frontend  string
	metadata  string
	offsets   string
	kafka     string
	exited    chan struct{}
	exitError error
}

func (d *devCluster) FrontendURL() string { return d.frontend }
func (d *devCluster) MetadataURL() string { return d.metadata }
func (d *devCluster) OffsetsURL() string  { return d.offsets }

// syncLines collects a process's output lines.
type syncLines struct {
	mu    sync.Mutex
	lines []string
}

func (s *syncLines) add(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, line)
}

func (s *syncLines) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// startDev runs sluice-dev -free-ports with more flags and waits for its
// banner.
func startDev(t *testing.T, flags ...string) *devCluster {
	t.Helper()
	bin := itest.BuildBinaries(t)
	d := &devCluster{data: filepath.Join(t.TempDir(), "data"), bin: bin, out: &syncLines{}, exited: make(chan struct{})}
	d.cmd = exec.Command(filepath.Join(bin, "sluice-dev"), append([]string{"-bin", bin, "-data", d.data, "-free-ports"}, flags...)...)
	pr, pw := io.Pipe()
	d.cmd.Stdout, d.cmd.Stderr = pw, pw
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exitError = d.cmd.Wait(); pw.Close(); close(d.exited) }()
	banner := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		seen := false
		for sc.Scan() {
			line := sc.Text()
			d.out.add(line)
			fields := strings.Fields(line)
			if len(fields) >= 2 {
				switch fields[0] {
				case "frontend":
					d.frontend = fields[1]
				case "metadata":
					d.metadata = fields[1]
				case "offsets":
					d.offsets = fields[1]
				case "kafka":
					d.kafka = fields[1]
				}
			}
			if strings.HasPrefix(line, "Ctrl-C stops the cluster") && !seen {
				seen = true
				close(banner)
			}
		}
	}()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-d.exited:
		case <-time.After(60 * time.Second):
			_ = d.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("sluice-dev output:\n%s", d.out)
		}
	})
	select {
	case <-banner:
	case <-d.exited:
		t.Fatalf("sluice-dev exited during start-up: %v\n%s", d.exitError, d.out)
	case <-time.After(3 * time.Minute):
		t.Fatalf("sluice-dev printed no banner:\n%s", d.out)
	}
	return d
}

// dev runs `sluice-dev -data DIR args...` and returns its output and status.
func (d *devCluster) dev(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(d.bin, "sluice-dev"), append([]string{"-data", d.data}, args...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func (d *devCluster) status(t *testing.T) map[string]localcluster.ProcStatus {
	t.Helper()
	out, code := d.dev(t, "status", "-o", "json")
	if code != 0 {
		t.Fatalf("sluice-dev status: exit %d: %s", code, out)
	}
	var sts []localcluster.ProcStatus
	if err := json.Unmarshal([]byte(out), &sts); err != nil {
		t.Fatalf("sluice-dev status -o json: %v: %s", err, out)
	}
	m := map[string]localcluster.ProcStatus{}
	for _, st := range sts {
		m[st.Name] = st
	}
	return m
}

// TestMakeRunFailover walks the README's failover tour against the launcher
// of `make run` (sluice-dev): produce with acks=all to an RF=3 topic, kill the
// leader's storage node with `sluice-dev kill`, see `topic describe` move the
// leader and shrink the ISR while producing goes on, start the node again
// and see it back in the ISR, consume every acknowledged record. Then a
// storage node killed with kill -9 from outside is reported and restarted
// while the rest keeps serving, and SIGINT stops every process.
func TestMakeRunFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	d := startDev(t)
	itest.MustSluicectl(t, d, "topic", "create", "walk", "--partitions", "1", "--replication-factor", "3", "--config", "min.insync.replicas=2")
	describe := func() cluster.Partition {
		t.Helper()
		var topic cluster.Topic
		if err := json.Unmarshal([]byte(itest.MustSluicectl(t, d, "topic", "describe", "walk", "-o", "json")), &topic); err != nil || len(topic.Partitions) != 1 {
			t.Fatalf("topic describe: %v %+v", err, topic)
		}
		return topic.Partitions[0]
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		if p := describe(); len(p.ISR) != 3 {
			return fmt.Errorf("ISR %v", p.ISR)
		}
		return nil
	})

	// The producer: batches of 20 numbered records with acks=all, one
	// `sluicectl produce` each; a batch whose command succeeded is acked.
	var mu sync.Mutex
	var acked []int
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; ; n += 20 {
			select {
			case <-stop:
				return
			default:
			}
			var b strings.Builder
			for i := n; i < n+20; i++ {
				fmt.Fprintf(&b, "r%d\n", i)
			}
			cmd := exec.Command(filepath.Join(d.bin, "sluicectl"), "--frontend", d.frontend, "--metadata", d.metadata, "produce", "walk", "--acks", "all")
			cmd.Stdin = strings.NewReader(b.String())
			if cmd.Run() == nil {
				mu.Lock()
				for i := n; i < n+20; i++ {
					acked = append(acked, i)
				}
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	ackedNow := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	testkit.Eventually(t, 30*time.Second, func() error {
		if n := ackedNow(); n < 200 {
			return fmt.Errorf("%d records acked", n)
		}
		return nil
	})

	leader := describe().Leader
	node := "storage-" + strconv.Itoa(int(leader))
	if out, code := d.dev(t, "kill", node); code != 0 || !strings.Contains(out, node+" stopped") {
		t.Fatalf("sluice-dev kill %s: exit %d: %s", node, code, out)
	}
	if st := d.status(t)[node]; st.State != localcluster.StateStopped || st.Pid != 0 {
		t.Fatalf("status of the killed node: %+v", st)
	}
	testkit.Eventually(t, 60*time.Second, func() error {
		if p := describe(); p.Leader == leader || slices.Contains(p.ISR, leader) {
			return fmt.Errorf("leader %d, ISR %v", p.Leader, p.ISR)
		}
		return nil
	})
	after := ackedNow()
	testkit.Eventually(t, 60*time.Second, func() error {
		if n := ackedNow(); n < after+200 {
			return fmt.Errorf("%d records acked since the leader moved", n-after)
		}
		return nil
	})
	time.Sleep(2 * localcluster.BackoffMin) // the killed node stays down: no restart came
	if st := d.status(t)[node]; st.State != localcluster.StateStopped {
		t.Fatalf("a node killed with sluice-dev kill came back on its own: %+v", st)
	}

	if out, code := d.dev(t, "start", node); code != 0 || !strings.Contains(out, node+" running") {
		t.Fatalf("sluice-dev start %s: exit %d: %s", node, code, out)
	}
	testkit.Eventually(t, 90*time.Second, func() error {
		if p := describe(); !slices.Contains(p.ISR, leader) {
			return fmt.Errorf("ISR %v without node %d", p.ISR, leader)
		}
		return nil
	})

	// kill -9 from outside: reported, restarted after the back-off, while
	// producing goes on.
	victim := "storage-" + strconv.Itoa(int(leader)%3+1)
	pid := d.status(t)[victim].Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, func() error {
		st := d.status(t)[victim]
		if st.State != localcluster.StateRunning || st.Pid == pid || st.Restarts != 1 || st.LastExit != "signal: killed" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if out := d.out.String(); !regexp.MustCompile(victim+` exited on its own after \S+: signal: killed\n  last lines of \S+`+victim+`\.log:\n`).MatchString(out) ||
		!strings.Contains(out, "restarting "+victim+" in 1s") {
		t.Fatalf("no report of %s's exit:\n%s", victim, out)
	}
	testkit.Eventually(t, 90*time.Second, func() error {
		if p := describe(); len(p.ISR) != 3 {
			return fmt.Errorf("ISR %v", p.ISR)
		}
		return nil
	})
	before := ackedNow()
	testkit.Eventually(t, 60*time.Second, func() error {
		if n := ackedNow(); n < before+100 {
			return fmt.Errorf("%d records acked since the restart", n-before)
		}
		return nil
	})
	close(stop)
	<-done

	// Every acked record is read back, in order.
	out := itest.MustSluicectl(t, d, "consume", "walk", "--from-beginning", "--exit-at-end", "--format", "%s\n")
	pos := map[int]int{}
	for i, line := range strings.Fields(out) {
		n, err := strconv.Atoi(strings.TrimPrefix(line, "r"))
		if err != nil {
			t.Fatalf("record %q", line)
		}
		if _, dup := pos[n]; !dup {
			pos[n] = i
		}
	}
	mu.Lock()
	defer mu.Unlock()
	last := -1
	for _, n := range acked {
		i, ok := pos[n]
		if !ok {
			t.Fatalf("acknowledged record r%d was not read back (%d acked, %d read)", n, len(acked), len(pos))
		}
		if i < last {
			t.Fatalf("record r%d read out of order", n)
		}
		last = i
	}
	t.Logf("%d records acked and read back in order through a kill and a kill -9", len(acked))

	// SIGINT stops the whole cluster: no process is left.
	pids := []int{}
	for _, st := range d.status(t) {
		pids = append(pids, st.Pid)
	}
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(90 * time.Second):
		t.Fatal("sluice-dev did not stop on SIGINT")
	}
	if d.exitError != nil {
		t.Fatalf("sluice-dev exit: %v", d.exitError)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still runs after sluice-dev stopped", pid)
		}
	}
	if !strings.Contains(d.out.String(), "stopped metadata-1") {
		t.Fatalf("no orderly stop:\n%s", d.out)
	}
}
