package ops

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
)

// TestSluicectlTour walks the README's tour with the real sluicectl binary
// (on the package's shared cluster: its topic is its own).
func TestSluicectlTour(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.SharedCluster(t)
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, code := itest.Sluicectl(t, c, stdin, args...)
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
	if _, errOut, code := itest.Sluicectl(t, c, "", "consume", "missing", "--exit-at-end"); code != 1 || !strings.Contains(errOut, "missing") {
		t.Fatalf("consume of a missing topic: exit %d, %q", code, errOut)
	}
	if _, errOut, code := itest.Sluicectl(t, c, "", "topic", "create", "tour", "--partitions", "1"); code != 1 || !strings.Contains(errOut, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("duplicate create: exit %d, %q", code, errOut)
	}
	must("", "topic", "delete", "tour")
	if _, _, code := itest.Sluicectl(t, c, "", "topic", "describe", "tour"); code != 1 {
		t.Fatalf("describe after delete: exit %d", code)
	}
}

// TestSluicectlGroups: consume as a group, describe its lag, reset its
// offsets, read again from the reset position, delete it — with the real
// sluicectl binary.
func TestSluicectlGroups(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 1)
	must := func(args ...string) string {
		t.Helper()
		out, errOut, code := itest.Sluicectl(t, c, "", args...)
		if code != 0 {
			t.Fatalf("sluicectl %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	must("topic", "create", "gt", "--partitions", "2", "--replication-factor", "1")
	if _, errOut, code := itest.Sluicectl(t, c, "a\nb\nc\nd\ne\n", "produce", "gt", "--acks", "all"); code != 0 {
		t.Fatalf("produce: %s", errOut)
	}
	count := func(out string) int { return len(strings.Fields(out)) }
	if got := count(must("consume", "gt", "--group", "readers", "--from-beginning", "--exit-at-end", "--format", `%s\n`)); got != 5 {
		t.Fatalf("first group read printed %d records, want 5", got)
	}
	// The group committed on exit: a second run has nothing left.
	if got := count(must("consume", "gt", "--group", "readers", "--exit-at-end", "--format", `%s\n`)); got != 0 {
		t.Fatalf("second group read printed %d records, want 0 (resuming from the commits)", got)
	}
	var d struct {
		State      string `json:"state"`
		TotalLag   int64  `json:"total_lag"`
		Partitions []struct {
			Committed int64 `json:"committed"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(must("group", "describe", "readers", "-o", "json")), &d); err != nil || d.TotalLag != 0 || len(d.Partitions) != 2 || d.State != "empty" {
		t.Fatalf("describe: %+v, %v", d, err)
	}
	if out := must("group", "list"); !strings.Contains(out, "readers") {
		t.Fatalf("group list: %q", out)
	}
	must("group", "reset-offsets", "readers", "--topic", "gt", "--to-earliest")
	if err := json.Unmarshal([]byte(must("group", "describe", "readers", "-o", "json")), &d); err != nil || d.TotalLag != 5 {
		t.Fatalf("describe after reset: %+v, %v", d, err)
	}
	if human := must("group", "describe", "readers"); !strings.Contains(human, "LAG") || !strings.Contains(human, "gt") {
		t.Fatalf("human describe: %q", human)
	}
	if got := count(must("consume", "gt", "--group", "readers", "--exit-at-end", "--format", `%s\n`)); got != 5 {
		t.Fatalf("read after the reset printed %d records, want 5", got)
	}
	must("group", "delete", "readers")
	if _, errOut, code := itest.Sluicectl(t, c, "", "group", "describe", "readers"); code != 1 || !strings.Contains(errOut, "GROUP_ID_NOT_FOUND") {
		t.Fatalf("describe after delete: exit %d, %q", code, errOut)
	}
}

// TestTopicAlterAppliesLive: `sluicectl topic alter` changes a topic's
// config through the frontend and the storage nodes apply it without a
// restart: lowering retention.bytes makes retention delete the old segments
// (the first offset a consumer can read moves past 0). Invalid changes are
// refused with the reason and change nothing; --delete-config returns a key
// to its default.
func TestTopicAlterAppliesLive(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3, "-retention-check-interval", "200ms")
	firstOffset := func() string {
		t.Helper()
		return strings.TrimSpace(itest.MustSluicectl(t, c, "consume", "live", "--from-beginning", "--max-messages", "1", "--format", `%o`))
	}
	itest.MustSluicectl(t, c, "topic", "create", "live", "--partitions", "1", "--replication-factor", "3",
		"--config", "segment.bytes=4096", "--config", "min.insync.replicas=2")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	itest.WaitLeaders(t, ctx, c, "live", 1)             // a produce right after the create may find no leader yet
	itest.ProduceInRequests(t, c, "live", "v", 400, 10) // small batches: many 4 KiB segments
	time.Sleep(time.Second)                             // a few retention passes: nothing to delete yet
	if got := firstOffset(); got != "0" {
		t.Fatalf("first offset %s before the change, want 0", got)
	}

	for _, bad := range [][]string{{"--config", "retention.bytes=lots"}, {"--config", "min.insync.replicas=4"}, {"--config", "colour=blue"}} {
		_, errOut, code := itest.Sluicectl(t, c, "", append([]string{"topic", "alter", "live"}, bad...)...)
		if code != 1 || !strings.Contains(errOut, "INVALID_CONFIG") {
			t.Fatalf("alter %v: exit %d, %s", bad, code, errOut)
		}
	}
	if _, errOut, code := itest.Sluicectl(t, c, "", "topic", "alter", "live"); code != 2 || !strings.Contains(errOut, "--config") {
		t.Fatalf("alter without a change: exit %d, %s", code, errOut)
	}

	out := itest.MustSluicectl(t, c, "topic", "alter", "live", "--config", "retention.bytes=4096")
	if !strings.Contains(out, "retention.bytes=4096") || !strings.Contains(out, "segment.bytes=4096") {
		t.Fatalf("alter output: %q", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := firstOffset()
		if n, err := strconv.Atoi(got); err == nil && n > 0 {
			t.Logf("retention deleted the segments below offset %d after the change", n)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retention.bytes=4096 never took effect: first offset still %s", got)
		}
		time.Sleep(200 * time.Millisecond)
	}

	itest.MustSluicectl(t, c, "topic", "alter", "live", "--delete-config", "retention.bytes")
	var topic cluster.Topic
	if err := json.Unmarshal([]byte(itest.MustSluicectl(t, c, "topic", "describe", "live", "-o", "json")), &topic); err != nil {
		t.Fatal(err)
	}
	if _, ok := topic.Config["retention.bytes"]; ok || topic.Config["segment.bytes"] != "4096" {
		t.Fatalf("config after --delete-config: %v", topic.Config)
	}
}

// TestTopicAddPartitions: `sluicectl topic add-partitions` warns that keys
// move, grows the topic through the frontend, and the storage nodes open the
// new partitions at once: an acks=all record to a new partition is written
// and read back. A total not above the current count is refused. It runs
// on the package's shared cluster (its topic is its own).
func TestTopicAddPartitions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.SharedCluster(t)
	itest.MustSluicectl(t, c, "topic", "create", "grow", "--partitions", "2", "--replication-factor", "3", "--config", "min.insync.replicas=2")
	out, errOut, code := itest.Sluicectl(t, c, "", "topic", "add-partitions", "grow", "--partitions", "4")
	if code != 0 || !strings.Contains(out, "now has 4 partitions") || !strings.Contains(errOut, "warning: keys") {
		t.Fatalf("add-partitions: exit %d, %q, %q", code, out, errOut)
	}
	deadline := time.Now().Add(30 * time.Second)
	for { // the frontend learns the new partitions from its metadata watch
		_, errOut, code := itest.Sluicectl(t, c, "new-partition-record\n", "produce", "grow", "--partition", "3", "--acks", "all")
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce to the new partition 3: exit %d, %s", code, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := strings.TrimSpace(itest.MustSluicectl(t, c, "consume", "grow", "--partition", "3", "--from-beginning", "--exit-at-end", "--format", `%p/%o %s\n`)); got != "3/0 new-partition-record" {
		t.Fatalf("partition 3 holds %q", got)
	}
	if _, errOut, code := itest.Sluicectl(t, c, "", "topic", "add-partitions", "grow", "--partitions", "3"); code != 1 || !strings.Contains(errOut, "INVALID_PARTITIONS") {
		t.Fatalf("shrinking: exit %d, %s", code, errOut)
	}
}

// TestTopicDescribeShowsReplicas: `sluicectl topic describe` reports every
// replica's role, ISR membership, log range, high watermark and lag, as the
// storage nodes report them: all caught up after an acks=all load; a killed
// node's replica is left out while the others move on; once it is back it
// catches up to the leader's log end (lag 0).
func TestTopicDescribeShowsReplicas(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	itest.CreateReplicated(t, ctx, c, "shown", 1, "2")
	itest.WaitFullISR(t, ctx, c, "shown", 3)
	itest.ProduceInRequests(t, c, "shown", "a", 50, 10)
	describe := func() itest.DescribedTopicJSON {
		t.Helper()
		out, errOut, code := itest.Sluicectl(t, c, "", "topic", "describe", "shown", "-o", "json")
		if code != 0 {
			t.Fatalf("describe: exit %d: %s", code, errOut)
		}
		var d itest.DescribedTopicJSON
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("describe JSON %q: %v", out, err)
		}
		return d
	}
	waitReplicas := func(what string, ok func(itest.DescribedTopicJSON) bool) itest.DescribedTopicJSON {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			d := describe()
			if ok(d) {
				return d
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: replicas %+v", what, d.Replicas)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	allAt := func(n int, end int64) func(itest.DescribedTopicJSON) bool {
		return func(d itest.DescribedTopicJSON) bool {
			leaders := 0
			for _, r := range d.Replicas {
				if r.Leader {
					leaders++
				}
				if r.LogEndOffset != end || r.HighWatermark != end || r.Lag != 0 || !r.InSync {
					return false
				}
			}
			return len(d.Replicas) == n && leaders == 1
		}
	}
	waitReplicas("three replicas at offset 50, in sync, lag 0", allAt(3, 50))

	c.StopProc(c.Proc("storage-3"), true)
	itest.ProduceInRequests(t, c, "shown", "b", 20, 10)
	waitReplicas("two replicas at 70 while storage-3 is down", allAt(2, 70))
	// cluster status lists the under-replicated partition replica by replica
	// and the dead node's replica as out of sync.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			UnderReplicated int `json:"under_replicated_partitions"`
			Load            []struct {
				Node      int32 `json:"node"`
				Replicas  int   `json:"replicas"`
				OutOfSync int   `json:"out_of_sync"`
			} `json:"load"`
			Lagging []struct {
				Topic        string `json:"topic"`
				Node         int32  `json:"node"`
				LogEndOffset int64  `json:"log_end_offset"`
			} `json:"lagging"`
		}
		if err := json.Unmarshal([]byte(itest.MustSluicectl(t, c, "cluster", "status", "-o", "json")), &st); err != nil {
			t.Fatal(err)
		}
		ok := st.UnderReplicated == 1 && len(st.Lagging) == 2 && len(st.Load) == 3
		for _, l := range st.Lagging {
			ok = ok && l.Topic == "shown" && l.Node != 3 && l.LogEndOffset == 70
		}
		for _, l := range st.Load {
			ok = ok && l.Replicas == 1 && (l.OutOfSync == 1) == (l.Node == 3)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster status with storage-3 down: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.StartProc(ctx, c.Proc("storage-3")); err != nil {
		t.Fatal(err)
	}
	waitReplicas("storage-3 caught up: three replicas at 70", allAt(3, 70))
	out := itest.MustSluicectl(t, c, "topic", "describe", "shown")
	if !strings.Contains(out, "IN-SYNC") || !strings.Contains(out, "leader") || !strings.Contains(out, "follower") {
		t.Fatalf("describe table: %q", out)
	}
}
