package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/shares"
)

// TestKafkaShareGroup runs franz-go's share consumer (kgo.ShareGroup)
// unchanged against two frontends' Kafka listeners: two consumers share
// 2,000 records of a 3-partition topic, releasing one record in ten once;
// every record is accepted exactly once by the group, the released ones come
// back at delivery 2, and ShareGroupDescribe lists the members. The group
// is configured as Kafka's admin clients do, with IncrementalAlterConfigs
// on a GROUP resource.
func TestKafkaShareGroup(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, Frontends: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "kq", 3, 3)
	kafkaShareGroupConfigs(t, ctx, itest.FranzClient(t, c), itest.FranzClient(t, c, kgo.SeedBrokers(c.StorageKafkaAddr(1))), "kshare")
	const n = 2000
	itest.ProduceValues(t, c, "kq", "k", n)

	var mu sync.Mutex
	accepted := map[string]int{}
	released := map[string]bool{}
	redelivered := 0
	consume := func(name string, done <-chan struct{}) {
		cl := itest.FranzClient(t, c, kgo.ShareGroup("kshare"), kgo.ConsumeTopics("kq"), kgo.ClientID(name))
		for {
			select {
			case <-done:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			var accept, release []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) {
				v := string(r.Value)
				mu.Lock()
				if r.DeliveryCount() > 1 {
					redelivered++
				}
				if !released[v] && r.Offset%10 == 0 {
					released[v] = true
					release = append(release, r)
				} else {
					accepted[v]++
					accept = append(accept, r)
				}
				mu.Unlock()
			})
			// MarkAcks without records marks every record of the poll.
			if len(release) > 0 {
				cl.MarkAcks(kgo.AckRelease, release...)
			}
			if len(accept) > 0 {
				cl.MarkAcks(kgo.AckAccept, accept...)
			}
			if err := cl.FlushAcks(ctx); err != nil && ctx.Err() == nil {
				t.Logf("%s: flushing acknowledgements: %v", name, err)
			}
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, name := range []string{"franz-a", "franz-b"} {
		wg.Add(1)
		go func() { defer wg.Done(); consume(name, done) }()
	}
	sh := shares.NewClient(c.OffsetsURLs())
	deadline := time.Now().Add(2 * time.Minute)
	for {
		d, err := sh.Describe(ctx, "kshare")
		var acc int64
		if err == nil {
			for _, p := range d.Partitions {
				acc += p.Accepted
			}
		}
		if acc == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group accepted %d of %d records: %+v, %v", acc, n, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The members, as Kafka's admin sees them, before they leave.
	admin := itest.FranzClient(t, c)
	dreq := kmsg.NewPtrShareGroupDescribeRequest()
	dreq.GroupIDs = []string{"kshare"}
	var members int
	if resp, err := dreq.RequestWith(ctx, admin); err == nil && len(resp.Groups) == 1 {
		members = len(resp.Groups[0].Members)
	}
	close(done)
	wg.Wait()

	// Bad session epochs: a fetch of a session the broker does not have,
	// and an acknowledgement outside a session.
	fr := kmsg.NewPtrShareFetchRequest()
	fr.GroupID, fr.MemberID, fr.ShareSessionEpoch = kmsg.StringPtr("kshare"), kmsg.StringPtr("nobody"), 7
	frontend := admin.SeedBrokers()[0] // share sessions live on the frontends
	if resp, err := frontend.Request(ctx, fr); err != nil || resp.(*kmsg.ShareFetchResponse).ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("a share fetch of an unknown session: %+v, %v", resp, err)
	}
	ar := kmsg.NewPtrShareAcknowledgeRequest()
	ar.GroupID, ar.MemberID, ar.ShareSessionEpoch = kmsg.StringPtr("kshare"), kmsg.StringPtr("nobody"), 0
	if resp, err := frontend.Request(ctx, ar); err != nil || resp.(*kmsg.ShareAcknowledgeResponse).ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("an acknowledgement outside a session: %+v, %v", resp, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		v := fmt.Sprintf("k-%d", i)
		if accepted[v] != 1 {
			t.Fatalf("%s accepted %d times", v, accepted[v])
		}
	}
	if redelivered < len(released) {
		t.Fatalf("%d records released, %d delivered again", len(released), redelivered)
	}
	t.Logf("franz-go share consumers: %d records accepted once each, %d released and delivered again; ShareGroupDescribe lists %d members", n, len(released), members)
	if members != 2 {
		t.Fatalf("ShareGroupDescribe lists %d members, want 2", members)
	}
	shareRenewal(t, ctx, c)
	shareOffsetsAdmin(t, ctx, c)
}

// shareOffsetsAdmin resets a share group with Kafka's admin APIs (franz-go's
// kadm): a group that read a topic's 2,000 records describes its start
// offsets at the partitions' ends; altering them is refused while a member
// is in the group, then moves them back to 0 and the group reads every
// record again; deleting the topic's offsets removes the group's state of it.
func shareOffsetsAdmin(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	const group, topic, n = "kreset", "kq", 2000
	itest.ConfigureShareGroup(t, ctx, c, group, map[string]string{shares.ConfigAutoOffsetReset: "earliest"})
	adm := kadm.NewClient(itest.FranzClient(t, c))
	starts := func() map[int32]int64 {
		t.Helper()
		described, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err != nil || described[group].Err != nil {
			t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, described)
		}
		out := map[int32]int64{}
		for _, ps := range described[group].Offsets {
			for p, o := range ps {
				if o.Err != nil {
					t.Fatalf("DescribeShareGroupOffsets of %s-%d: %v", topic, p, o.Err)
				}
				out[p] = o.StartOffset
			}
		}
		return out
	}
	reader := readShared(t, ctx, c, group, topic, n)
	var total int64
	for _, o := range starts() {
		total += o
	}
	if total < n { // the ends of the partitions, past the records
		t.Fatalf("start offsets after reading every record add up to %d, want at least %d", total, n)
	}
	back := kadm.Offsets{}
	for p := range int32(3) {
		back.Add(kadm.Offset{Topic: topic, Partition: p, At: 0})
	}
	if _, err := adm.AlterShareGroupOffsets(ctx, group, back); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("AlterShareGroupOffsets with a member in the group: %v, want NON_EMPTY_GROUP", err)
	}
	if err := reader.LeaveGroupContext(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		altered, err := adm.AlterShareGroupOffsets(ctx, group, back)
		if err == nil {
			err = altered.Error()
		}
		return err
	})
	for p, o := range starts() {
		if o != 0 {
			t.Fatalf("after AlterShareGroupOffsets %s-%d starts at %d, want 0", topic, p, o)
		}
	}
	again := readShared(t, ctx, c, group, topic, n)
	if err := again.LeaveGroupContext(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		deleted, err := adm.DeleteShareGroupOffsets(ctx, group, topic)
		if err == nil {
			err = deleted.Error()
		}
		return err
	})
	if left := starts(); len(left) != 0 {
		t.Fatalf("after DeleteShareGroupOffsets the group still has %v", left)
	}
}

// readShared reads n records of a topic with a franz-go share consumer of
// group, accepting each, and returns the consumer (still a member).
func readShared(t *testing.T, ctx context.Context, c *localcluster.Cluster, group, topic string, n int) *kgo.Client {
	t.Helper()
	cl := itest.FranzClient(t, c, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(group+"-reader"))
	seen := map[string]bool{}
	deadline := time.Now().Add(time.Minute)
	for len(seen) < n {
		if time.Now().After(deadline) {
			t.Fatalf("share group %s read %d of %d records", group, len(seen), n)
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		cl.MarkAcks(kgo.AckAccept)
		if err := cl.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

// shareRenewal: a franz-go consumer renews the lock of a record it holds
// (AckRenew, ShareAcknowledge v2) past the group's 1 s lock duration and
// then accepts it; another consumer polling all along never gets it.
func shareRenewal(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	itest.CreateTopic(t, ctx, c, "krenew", 1, 3)
	itest.ConfigureShareGroup(t, ctx, c, "krenew", map[string]string{shares.ConfigAutoOffsetReset: "earliest", shares.ConfigLockDurationMs: "1000"})
	itest.ProduceValues(t, c, "krenew", "r", 1)
	// The client sends acknowledgements between its fetches: short
	// fetch waits let a renewal out well within the 1 s lock.
	holder := itest.FranzClient(t, c, kgo.ShareGroup("krenew"), kgo.ConsumeTopics("krenew"), kgo.ClientID("holder"), kgo.FetchMaxWait(100*time.Millisecond))
	var held *kgo.Record
	for held == nil && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		holder.PollFetches(pctx).EachRecord(func(r *kgo.Record) { held = r })
		pcancel()
	}
	other := itest.FranzClient(t, c, kgo.ShareGroup("krenew"), kgo.ConsumeTopics("krenew"), kgo.ClientID("other"))
	stolen := make(chan string, 1)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			other.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
				select {
				case stolen <- string(r.Value):
				default:
				}
			})
			pcancel()
		}
	}()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		holder.MarkAcks(kgo.AckRenew, held)
		if err := holder.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	holder.MarkAcks(kgo.AckAccept, held)
	if err := holder.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	select {
	case v := <-stolen:
		t.Fatalf("the other consumer got %s while its lock was renewed", v)
	default:
	}
	d, err := shares.NewClient(c.OffsetsURLs()).Describe(ctx, "krenew")
	// Deliveries may be 2: a client may drop a fetch answer its session
	// outran, and get the record again once that lock expires; what
	// renewals guarantee is that no one else gets it meanwhile and the
	// holder's accept lands.
	if err != nil || d.Partitions[0].Accepted != 1 {
		t.Fatalf("after 2 s of renewals of a 1 s lock: %+v, %v", d, err)
	}
}

// kafkaShareGroupConfigs configures a share group through Kafka's config
// APIs on GROUP resources and checks what DescribeConfigs answers: the
// defaults of a group never configured, the values set (not defaults
// then), a config returned to its default by DELETE, refusals of a bad
// value and an unknown name that change nothing, and a validate-only
// change that changes nothing. cl speaks to a frontend, storage to a
// storage node, which answers as well (admin clients send these requests
// to any broker). It leaves the group reading from the earliest offset
// with a 5 s lock.
func kafkaShareGroupConfigs(t *testing.T, ctx context.Context, cl, storage *kgo.Client, group string) {
	t.Helper()
	describe := func(cl *kgo.Client) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("DescribeConfigs of group %s: %v %+v", group, err, resp)
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	alter := func(cl *kgo.Client, validateOnly bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeGroupConfig, group, ops
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Resources) != 1 {
			t.Fatalf("IncrementalAlterConfigs of group %s: %v %+v", group, err, resp)
		}
		return kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	op := func(name string, value *string, o kmsg.IncrementalAlterConfigOp) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = name, value, o
		return c
	}
	set := func(name, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return op(name, kmsg.StringPtr(value), kmsg.IncrementalAlterConfigOpSet)
	}
	check := func(cl *kgo.Client, when string, want map[string]string, defaults ...string) {
		t.Helper()
		got := describe(cl)
		for name, v := range want {
			c, ok := got[name]
			isDefault := slices.Contains(defaults, name)
			// IsDefault is v0's field; later versions say it by the source.
			if !ok || c.Value == nil || *c.Value != v || (c.Source == kmsg.ConfigSourceDefaultConfig) != isDefault ||
				!isDefault && c.Source != kmsg.ConfigSourceGroupConfig {
				t.Fatalf("%s: %s = %+v, want %q (default %v)", when, name, c, v, isDefault)
			}
		}
	}
	check(storage, "a group never configured", map[string]string{shares.ConfigAutoOffsetReset: "latest", shares.ConfigLockDurationMs: "30000",
		shares.ConfigDeliveryLimit: "5"}, shares.ConfigAutoOffsetReset, shares.ConfigLockDurationMs, shares.ConfigDeliveryLimit)
	if err := alter(cl, false, set(shares.ConfigAutoOffsetReset, "earliest"), set(shares.ConfigLockDurationMs, "5000"), set(shares.ConfigDeliveryLimit, "3")); err != nil {
		t.Fatal(err)
	}
	check(cl, "after SET", map[string]string{shares.ConfigAutoOffsetReset: "earliest", shares.ConfigLockDurationMs: "5000", shares.ConfigDeliveryLimit: "3"})
	for _, bad := range []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(shares.ConfigLockDurationMs, "10"), set("share.no.such.config", "1"),
		set(shares.ConfigAutoOffsetReset, "middle")} {
		if err := alter(cl, false, set(shares.ConfigDeliveryLimit, "7"), bad); !errors.Is(err, kerr.InvalidConfig) {
			t.Fatalf("SET %s=%s: %v, want INVALID_CONFIG", bad.Name, *bad.Value, err)
		}
	}
	if err := alter(cl, true, set(shares.ConfigDeliveryLimit, "7")); err != nil {
		t.Fatalf("a validate-only SET: %v", err)
	}
	check(storage, "after refusals and a validate-only SET", map[string]string{shares.ConfigDeliveryLimit: "3"})
	if err := alter(storage, false, op(shares.ConfigDeliveryLimit, nil, kmsg.IncrementalAlterConfigOpDelete)); err != nil {
		t.Fatal(err)
	}
	check(cl, "after DELETE", map[string]string{shares.ConfigAutoOffsetReset: "earliest", shares.ConfigLockDurationMs: "5000",
		shares.ConfigDeliveryLimit: "5"}, shares.ConfigDeliveryLimit)
}
