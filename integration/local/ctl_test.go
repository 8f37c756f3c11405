package local

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
)

// sluicectl runs the real binary against the cluster and returns stdout,
// stderr and the exit status.
func sluicectl(t *testing.T, c interface {
	FrontendURL() string
	MetadataURL() string
}, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(buildBinaries(t), "sluicectl"), append([]string{"--frontend", c.FrontendURL(), "--metadata", c.MetadataURL()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestSluicectlTour walks the README's tour with the real sluicectl binary.
func TestSluicectlTour(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := startCluster(t, 3)
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, code := sluicectl(t, c, stdin, args...)
		if code != 0 {
			t.Fatalf("sluicectl %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	must("", "topic", "create", "tour", "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=3600000")
	must("alice:one\nbob:two\nalice:three\nplain line\n", "produce", "tour", "--key-separator", ":", "--acks", "all")

	out := must("", "consume", "tour", "--from-beginning", "--exit-at-end", "--format", `%k=%s\n`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sorted := slices.Clone(lines)
	slices.Sort(sorted)
	if want := []string{"=plain line", "alice=one", "alice=three", "bob=two"}; !slices.Equal(sorted, want) {
		t.Fatalf("consumed %q, want %q", sorted, want)
	}
	if slices.Index(lines, "alice=one") > slices.Index(lines, "alice=three") {
		t.Fatalf("per-key order broken: %q", lines)
	}
	if out := must("", "consume", "tour", "--from-beginning", "--max-messages", "1", "--format", `%s`); len(out) == 0 {
		t.Fatal("--max-messages 1 printed nothing")
	}

	var topic cluster.Topic
	if err := json.Unmarshal([]byte(must("", "topic", "describe", "tour", "-o", "json")), &topic); err != nil || len(topic.Partitions) != 2 || topic.Config["retention.ms"] != "3600000" {
		t.Fatalf("describe: %+v %v", topic, err)
	}
	var status struct {
		Nodes []cluster.Node `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(must("", "cluster", "status", "-o", "json")), &status); err != nil || len(status.Nodes) != 3 {
		t.Fatalf("status: %+v %v", status, err)
	}
	if !strings.Contains(must("", "topic", "list"), "tour") {
		t.Fatal("topic list misses the topic")
	}

	// Errors: a non-zero exit with the reason on stderr.
	if _, errOut, code := sluicectl(t, c, "", "consume", "missing", "--exit-at-end"); code != 1 || !strings.Contains(errOut, "missing") {
		t.Fatalf("consume of a missing topic: exit %d, %q", code, errOut)
	}
	if _, errOut, code := sluicectl(t, c, "", "topic", "create", "tour", "--partitions", "1"); code != 1 || !strings.Contains(errOut, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("duplicate create: exit %d, %q", code, errOut)
	}
	must("", "topic", "delete", "tour")
	if _, _, code := sluicectl(t, c, "", "topic", "describe", "tour"); code != 1 {
		t.Fatalf("describe after delete: exit %d", code)
	}
}
