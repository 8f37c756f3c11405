package containers

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	sluice "github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// testPauseMetadataLeader: freeze the metadata Raft leader (docker pause)
// under an idempotent acks=all load; a topic is created through the other
// voters during the pause, a new leader is elected, and once the old one is
// unpaused every acknowledged record is in the log once, in per-key order.
func testPauseMetadataLeader(t *testing.T, c *tcCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, partitions = "tc-meta-pause", 3
	c.createTopic(t, ctx, topic, partitions, 3)
	c.waitFullISR(t, ctx, topic, 3)

	old := c.raftLeader(t, ctx, "metadata", "7072/tcp", nil)
	var others []string
	for i := 1; i <= 3; i++ {
		if fmt.Sprintf("metadata-%d", i) != old {
			others = append(others, c.metadataURLs[i-1])
		}
	}

	p := c.producer(t)
	stop := make(chan struct{})
	done := make(chan *loadcheck.KeyedLoad)
	go func() { done <- runKeyedLoad(t, p, topic, 30, stop) }()
	time.Sleep(time.Second)
	t.Logf("pausing %s, the metadata Raft leader", old)
	c.pause(old)
	paused := true
	defer func() {
		if paused {
			c.unpause(old)
		}
	}()

	// A new topic through the remaining voters: served once they elected a
	// new controller.
	const created = "tc-meta-pause-new"
	admin := cluster.NewClient(others)
	deadline := time.Now().Add(15 * time.Second)
	for {
		actx, acancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := admin.CreateTopic(actx, cluster.CreateTopicRequest{Name: created, Partitions: 2, ReplicationFactor: 3,
			Config: map[string]string{"min.insync.replicas": "2"}})
		acancel()
		if err == nil || protocol.CodeOf(err) == protocol.TopicAlreadyExists {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create topic %s during the pause: %v", created, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	newLeader := c.raftLeader(t, ctx, "metadata", "7072/tcp", []string{old})
	t.Logf("%s is the new metadata leader; topic %s created during the pause", newLeader, created)
	if _, err := admin.DescribeTopic(ctx, created); err != nil {
		t.Fatalf("describe %s: %v", created, err)
	}

	c.unpause(old)
	paused = false
	time.Sleep(2 * time.Second)
	close(stop)
	l := <-done
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(l.AckedSet()) == 0 {
		t.Fatal("nothing acknowledged")
	}
	l.RequireAllAcknowledged(t, ": the producer should ride out the metadata failover")
	c.waitFullISR(t, ctx, created, 3)
	loadcheck.CheckExactlyOnceInOrder(t, c.readValues(t, ctx, topic, partitions), l)
}

// testKillOffsetsReplica: a group reads part of a topic and commits; the
// offsets Raft leader is killed (kill -9); the remaining replicas answer the
// same committed offsets, and a new member of the group resumes exactly
// there and reads the rest, so every record is read at least once.
func testKillOffsetsReplica(t *testing.T, c *tcCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, partitions, group = "tc-offsets-kill", 3, "tc-offsets-group"
	c.createTopic(t, ctx, topic, partitions, 3)
	c.waitFullISR(t, ctx, topic, 3)

	p := c.producer(t)
	l := loadcheck.NewKeyedLoad()
	l.SendN(t, p, topic, 20, 3000)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l.RequireAllAcknowledged(t, "")
	stored := c.readValues(t, ctx, topic, partitions)
	loadcheck.CheckExactlyOnceInOrder(t, stored, l)

	// First member: read about half, commit, read a little more (not
	// committed), leave without committing.
	seen := map[string]bool{}
	first := c.groupConsumer(t, group, topic, c.offsetsURLs, false)
	read := 0
	for read < 1500 {
		recs := pollOnce(t, ctx, first)
		for _, r := range recs {
			seen[string(r.Value)] = true
		}
		read += len(recs)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	for extra := 0; extra < 200; {
		extra += len(pollOnce(t, ctx, first))
	}
	if err := first.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	before, err := groups.NewClient(c.offsetsURLs).Offsets(ctx, group, topic)
	if err != nil || len(before) == 0 {
		t.Fatalf("committed offsets: %v %v", before, err)
	}
	committed := map[int32]int64{}
	for _, o := range before {
		committed[o.Partition] = o.Offset
	}
	t.Logf("first member read %d records, committed %v", read, committed)

	leader := c.raftLeader(t, ctx, "offsets", "7082/tcp", nil)
	t.Logf("killing %s, the offsets Raft leader", leader)
	c.kill(leader)
	var rest []string
	for i := 1; i <= 3; i++ {
		if fmt.Sprintf("offsets-%d", i) != leader {
			rest = append(rest, c.offsetsURLs[i-1])
		}
	}

	deadline := time.Now().Add(15 * time.Second)
	for {
		octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
		after, err := groups.NewClient(rest).Offsets(octx, group, topic)
		ocancel()
		if err == nil {
			got := map[int32]int64{}
			for _, o := range after {
				got[o.Partition] = o.Offset
			}
			if fmt.Sprint(got) != fmt.Sprint(committed) {
				t.Fatalf("committed offsets changed across the kill: %v, then %v", committed, got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets through the remaining replicas: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Second member: resumes at the committed offsets and reads the rest.
	second := c.groupConsumer(t, group, topic, rest, true)
	defer second.Close(context.Background())
	firstOffset := map[int32]int64{}
	left := 0
	for part, values := range stored {
		left += len(values) - int(committed[part])
	}
	deadline = time.Now().Add(30 * time.Second)
	for got := 0; got < left; {
		if time.Now().After(deadline) {
			t.Fatalf("second member read %d of the %d uncommitted records", got, left)
		}
		for _, r := range pollOnce(t, ctx, second) {
			if _, ok := firstOffset[r.Partition]; !ok {
				firstOffset[r.Partition] = r.Offset
			}
			if r.Offset >= committed[r.Partition] {
				got++
			}
			seen[string(r.Value)] = true
		}
	}
	for part, values := range stored {
		off, ok := firstOffset[part]
		if int64(len(values)) > committed[part] && (!ok || off != committed[part]) {
			t.Fatalf("second member resumed partition %d at %d (read: %v), committed %d", part, off, ok, committed[part])
		}
	}
	for v := range l.AckedSet() {
		if !seen[v] {
			t.Fatalf("acknowledged record %s was read by neither member", v)
		}
	}
	t.Logf("both members read all %d records; the second resumed at %v", len(seen), firstOffset)

	// The killed replica comes back from its disk and rejoins.
	c.restart(leader)
}

// groupConsumer starts a member of group, subscribed to topic, over the
// given offsets replicas.
func (c *tcCluster) groupConsumer(t *testing.T, group, topic string, offsets []string, autoCommit bool) *sluice.Consumer {
	t.Helper()
	cfg := sluice.DefaultConsumerConfig()
	cfg.Metadata = c.metadataURLs
	cfg.Offsets = offsets
	cfg.Group = group
	cfg.Topics = []string{topic}
	cfg.ClientID = group + "-member"
	cfg.AutoCommit = autoCommit
	cfg.AutoOffsetReset = sluice.OffsetResetEarliest
	cfg.Logger = loadcheck.QuietLogger()
	cons, err := sluice.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cons
}

func pollOnce(t *testing.T, ctx context.Context, cons *sluice.Consumer) []sluice.ConsumerRecord {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("poll: %v", ctx.Err())
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	recs, err := cons.Poll(pctx)
	if err != nil && pctx.Err() == nil {
		t.Fatalf("poll: %v", err)
	}
	return recs
}

// raftLeader returns the container of service (metadata or offsets) whose
// admin /metrics reports it Raft leader, skipping those in exclude; it waits
// up to 15s for one.
func (c *tcCluster) raftLeader(t *testing.T, ctx context.Context, service, adminPort string, exclude []string) string {
	t.Helper()
	metric := "sluice_" + service + "_raft_is_leader"
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		for i := 1; i <= 3; i++ {
			name := fmt.Sprintf("%s-%d", service, i)
			if slices.Contains(exclude, name) {
				continue
			}
			if metricValue(hc, c.endpoint(name, adminPort)+"/metrics", metric) == "1" {
				return name
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s Raft leader found", service)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// metricValue returns the value of an unlabelled metric, "" if unknown.
func metricValue(hc *http.Client, url, metric string) string {
	resp, err := hc.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, value, ok := strings.Cut(sc.Text(), " "); ok && name == metric {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// pause freezes a container's processes (docker pause).
func (c *tcCluster) pause(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker.ContainerPause(ctx, c.containerID(name), client.ContainerPauseOptions{}); err != nil {
		c.t.Fatalf("pause %s: %v", name, err)
	}
}

// unpause resumes a paused container (docker unpause).
func (c *tcCluster) unpause(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker.ContainerUnpause(ctx, c.containerID(name), client.ContainerUnpauseOptions{}); err != nil {
		c.t.Errorf("unpause %s: %v", name, err)
	}
}
