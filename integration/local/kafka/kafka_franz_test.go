package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// topicView is sluicectl topic describe -o json.
type topicView struct {
	Name              string            `json:"name"`
	ReplicationFactor int               `json:"replication_factor"`
	Config            map[string]string `json:"config"`
	Partitions        []struct {
		ID int32 `json:"id"`
	} `json:"partitions"`
	Replicas []struct {
		Partition      int32 `json:"partition"`
		Node           int32 `json:"node"`
		LogStartOffset int64 `json:"log_start_offset"`
	} `json:"replicas"`
}

// describeWithCtl is sluicectl's view of a topic.
func describeWithCtl(t *testing.T, c *localcluster.Cluster, topic string) (topicView, bool) {
	t.Helper()
	out, _, code := itest.Sluicectl(t, c, "", "topic", "describe", topic, "-o", "json")
	var v topicView
	if code != 0 {
		return v, false
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("sluicectl topic describe -o json: %v: %s", err, out)
	}
	return v, true
}

// TestKafkaFranzGo drives a cluster of two frontends with franz-go: every
// admin call checked against sluicectl topic describe, consumption from
// the start, the end and a timestamp, and an idempotent producer that keeps
// every record exactly once in per-key order through a kill -9 of a
// partition leader.
func TestKafkaFranzGo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3, Frontends: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := itest.FranzClient(t, c)
	adm := kadm.NewClient(cl)
	testkit.Eventually(t, 30*time.Second, func() error {
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl) // kadm's BrokerMetadata may answer from kgo's cache
		if err != nil {
			return err
		}
		if len(md.Brokers) != 5 {
			return fmt.Errorf("%d brokers, want 2 frontends and 3 storage nodes: %v", len(md.Brokers), md.Brokers)
		}
		return nil
	})

	t.Run("admin", func(t *testing.T) { franzAdmin(t, ctx, c, adm) })
	t.Run("positions", func(t *testing.T) { franzPositions(t, ctx, c, cl, adm) })
	t.Run("idempotent producer through a leader kill", func(t *testing.T) { franzLeaderKill(t, ctx, c, adm) })
}

func franzAdmin(t *testing.T, ctx context.Context, c *localcluster.Cluster, adm *kadm.Client) {
	// CreateTopics with a config; DescribeConfigs reports it under Kafka's
	// name and source.
	created, err := adm.CreateTopics(ctx, 3, 3, map[string]*string{"retention.ms": kadm.StringPtr("3600000"), "cleanup.policy": kadm.StringPtr("delete")}, "adm")
	if err != nil || created["adm"].Err != nil {
		t.Fatalf("CreateTopics: %v %+v", err, created)
	}
	v, ok := describeWithCtl(t, c, "adm")
	if !ok || len(v.Partitions) != 3 || v.ReplicationFactor != 3 || v.Config["retention.ms"] != "3600000" {
		t.Fatalf("sluicectl after CreateTopics: %+v", v)
	}
	if bad, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compacted")}, "adm-compact"); err != nil || !errors.Is(bad["adm-compact"].Err, kerr.InvalidConfig) {
		t.Fatalf("CreateTopics with cleanup.policy=compacted: %v %+v, want INVALID_CONFIG", err, bad)
	}
	itest.WaitLeaders(t, ctx, c, "adm", 3)
	rcs, err := adm.DescribeTopicConfigs(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("adm", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]kadm.Config{}
	for _, cfg := range rc.Configs {
		found[cfg.Key] = cfg
	}
	if r := found["retention.ms"]; r.Value == nil || *r.Value != "3600000" || r.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("DescribeConfigs retention.ms: %+v", r)
	}
	if s := found["segment.bytes"]; s.Value == nil || *s.Value != "1073741824" || s.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("DescribeConfigs segment.bytes: %+v", s)
	}
	if p := found["cleanup.policy"]; p.Value == nil || *p.Value != "delete" {
		t.Fatalf("DescribeConfigs cleanup.policy: %+v", p)
	}

	// IncrementalAlterConfigs: set one, delete another.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("60000")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"}, {Op: kadm.SetConfig, Name: "unclean.leader.election.enable", Value: kadm.StringPtr("true")}}, "adm"); err != nil {
		t.Fatal(err)
	}
	v, _ = describeWithCtl(t, c, "adm")
	if v.Config["segment.ms"] != "60000" || v.Config["retention.ms"] != "" || v.Config["unclean.leader.election"] != "true" {
		t.Fatalf("sluicectl after IncrementalAlterConfigs: %v", v.Config)
	}
	// AlterConfigs replaces the whole set.
	if rs, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: kadm.StringPtr("1000000")}}, "adm"); err != nil || rs[0].Err != nil {
		t.Fatalf("AlterConfigs: %v %+v", err, rs)
	}
	v, _ = describeWithCtl(t, c, "adm")
	if len(v.Config) != 1 || v.Config["retention.bytes"] != "1000000" {
		t.Fatalf("sluicectl after AlterConfigs: %v", v.Config)
	}

	// CreatePartitions.
	if rs, err := adm.UpdatePartitions(ctx, 5, "adm"); err != nil || rs["adm"].Err != nil {
		t.Fatalf("CreatePartitions: %v %+v", err, rs)
	}
	if v, _ = describeWithCtl(t, c, "adm"); len(v.Partitions) != 5 {
		t.Fatalf("sluicectl after CreatePartitions: %d partitions", len(v.Partitions))
	}
	itest.WaitLeaders(t, ctx, c, "adm", 5)

	// DescribeTopicPartitions pages the partitions: 3, then from the
	// cursor the other 2, with Metadata's leaders. Each request may reach
	// another broker, whose model may lag the growth for a moment.
	raw := itest.FranzClient(t, c)
	testkit.Eventually(t, 30*time.Second, func() error {
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, raw)
		if err != nil {
			return err
		}
		leaders := map[int32]int32{}
		for _, mt := range md.Topics {
			if mt.Topic != nil && *mt.Topic == "adm" {
				for _, mp := range mt.Partitions {
					leaders[mp.Partition] = mp.Leader
				}
			}
		}
		var paged []int32
		var cursor *kmsg.DescribeTopicPartitionsRequestCursor
		for page := 0; page < 2; page++ {
			req := kmsg.NewPtrDescribeTopicPartitionsRequest()
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = "adm"
			req.Topics, req.ResponsePartitionLimit, req.Cursor = []kmsg.DescribeTopicPartitionsRequestTopic{rt}, 3, cursor
			resp, err := req.RequestWith(ctx, raw)
			if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
				return fmt.Errorf("DescribeTopicPartitions page %d: %v %+v", page, err, resp)
			}
			for _, p := range resp.Topics[0].Partitions {
				if p.LeaderID != leaders[p.Partition] || len(p.Replicas) != 3 {
					return fmt.Errorf("DescribeTopicPartitions: partition %d led by %d with replicas %v; Metadata says %d", p.Partition, p.LeaderID, p.Replicas, leaders[p.Partition])
				}
				paged = append(paged, p.Partition)
			}
			if page == 0 && (resp.NextCursor == nil || resp.NextCursor.Topic != "adm" || resp.NextCursor.Partition != 3) || page == 1 && resp.NextCursor != nil {
				return fmt.Errorf("DescribeTopicPartitions page %d: cursor %+v", page, resp.NextCursor)
			}
			if resp.NextCursor != nil {
				cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
			}
		}
		if !slices.Equal(paged, []int32{0, 1, 2, 3, 4}) {
			return fmt.Errorf("DescribeTopicPartitions in two pages: partitions %v", paged)
		}
		return nil
	})

	// ElectLeaders through the metadata controller: every partition of the
	// new topic is led by its preferred replica already; partition 9 is
	// none of the topic's.
	elected, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"adm": {0: {}, 1: {}, 2: {}, 3: {}, 4: {}, 9: {}}})
	if err != nil {
		t.Fatalf("ElectLeaders: %v", err)
	}
	for p := range int32(10) {
		r, ok := elected["adm"][p]
		switch {
		case p < 5 && (!ok || !errors.Is(r.Err, kerr.ElectionNotNeeded)):
			t.Fatalf("ElectLeaders of adm-%d: %+v, want ELECTION_NOT_NEEDED", p, r)
		case p == 9 && (!ok || !errors.Is(r.Err, kerr.UnknownTopicOrPartition)):
			t.Fatalf("ElectLeaders of adm-9: %+v, want UNKNOWN_TOPIC_OR_PARTITION", r)
		}
	}

	// DeleteRecords: the log start offset moves on every replica.
	cl := itest.FranzClient(t, c, kgo.DefaultProduceTopic("adm"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "adm", Partition: 0, At: 60})
	drs, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if dr, _ := drs.Lookup("adm", 0); dr.Err != nil || dr.LowWatermark != 60 {
		t.Fatalf("DeleteRecords: %+v", dr)
	}
	testkit.Eventually(t, 20*time.Second, func() error {
		v, _ := describeWithCtl(t, c, "adm")
		n := 0
		for _, r := range v.Replicas {
			if r.Partition == 0 {
				if r.LogStartOffset != 60 {
					return fmt.Errorf("replica on node %d starts at %d, want 60", r.Node, r.LogStartOffset)
				}
				n++
			}
		}
		if n != 3 {
			return fmt.Errorf("%d replicas of partition 0 described", n)
		}
		return nil
	})
	starts, err := adm.ListStartOffsets(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("adm", 0); o.Offset != 60 {
		t.Fatalf("ListOffsets earliest after DeleteRecords: %+v", o)
	}

	// DescribeLogDirs: the storage nodes report their replicas.
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	replicas := 0
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "adm" {
				replicas++
			}
		})
	})
	if replicas != 15 {
		t.Fatalf("DescribeLogDirs lists %d replicas of adm, want 5 partitions x 3", replicas)
	}

	// ACLs: created through Kafka, seen by sluicectl, deleted through Kafka.
	if _, errOut, code := itest.Sluicectl(t, c, "", "user", "create", "reader"); code != 0 {
		t.Fatal(errOut)
	}
	b := kadm.NewACLs().Topics("adm").Allow("User:reader").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if rs, err := adm.CreateACLs(ctx, b); err != nil || rs[0].Err != nil {
		t.Fatalf("CreateACLs: %v %+v", err, rs)
	}
	out, _, _ := itest.Sluicectl(t, c, "", "acl", "list")
	if !strings.Contains(out, "reader") || !strings.Contains(out, "consume") {
		t.Fatalf("sluicectl acl list after CreateAcls: %s", out)
	}
	alterGroup := kadm.NewACLs().Groups("g").Allow("User:reader").Operations(kadm.OpAlter).ResourcePatternType(kadm.ACLPatternLiteral)
	if rs, err := adm.CreateACLs(ctx, alterGroup); err != nil || rs[0].Err == nil {
		t.Fatalf("an ALTER ACL on a group (which no Kafka API checks, and Sluice does not keep) was accepted: %v %+v", err, rs)
	}
	da := kmsg.NewPtrDescribeACLsRequest()
	da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	described, err := da.RequestWith(ctx, itest.FranzClient(t, c))
	if err != nil || described.ErrorCode != 0 || len(described.Resources) != 1 || described.Resources[0].ResourceName != "adm" ||
		len(described.Resources[0].ACLs) != 1 || described.Resources[0].ACLs[0].Principal != "User:reader" || described.Resources[0].ACLs[0].Operation != kmsg.ACLOperationRead {
		t.Fatalf("DescribeAcls: %v %+v", err, described)
	}
	if _, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics("adm").Allow("User:reader").AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := itest.Sluicectl(t, c, "", "acl", "list"); strings.Contains(out, "reader") {
		t.Fatalf("sluicectl acl list after DeleteAcls: %s", out)
	}

	// Cluster-wide settings through the broker defaults: auto-creation.
	if rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "auto.create.topics.enable", Value: kadm.StringPtr("true")},
		{Op: kadm.SetConfig, Name: "num.partitions", Value: kadm.StringPtr("2")}}); err != nil || rs[0].Err != nil {
		t.Fatalf("AlterBrokerConfigs: %v %+v", err, rs)
	}
	testkit.Eventually(t, 10*time.Second, func() error { // every broker learns the setting from its metadata watch
		bcs, err := adm.DescribeBrokerConfigs(ctx)
		if err != nil {
			return err
		}
		if bc, _ := bcs.On("", nil); !slices.ContainsFunc(bc.Configs, func(c kadm.Config) bool {
			return c.Key == "auto.create.topics.enable" && c.Value != nil && *c.Value == "true" && c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig
		}) {
			return fmt.Errorf("DescribeConfigs of the broker defaults: %+v", bc)
		}
		return nil
	})
	auto := itest.FranzClient(t, c, kgo.AllowAutoTopicCreation())
	if err := auto.ProduceSync(ctx, &kgo.Record{Topic: "auto-made", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce to an auto-created topic: %v", err)
	}
	if v, ok := describeWithCtl(t, c, "auto-made"); !ok || len(v.Partitions) != 2 {
		t.Fatalf("auto-created topic: %+v", v)
	}

	// DescribeCluster answers the brokers.
	dc := kmsg.NewPtrDescribeClusterRequest()
	resp, err := dc.RequestWith(ctx, itest.FranzClient(t, c))
	if err != nil || resp.ErrorCode != 0 || len(resp.Brokers) != 5 || resp.ClusterID == "" {
		t.Fatalf("DescribeCluster: %v %+v", err, resp)
	}

	// DeleteTopics, by name.
	if rs, err := adm.DeleteTopics(ctx, "adm", "auto-made"); err != nil || rs["adm"].Err != nil {
		t.Fatalf("DeleteTopics: %v %+v", err, rs)
	}
	if _, ok := describeWithCtl(t, c, "adm"); ok {
		t.Fatal("sluicectl still describes the deleted topic")
	}
}

// franzPositions consumes from the start, the end and a timestamp.
func franzPositions(t *testing.T, ctx context.Context, c *localcluster.Cluster, cl *kgo.Client, adm *kadm.Client) {
	itest.CreateTopic(t, ctx, c, "positions", 2, 3)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := 0; i < 100; i++ {
		r := &kgo.Record{Topic: "positions", Key: []byte(fmt.Sprint(i % 2)), Value: []byte(fmt.Sprint(i)), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consume := func(reset kgo.Offset, want int) []*kgo.Record {
		t.Helper()
		cons := itest.FranzClient(t, c, kgo.ConsumeTopics("positions"), kgo.ConsumeResetOffset(reset))
		var got []*kgo.Record
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for len(got) < want {
			fs := cons.PollFetches(pctx)
			if pctx.Err() != nil {
				break
			}
			if errs := fs.Errors(); len(errs) > 0 {
				t.Fatalf("fetch: %v", errs)
			}
			got = append(got, fs.Records()...)
		}
		return got
	}
	if got := consume(kgo.NewOffset().AtStart(), 100); len(got) != 100 {
		t.Fatalf("from the start: %d records, want 100", len(got))
	}
	// From a timestamp: records 60..99.
	got := consume(kgo.NewOffset().AfterMilli(base.Add(60*time.Second).UnixMilli()), 40)
	if len(got) != 40 {
		t.Fatalf("after the 60th second: %d records, want 40", len(got))
	}
	for _, r := range got {
		if r.Timestamp.Before(base.Add(60 * time.Second)) {
			t.Fatalf("record at %v read from the 60th second on", r.Timestamp)
		}
	}
	offs, err := adm.ListOffsetsAfterMilli(ctx, base.Add(60*time.Second).UnixMilli(), "positions")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	offs.Each(func(o kadm.ListedOffset) { total += int(o.Offset) })
	if total != 60 {
		t.Fatalf("ListOffsets by timestamp: offsets sum to %d, want 60 records before it", total)
	}
	// From the end: only what comes after.
	cons := itest.FranzClient(t, c, kgo.ConsumeTopics("positions"), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	fs := cons.PollFetches(pctx)
	cancel()
	if n := fs.NumRecords(); n != 0 {
		t.Fatalf("from the end: %d old records", n)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "positions", Value: []byte("new")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pctx, cancel = context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		fs := cons.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatal("the record produced after the end was not read")
		}
		if recs := fs.Records(); len(recs) > 0 {
			if string(recs[0].Value) != "new" || len(recs) != 1 {
				t.Fatalf("from the end read %d records, first %q", len(recs), recs[0].Value)
			}
			return
		}
	}
}

// franzLeaderKill runs an idempotent franz-go producer (acks=all, its
// default) while the storage node leading one partition is killed with
// SIGKILL: every record is acknowledged and stored exactly once, in per-key
// order.
func franzLeaderKill(t *testing.T, ctx context.Context, c *localcluster.Cluster, adm *kadm.Client) {
	if _, err := adm.CreateTopics(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "exactly"); err != nil {
		t.Fatal(err)
	}
	itest.WaitLeaders(t, ctx, c, "exactly", 3)
	prod := itest.FranzClient(t, c, kgo.DefaultProduceTopic("exactly"), kgo.ProducerLinger(2*time.Millisecond))
	const keys, total, killAt = 20, 20000, 6000
	load := loadcheck.NewKeyedLoad()
	var mu sync.Mutex
	seq := make([]int, keys)
	var wg sync.WaitGroup
	for i := 0; i < total; i++ {
		if i == killAt {
			snap, err := cluster.NewClient(c.MetadataURLs()).Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tp, _ := snap.Topic("exactly")
			victim := c.Proc(fmt.Sprintf("storage-%d", tp.Partitions[0].Leader))
			t.Logf("killing %s (leader of exactly-0) after %d records", victim.Name, i)
			c.StopProc(victim, true)
		}
		k := i % keys
		v := fmt.Sprintf("key-%d:%d", k, seq[k])
		seq[k]++
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", k)), Value: []byte(v)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				load.Errs = append(load.Errs, err)
				return
			}
			load.Acked[v] = true
		})
		load.Sent++
		if i%500 == 499 {
			time.Sleep(5 * time.Millisecond) // a steady load, not a flood
		}
	}
	wg.Wait()
	load.RequireAllAcknowledged(t, ": franz-go idempotent producer through a leader kill")
	stored := itest.ReadValues(t, ctx, c, "exactly", 3)
	loadcheck.CheckExactlyOnceInOrder(t, stored, load)

	// And franz-go reads them all back, from the surviving replicas.
	cons := itest.FranzClient(t, c, kgo.ConsumeTopics("exactly"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for got < total {
		fs := cons.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatalf("franz-go read %d of %d records after the kill", got, total)
		}
		got += fs.NumRecords()
	}
}
