package cluster

import (
	"strings"
	"testing"
)

// FuzzParseTopicConfig: any key=value lines either parse into a config that
// keeps every rule (or are refused with a reason), never a panic.
func FuzzParseTopicConfig(f *testing.F) {
	f.Add("retention.ms=60000\nsegment.bytes=1048576\nmin.insync.replicas=2", 3)
	f.Add("flush.policy=replication\nunclean.leader.election.enable=true\nmax.message.bytes=100", 1)
	f.Add("segment.bytes=99999999999\nretention.bytes=-2", 2)
	f.Add("nope=1\n=\nmin.insync.replicas= 4 ", 3)
	f.Add("cleanup.policy=compact,delete\nmin.cleanable.dirty.ratio=0.1\nmin.compaction.lag.ms=5\nmax.compaction.lag.ms=4", 3)
	f.Add("cleanup.policy=compact\ndelete.retention.ms=0\nmin.cleanable.dirty.ratio=NaN", 1)
	f.Fuzz(func(t *testing.T, text string, rf int) {
		kv := map[string]string{}
		for _, line := range strings.Split(text, "\n") {
			k, v, _ := strings.Cut(line, "=")
			kv[k] = v
		}
		c, err := ParseTopicConfig(kv, rf)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a reason")
			}
			return
		}
		switch {
		case c.RetentionMs < -1, c.RetentionBytes < -1:
			t.Fatalf("retention %d ms / %d bytes", c.RetentionMs, c.RetentionBytes)
		case c.SegmentBytes < 1024 || c.SegmentBytes > 1<<31-1:
			t.Fatalf("segment.bytes %d", c.SegmentBytes)
		case c.SegmentMs < 1, c.MaxMessageBytes < 1:
			t.Fatalf("segment.ms %d, max.message.bytes %d", c.SegmentMs, c.MaxMessageBytes)
		case c.MinInsyncReplicas < 1 || (rf > 0 && c.MinInsyncReplicas > rf):
			t.Fatalf("min.insync.replicas %d with replication factor %d", c.MinInsyncReplicas, rf)
		case c.FlushPolicy != FlushFsync && c.FlushPolicy != FlushReplication:
			t.Fatalf("flush policy %q", c.FlushPolicy)
		case !c.Compact && !c.Delete:
			t.Fatal("no cleanup policy")
		case !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
			t.Fatalf("min.cleanable.dirty.ratio %v", c.MinCleanableDirtyRatio)
		case c.MinCompactionLagMs < 0 || c.MaxCompactionLagMs < c.MinCompactionLagMs || c.DeleteRetentionMs < 0:
			t.Fatalf("compaction lags %d..%d ms, delete retention %d ms", c.MinCompactionLagMs, c.MaxCompactionLagMs, c.DeleteRetentionMs)
		}
	})
}
