package kafka

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// kcatMember is a running `kcat -G` balanced consumer (librdkafka's classic
// group protocol) and the values it printed.
type kcatMember struct {
	cmd  *exec.Cmd
	done chan struct{}

	mu     sync.Mutex
	values []string
	stderr bytes.Buffer
}

func startKcatMember(t *testing.T, kcat, boot, group, topic string) *kcatMember {
	t.Helper()
	return startKcatMemberWith(t, kcat, boot, group, topic, "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500")
}

// startKcatMemberWith is startKcatMember with more kcat arguments.
func startKcatMemberWith(t *testing.T, kcat, boot, group, topic string, more ...string) *kcatMember {
	t.Helper()
	args := append([]string{"-b", boot, "-G", group, topic, "-q", "-u", "-f", "%s\n",
		"-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=200"}, more...)
	cmd := exec.Command(kcat, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	k := &kcatMember{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &k.mu, w: &k.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(k.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			k.mu.Lock()
			k.values = append(k.values, sc.Text())
			k.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-k.done
		if t.Failed() {
			k.mu.Lock()
			t.Logf("kcat -G stderr: %s", k.stderr.String())
			k.mu.Unlock()
		}
	})
	return k
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// stop ends the member as Ctrl-C does: it commits and leaves the group.
func (k *kcatMember) stop() {
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	<-k.done
}

func (k *kcatMember) printed() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.values)
}

// waitKcat waits until the members together printed every value of want.
func waitKcat(t *testing.T, want []string, members ...*kcatMember) {
	t.Helper()
	testkit.Eventually(t, 90*time.Second, func() error {
		seen := map[string]bool{}
		for _, m := range members {
			for _, v := range m.printed() {
				seen[v] = true
			}
		}
		missing := 0
		for _, v := range want {
			if !seen[v] {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d records not consumed yet", missing, len(want))
		}
		return nil
	})
}

// waitNoLag waits until the group committed every partition's end.
func waitNoLag(t *testing.T, ctx context.Context, c *localcluster.Cluster, group string) *groups.Description {
	t.Helper()
	gc := groups.NewClient(c.OffsetsURLs())
	var d *groups.Description
	testkit.Eventually(t, 30*time.Second, func() error {
		var err error
		if d, err = gc.Describe(ctx, group); err != nil {
			return err
		}
		for _, p := range d.Partitions {
			if p.Lag != 0 {
				return fmt.Errorf("group %s: %s-%d lags by %d", group, p.Topic, p.Partition, p.Lag)
			}
		}
		return nil
	})
	return d
}

// TestKafkaGroupsKcat: three kcat balanced consumers (librdkafka, classic
// protocol) join a group on a 6-partition topic and leave one by one while
// records keep coming; every record is consumed, every commit lands, and a
// member started afterwards resumes at the group's commits.
func TestKafkaGroupsKcat(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	kcat := itest.NeedTool(t, "kcat", "kcat")
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "kg", 6, 3)
	boot := strings.Join(c.KafkaAddrs(), ",")

	values := itest.ProduceValues(t, c, "kg", "a", 1200)
	k1 := startKcatMember(t, kcat, boot, "kgroup", "kg")
	k2 := startKcatMember(t, kcat, boot, "kgroup", "kg")
	k3 := startKcatMember(t, kcat, boot, "kgroup", "kg")
	testkit.Eventually(t, 60*time.Second, func() error {
		d, err := groups.NewClient(c.OffsetsURLs()).Describe(ctx, "kgroup")
		if err != nil {
			return err
		}
		if len(d.Members) != 3 || d.State != groups.StateStable || d.Protocol != groups.ProtocolClassic || d.ProtocolType != "consumer" {
			return fmt.Errorf("group: %d members, %s, %s/%s", len(d.Members), d.State, d.Protocol, d.ProtocolType)
		}
		for _, m := range d.Members {
			if n := len(groups.Flatten(m.Assignment)); n != 2 {
				return fmt.Errorf("member %s holds %d partitions, want 2", m.MemberID, n)
			}
		}
		return nil
	})
	waitKcat(t, values, k1, k2, k3)

	k3.stop()
	values = append(values, itest.ProduceValues(t, c, "kg", "b", 600)...)
	waitKcat(t, values, k1, k2, k3)
	k2.stop()
	values = append(values, itest.ProduceValues(t, c, "kg", "c", 600)...)
	waitKcat(t, values, k1, k2, k3)
	k1.stop()
	d := waitNoLag(t, ctx, c, "kgroup")
	if len(d.Members) != 0 {
		t.Fatalf("members after every kcat left: %+v", d.Members)
	}

	// A member started now resumes at the commits: it reads the new
	// records and none of the first ones.
	later := itest.ProduceValues(t, c, "kg", "d", 300)
	k4 := startKcatMember(t, kcat, boot, "kgroup", "kg")
	waitKcat(t, later, k4)
	for _, v := range k4.printed() {
		if !strings.HasPrefix(v, "d-") {
			t.Fatalf("the restarted member consumed %q again, before the group's commits", v)
		}
	}
	k4.stop()
}

// startKafkaMember runs a franz-go group member (sluice-kafkamember) of the
// classic protocol or KIP-848's ("consumer") through the frontends' Kafka
// listeners; it is killed when the test ends.
func startKafkaMember(t *testing.T, c *localcluster.Cluster, name, group, topic, protocol string, args ...string) *itest.Member {
	t.Helper()
	return itest.StartMemberProc(t, "sluice-kafkamember", name,
		append([]string{"-brokers", strings.Join(c.KafkaAddrs(), ","), "-group", group, "-topic", topic, "-client-id", name, "-protocol", protocol}, args...))
}

// TestKafkaGroupsFranzGo runs the ownership check of
// TestGroupOwnershipThroughJoinsLeavesAndCrash on franz-go members, with
// the classic protocol and with KIP-848's: members join, leave cleanly and
// die by kill -9, the offsets Raft leader is killed during a rebalance;
// no partition has two owners at any moment, every record is processed,
// the commits survive, and a dead member's commit is refused.
func TestKafkaGroupsFranzGo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	for _, proto := range []string{"classic", "consumer"} {
		t.Run(proto, func(t *testing.T) {
			topic, group := "fg-"+proto, "fgroup-"+proto
			itest.CreateTopic(t, ctx, c, topic, 6, 3)
			values := itest.ProduceValues(t, c, topic, "a", 2000)
			slow := []string{"-record-delay", "200us"}
			m1 := startKafkaMember(t, c, "m1", group, topic, proto, slow...)
			itest.WaitOwnership(t, 6, []int{6}, m1)
			m2 := startKafkaMember(t, c, "m2", group, topic, proto, slow...)
			m3 := startKafkaMember(t, c, "m3", group, topic, proto, slow...)
			itest.WaitOwnership(t, 6, []int{2, 2, 2}, m1, m2, m3)
			values = append(values, itest.ProduceValues(t, c, topic, "b", 1000)...)

			m2.Stop()
			itest.WaitOwnership(t, 6, []int{3, 3}, m1, m3)
			m4 := startKafkaMember(t, c, "m4", group, topic, proto, slow...)
			itest.WaitOwnership(t, 6, []int{2, 2, 2}, m1, m3, m4)

			// m3's identity, for its commit after its death.
			zombie := memberOf(t, ctx, c, group, "m3")
			m3.Kill()
			itest.WaitOwnership(t, 6, []int{3, 3}, m1, m4)
			values = append(values, itest.ProduceValues(t, c, topic, "c", 1000)...)
			zombieCommit(t, ctx, c, group, topic, zombie)

			// The offsets leader dies while a rebalance is under way (a
			// member just started): the members find the new leader and
			// rejoin, and the rebalance completes there.
			leader := itest.OffsetsLeader(t, c)
			m5 := startKafkaMember(t, c, "m5", group, topic, proto, slow...)
			testkit.Eventually(t, 30*time.Second, func() error { // the rebalance began
				d, err := groups.NewClient(c.OffsetsURLs()).Describe(ctx, group)
				if err != nil {
					return err
				}
				if d.State != groups.StateStable || slices.ContainsFunc(d.Members, func(m groups.MemberDescription) bool { return m.ClientID == "m5" }) {
					return nil
				}
				return fmt.Errorf("group %s: %s, m5 not seen yet", group, d.State)
			})
			c.StopProc(leader, true)
			values = append(values, itest.ProduceValues(t, c, topic, "d", 1000)...)
			itest.WaitOwnership(t, 6, []int{2, 2, 2}, m1, m4, m5)
			itest.WaitProcessed(t, values, m1, m2, m3, m4, m5)
			if err := c.StartProc(ctx, leader); err != nil {
				t.Fatal(err)
			}
			m1.Stop()
			m4.Stop()
			m5.Stop()
			itest.CheckExclusiveOwnership(t, m1, m2, m3, m4, m5)
			d := waitNoLag(t, ctx, c, group)
			want := groups.ProtocolClassic
			if proto == "consumer" {
				want = groups.ProtocolConsumer
			}
			if d.Protocol != want {
				t.Fatalf("group protocol %q, want %q", d.Protocol, want)
			}
		})
	}
}

// zombieIdentity is a member's id and generation (classic) or epoch (848).
type zombieIdentity struct {
	id    string
	epoch int32
}

// memberOf finds the group member whose client id is clientID.
func memberOf(t *testing.T, ctx context.Context, c *localcluster.Cluster, group, clientID string) zombieIdentity {
	t.Helper()
	d, err := groups.NewClient(c.OffsetsURLs()).Describe(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range d.Members {
		if m.ClientID == clientID {
			return zombieIdentity{m.MemberID, m.MemberEpoch}
		}
	}
	t.Fatalf("group %s has no member with client id %s: %+v", group, clientID, d.Members)
	return zombieIdentity{}
}

// zombieCommit commits as a member that died and was removed: the offsets
// service refuses it.
func zombieCommit(t *testing.T, ctx context.Context, c *localcluster.Cluster, group, topic string, z zombieIdentity) {
	t.Helper()
	cl := itest.FranzClient(t, c)
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, z.id, z.epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, topics[topic].ID // v10 names topics by id
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	code := protocol.Code(resp.Topics[0].Partitions[0].ErrorCode)
	if code != protocol.UnknownMemberID && code != protocol.IllegalGeneration && code != protocol.FencedMemberEpoch && code != protocol.StaleMemberEpoch {
		t.Fatalf("a dead member's commit was answered %v", code)
	}
}

// TestKafkaGroupsStaticMember: a static member (group.instance.id)
// restarted within its session timeout gets its partitions back without a
// rebalance: the other member keeps its partitions throughout and the
// generation (group epoch) does not move. In the classic protocol the
// member is killed; in KIP-848's it stops (franz-go's close sends the
// temporary leave, epoch -2, without which the instance id stays taken
// until the session expires, as in Kafka).
func TestKafkaGroupsStaticMember(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, proto := range []string{"classic", "consumer"} {
		t.Run(proto, func(t *testing.T) {
			topic, group := "st-"+proto, "static-"+proto
			itest.CreateTopic(t, ctx, c, topic, 6, 1)
			values := itest.ProduceValues(t, c, topic, "a", 600)
			static := []string{"-session-timeout", "20s"}
			s1 := startKafkaMember(t, c, "s1", group, topic, proto, append(static, "-instance-id", "i1")...)
			s2 := startKafkaMember(t, c, "s2", group, topic, proto, append(static, "-instance-id", "i2")...)
			itest.WaitOwnership(t, 6, []int{3, 3}, s1, s2)
			itest.WaitProcessed(t, values, s1, s2)
			before := waitNoLag(t, ctx, c, group)
			held := s1.OwnedNow()
			s2Events, _ := s2.Snapshot()

			if proto == "classic" {
				s1.Kill()
			} else {
				s1.Stop()
			}
			s1b := startKafkaMember(t, c, "s1b", group, topic, proto, append(static, "-instance-id", "i1")...)
			itest.WaitOwnership(t, 6, []int{3, 3}, s1b, s2)
			if got := s1b.OwnedNow(); !slices.Equal(got, held) {
				t.Fatalf("the restarted static member owns %v, it held %v", got, held)
			}
			after, _ := s2.Snapshot()
			for _, e := range after[len(s2Events):] {
				if e.Ev == "assign" || e.Ev == "revoke" || e.Ev == "lost" {
					t.Fatalf("the other member saw a rebalance: %+v (held %v; events after %+v)", e, held, after[len(s2Events):])
				}
			}
			more := itest.ProduceValues(t, c, topic, "b", 300)
			itest.WaitProcessed(t, more, s1b, s2)
			d := waitNoLag(t, ctx, c, group)
			if d.GroupEpoch != before.GroupEpoch {
				t.Fatalf("generation moved from %d to %d", before.GroupEpoch, d.GroupEpoch)
			}
			instances := map[string]bool{}
			for _, m := range d.Members {
				instances[m.InstanceID] = true
			}
			if !instances["i1"] || !instances["i2"] || len(d.Members) != 2 {
				t.Fatalf("members: %+v", d.Members)
			}
		})
	}
}

// TestKafkaGroupsPython: kafka-python's group consumer with auto-commit
// reads a topic, stops, and resumes at its commit after a restart.
func TestKafkaGroupsPython(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	python := itest.NeedPython(t, "kafka", "python3-kafka")
	c := itest.StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "py", 3, 1)
	script := `
import sys
from kafka import KafkaConsumer
want = int(sys.argv[2])
c = KafkaConsumer("py", bootstrap_servers=sys.argv[1], group_id="pygroup", auto_offset_reset="earliest",
                  enable_auto_commit=True, auto_commit_interval_ms=200, consumer_timeout_ms=30000)
seen = 0
for m in c:
    print(m.value.decode())
    seen += 1
    if seen == want:
        break
c.close(autocommit=True)
`
	first := itest.ProduceValues(t, c, "py", "a", 500)
	out := run(t, 2*time.Minute, "", python, "-c", script, c.KafkaAddrs()[0], "500")
	if got := strings.Fields(out); len(got) != 500 || !sameSet(got, first) {
		t.Fatalf("first run read %d records", len(got))
	}
	waitNoLag(t, ctx, c, "pygroup")
	second := itest.ProduceValues(t, c, "py", "b", 200)
	out = run(t, 2*time.Minute, "", python, "-c", script, c.KafkaAddrs()[0], "200")
	if got := strings.Fields(out); !sameSet(got, second) {
		t.Fatalf("after the restart kafka-python read %d records (%v...), want the 200 new ones", len(got), got[:min(5, len(got))])
	}
}

func sameSet(a, b []string) bool {
	as, bs := slices.Clone(a), slices.Clone(b)
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}

// TestKafkaAndSDKGroups: an SDK group and a Kafka group read one topic
// independently and sluicectl shows both; then one group is read by Kafka
// members and by SDK members in turn, each resuming at the other's commits.
func TestKafkaAndSDKGroups(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "mixed", 4, 1)
	values := itest.ProduceValues(t, c, "mixed", "a", 800)
	sdk := itest.StartMember(t, c, "sdk", "sdk-group", "mixed")
	kafkaM := startKafkaMember(t, c, "kafka", "kafka-group", "mixed", "classic")
	itest.WaitProcessed(t, values, sdk)
	itest.WaitProcessed(t, values, kafkaM)
	out, _, code := itest.Sluicectl(t, c, "", "group", "list")
	if code != 0 || !strings.Contains(out, "sdk-group") || !strings.Contains(out, "kafka-group") || !strings.Contains(out, "classic") {
		t.Fatalf("sluicectl group list:\n%s", out)
	}
	out, _, code = itest.Sluicectl(t, c, "", "group", "describe", "kafka-group")
	if code != 0 || !strings.Contains(out, "classic") || !strings.Contains(out, "kafka") {
		t.Fatalf("sluicectl group describe kafka-group:\n%s", out)
	}
	sdk.Stop()
	kafkaM.Stop()

	// One group, read in turn: Kafka members' commits are where the SDK
	// member starts, and the other way round.
	hand := startKafkaMember(t, c, "k1", "handover", "mixed", "consumer")
	itest.WaitProcessed(t, values, hand)
	hand.Stop()
	waitNoLag(t, ctx, c, "handover")
	second := itest.ProduceValues(t, c, "mixed", "b", 200)
	s := itest.StartMember(t, c, "s1", "handover", "mixed")
	itest.WaitProcessed(t, second, s)
	s.Stop()
	waitNoLag(t, ctx, c, "handover")
	third := itest.ProduceValues(t, c, "mixed", "c", 200)
	k2 := startKafkaMember(t, c, "k2", "handover", "mixed", "classic")
	itest.WaitProcessed(t, third, k2)
	k2.Stop()
	for name, m := range map[string]*itest.Member{"sdk": s, "kafka": k2} {
		for _, v := range m.Processed() {
			if strings.HasPrefix(v, "a-") || (name == "kafka" && strings.HasPrefix(v, "b-")) {
				t.Fatalf("the %s member read %q, before the group's commits", name, v)
			}
		}
	}
}

// TestKafkaGroupAdminAndBadInput: kadm lists, describes and deletes Kafka
// groups and their offsets (with the leader epochs franz-go committed);
// malformed group requests, assignments naming partitions that do not
// exist, huge metadata and a flood of joins get clear errors, and the
// cluster serves on.
func TestKafkaGroupAdminAndBadInput(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1, Extra: map[string][]string{"offsets": {"-max-group-size=50"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "adm", 2, 1)
	values := itest.ProduceValues(t, c, "adm", "a", 100)
	cl := itest.FranzClient(t, c)
	adm := kadm.NewClient(cl)

	m := startKafkaMember(t, c, "adm1", "admgroup", "adm", "classic")
	itest.WaitProcessed(t, values, m)
	waitNoLag(t, ctx, c, "admgroup")
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := listed["admgroup"]; !ok || g.ProtocolType != "consumer" || g.State != "Stable" {
		t.Fatalf("ListGroups: %+v", listed)
	}
	described, err := adm.DescribeGroups(ctx, "admgroup")
	if err != nil {
		t.Fatal(err)
	}
	dg := described["admgroup"]
	if dg.Err != nil || len(dg.Members) != 1 || dg.Members[0].ClientID != "adm1" || !strings.HasPrefix(dg.Members[0].ClientHost, "/127.0.0.1") {
		t.Fatalf("DescribeGroups: %+v", dg)
	}
	if ca, ok := dg.Members[0].Assigned.AsConsumer(); !ok || len(ca.Topics) != 1 || len(ca.Topics[0].Partitions) != 2 {
		t.Fatalf("DescribeGroups assignment: %+v", dg.Members[0].Assigned)
	}
	fetched, err := adm.FetchOffsets(ctx, "admgroup")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	fetched.Each(func(o kadm.OffsetResponse) {
		total += o.At
		// franz-go commits the leader epoch of the records it read; it
		// comes back, for it to check the log on resuming.
		if o.LeaderEpoch < 0 {
			t.Errorf("fetched offset of %s-%d: leader epoch %d, want the committed one", o.Topic, o.Partition, o.LeaderEpoch)
		}
	})
	if total != 100 {
		t.Fatalf("fetched offsets sum to %d, want 100", total)
	}
	// Offsets of a topic the group reads stay; the group cannot go while
	// it has a member.
	ds, err := adm.DeleteOffsets(ctx, "admgroup", kadm.TopicsSet{"adm": {0: {}}})
	if err != nil || ds.Error() == nil {
		t.Fatalf("OffsetDelete of a topic a member reads: %v, %v", ds, err)
	}
	if r, err := adm.DeleteGroups(ctx, "admgroup"); err != nil || r["admgroup"].Err == nil {
		t.Fatalf("DeleteGroups of a group with a member: %+v, %v", r, err)
	}
	m.Stop()
	testkit.Eventually(t, 30*time.Second, func() error {
		ds, err := adm.DeleteOffsets(ctx, "admgroup", kadm.TopicsSet{"adm": {0: {}}})
		if err != nil {
			return err
		}
		return ds.Error()
	})
	if r, err := adm.DeleteGroups(ctx, "admgroup"); err != nil || r["admgroup"].Err != nil {
		t.Fatalf("DeleteGroups of an empty group: %+v, %v", r, err)
	}

	// Bad input, answered with Kafka's codes.
	join := func(group string, mutate func(*kmsg.JoinGroupRequest)) protocol.Code {
		t.Helper()
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = group, 6000, 6000, "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0}
		req.Protocols = append(req.Protocols, p)
		mutate(req)
		resp, err := req.RequestWith(ctx, cl)
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return protocol.Code(ke.Code) // FindCoordinator's answer (a bad group id)
		}
		if err != nil {
			t.Fatal(err)
		}
		return protocol.Code(resp.ErrorCode)
	}
	for name, c := range map[string]struct {
		mutate func(*kmsg.JoinGroupRequest)
		want   protocol.Code
	}{
		"group id":        {func(r *kmsg.JoinGroupRequest) { r.Group = "bad group!" }, protocol.InvalidGroupID},
		"session timeout": {func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 1 }, protocol.InvalidSessionTimeout},
		"no protocol":     {func(r *kmsg.JoinGroupRequest) { r.Protocols = nil }, protocol.InconsistentGroupProtocol},
		"huge metadata":   {func(r *kmsg.JoinGroupRequest) { r.Protocols[0].Metadata = make([]byte, 2<<20) }, protocol.InvalidRequest},
	} {
		if got := join("bad", c.mutate); got != c.want {
			t.Fatalf("JoinGroup with a bad %s: %v, want %v", name, got, c.want)
		}
	}
	// A flood of first joins: past -max-group-size each is refused.
	refused := 0
	for i := 0; i < 60; i++ {
		if join("flood", func(*kmsg.JoinGroupRequest) {}) == protocol.GroupMaxSizeReached {
			refused++
		}
	}
	if refused != 10 {
		t.Fatalf("%d of 60 joins refused with GROUP_MAX_SIZE_REACHED, want the 10 past the limit of 50", refused)
	}
	// A leader whose assignment names a partition that does not exist.
	first := kmsg.NewPtrJoinGroupRequest()
	first.Group, first.SessionTimeoutMillis, first.RebalanceTimeoutMillis, first.ProtocolType = "badassign", 6000, 6000, "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"adm"}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	first.Protocols = append(first.Protocols, p)
	jr, err := first.RequestWith(ctx, cl)
	if err != nil || jr.ErrorCode != int16(protocol.MemberIDRequired) {
		t.Fatalf("first join: %+v, %v", jr, err)
	}
	first.MemberID = jr.MemberID
	if jr, err = first.RequestWith(ctx, cl); err != nil || jr.ErrorCode != 0 || jr.LeaderID != jr.MemberID {
		t.Fatalf("second join: %+v, %v", jr, err)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = "badassign", jr.Generation, jr.MemberID
	ca := kmsg.NewConsumerMemberAssignment()
	ca.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "adm", Partitions: []int32{0, 7}}}
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: ca.AppendTo(nil)}}
	sr, err := sync.RequestWith(ctx, cl)
	if err != nil || sr.ErrorCode != int16(protocol.InvalidRequest) {
		t.Fatalf("SyncGroup naming partition 7 of a 2-partition topic: %+v, %v", sr, err)
	}
	// Everything still serves.
	for _, p := range c.Procs {
		if !alive(p) {
			t.Fatalf("%s died", p.Name)
		}
	}
	m2 := startKafkaMember(t, c, "adm2", "after", "adm", "consumer")
	itest.WaitProcessed(t, values, m2)

	// KIP-848's describe: the consumer group with its member and
	// assignment; a classic group is not one of them.
	testkit.Eventually(t, 30*time.Second, func() error {
		cgs, err := adm.DescribeConsumerGroups(ctx, "after", "badassign")
		if err != nil {
			return err
		}
		g := cgs["after"]
		if g.Err != nil || g.State != "Stable" || len(g.Members) != 1 || g.Members[0].ClientID != "adm2" || len(g.Members[0].Assignment["adm"]) != 2 {
			return fmt.Errorf("ConsumerGroupDescribe of a KIP-848 group: %+v", g)
		}
		if !errors.Is(cgs["badassign"].Err, kerr.GroupIDNotFound) {
			return fmt.Errorf("ConsumerGroupDescribe of a classic group: %v", cgs["badassign"].Err)
		}
		return nil
	})
	// A transactional id's coordinator is a frontend, as a group's is.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{"txn-1"}
	fr, err := fc.RequestWith(ctx, cl)
	if err != nil || len(fr.Coordinators) != 1 || fr.Coordinators[0].ErrorCode != 0 || fr.Coordinators[0].NodeID < 0 {
		t.Fatalf("FindCoordinator for a transactional id: %+v, %v", fr, err)
	}
}
