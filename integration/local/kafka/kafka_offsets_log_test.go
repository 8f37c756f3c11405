package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/groups"
)

// TestKafkaConsumerOffsetsTopic: __consumer_offsets is listed as an
// internal topic (kadm's ListTopics leaves it out, ListTopicsWithInternal
// has it with its 50 partitions); a franz-go consumer reads from it the
// commits of a group, in Kafka's OffsetCommitKey/OffsetCommitValue format
// at the group's partition, and the group's membership as a
// GroupMetadataValue; a later commit appears after the consumer caught
// up; producing to it, creating it and deleting it are refused as Kafka
// refuses them.
func TestKafkaConsumerOffsetsTopic(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "tracked", 3, 1)
	itest.ProduceValues(t, c, "tracked", "v", 90)

	// A classic group reads everything and commits.
	const group = "lag-watched"
	reader := itest.FranzClient(t, c, kgo.ConsumerGroup(group), kgo.ConsumeTopics("tracked"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
	read := 0
	readAndCommit := func(want int) {
		t.Helper()
		for read < want {
			pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
			fs := reader.PollFetches(pctx)
			pcancel()
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d", read, want)
			}
			read += fs.NumRecords()
		}
		if err := reader.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}
	readAndCommit(90)

	adm := kadm.NewClient(itest.FranzClient(t, c))
	plain, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Has(groups.OffsetsLogTopic) {
		t.Fatal("ListTopics (without internal topics) lists __consumer_offsets")
	}
	all, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := all[groups.OffsetsLogTopic]; !ok || !d.IsInternal || len(d.Partitions) != groups.OffsetsLogPartitions {
		t.Fatalf("__consumer_offsets in ListTopicsWithInternal: %+v (found %v)", d, ok)
	}

	watcher := itest.FranzClient(t, c, kgo.ConsumeTopics(groups.OffsetsLogTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(300*time.Millisecond))
	commits := map[int32]int64{}
	var members []string
	watch := func(until func() bool, what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !until() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: commits %v, members %v", what, commits, members)
			}
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			fs := watcher.PollFetches(pctx)
			pcancel()
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("fetching %s-%d: %v", topic, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if want := groups.OffsetsLogPartition(group); r.Partition != want {
					if recordGroup(r.Key) == group {
						t.Errorf("a record of %s in partition %d, not %d", group, r.Partition, want)
					}
					return
				}
				switch version := int16(r.Key[0])<<8 | int16(r.Key[1]); version {
				case 0, 1:
					var k kmsg.OffsetCommitKey
					var v kmsg.OffsetCommitValue
					if err := k.ReadFrom(r.Key); err != nil {
						t.Fatalf("offset commit key: %v", err)
					}
					if err := v.ReadFrom(r.Value); err != nil {
						t.Fatalf("offset commit value: %v", err)
					}
					if k.Group == group && k.Topic == "tracked" {
						commits[k.Partition] = v.Offset
					}
				case 2:
					var k kmsg.GroupMetadataKey
					var v kmsg.GroupMetadataValue
					if err := k.ReadFrom(r.Key); err != nil {
						t.Fatalf("group metadata key: %v", err)
					}
					if err := v.ReadFrom(r.Value); err != nil {
						t.Fatalf("group metadata value: %v", err)
					}
					if k.Group == group {
						if v.ProtocolType != "consumer" {
							t.Errorf("group metadata: protocol type %q", v.ProtocolType)
						}
						members = members[:0]
						for _, m := range v.Members {
							members = append(members, m.MemberID)
						}
					}
				default:
					t.Errorf("a record with key version %d", version)
				}
			})
		}
	}
	total := func() (n int64) {
		for _, o := range commits {
			n += o
		}
		return n
	}
	watch(func() bool { return total() == 90 && len(members) == 1 }, "the group's commits and membership")

	// The reader commits again after more records: the watcher, caught up,
	// sees the new commit.
	itest.ProduceValues(t, c, "tracked", "w", 30)
	readAndCommit(120)
	watch(func() bool { return total() == 120 }, "a later commit")

	// Writes are refused.
	res := itest.FranzClient(t, c).ProduceSync(ctx, &kgo.Record{Topic: groups.OffsetsLogTopic, Value: []byte("x")})
	if err := res.FirstErr(); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("producing to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	created, err := adm.CreateTopic(ctx, 1, 1, nil, groups.OffsetsLogTopic)
	if !errors.Is(err, kerr.TopicAlreadyExists) && !errors.Is(created.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("creating __consumer_offsets: %v %v, want TOPIC_ALREADY_EXISTS", err, created.Err)
	}
	deleted, err := adm.DeleteTopics(ctx, groups.OffsetsLogTopic)
	if err != nil || !errors.Is(deleted[groups.OffsetsLogTopic].Err, kerr.InvalidTopicException) {
		t.Fatalf("deleting __consumer_offsets: %v %+v, want INVALID_TOPIC_EXCEPTION", err, deleted)
	}
}

// recordGroup is the group a __consumer_offsets key names ("" if none).
func recordGroup(key []byte) string {
	var k kmsg.GroupMetadataKey // the group comes first in every key version
	if err := k.ReadFrom(key); err != nil {
		return ""
	}
	return k.Group
}
