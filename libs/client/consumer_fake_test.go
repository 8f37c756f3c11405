package client

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/record"
)

// A Consumer's goroutines run for real (on real sockets) against the shared
// fakes of the three services it talks to (libs/dev/testkit/fakecluster): a
// metadata snapshot over HTTP, one storage node speaking the storage
// protocol, and a scriptable group coordinator (the test decides each
// member's assignment).

// fakeTopicID is the incarnation of topic "t" the fake metadata serves.
const fakeTopicID = "t-incarnation-2"

// fakeCluster ties the fakes of testkit/fakecluster together: a metadata
// service serving topic "t", a storage node leading its partitions, and the
// coordinator of group "g".
type fakeCluster struct {
	t       *testing.T
	storage *fakecluster.Storage
	coord   *fakecluster.Offsets
	meta    *fakecluster.Metadata
}

// newFakeCluster serves topic "t" with the given number of partitions.
func newFakeCluster(t *testing.T, partitions int) *fakeCluster {
	t.Helper()
	st, err := fakecluster.NewStorage()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	meta := fakecluster.NewMetadata(cluster.Node{ID: 1, Addr: st.Addr(), Alive: true})
	t.Cleanup(meta.Close)
	meta.Update(func(s *cluster.Snapshot) {
		top := cluster.Topic{Name: "t", ID: fakeTopicID, ReplicationFactor: 1}
		for p := range partitions {
			top.Partitions = append(top.Partitions, cluster.Partition{ID: int32(p), Replicas: []int32{1}, Leader: 1, ISR: []int32{1}})
		}
		s.Topics = []cluster.Topic{top}
	})
	coord := fakecluster.NewOffsets("g")
	t.Cleanup(coord.Close)
	return &fakeCluster{t: t, storage: st, coord: coord, meta: meta}
}

// config returns a consumer config pointed at the fakes, with short timers.
func (fc *fakeCluster) config() ConsumerConfig {
	cfg := DefaultConsumerConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(testLogWriter{fc.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Metadata = []string{fc.meta.URL()}
	cfg.Offsets = []string{fc.coord.URL()}
	cfg.Group = "g"
	cfg.Topics = []string{"t"}
	cfg.AutoOffsetReset = OffsetResetEarliest
	cfg.FetchMaxWait = 20 * time.Millisecond
	cfg.SessionTimeout = 2 * time.Second
	cfg.AutoCommitInterval = time.Hour
	return cfg
}

// append adds n records to partition p of "t", a batch each, with values
// "p<partition>-<offset>" and timestamps 1000+offset.
func (fc *fakeCluster) append(p int32, n int) {
	fc.t.Helper()
	for range n {
		off := fc.storage.LogEnd("t", p)
		if _, err := fc.storage.Append("t", p, record.Record{Timestamp: 1000 + off, Value: fmt.Appendf(nil, "p%d-%d", p, off)}); err != nil {
			fc.t.Fatal(err)
		}
	}
}

// testLogWriter sends log lines to the test's log (shown on failure or -v).
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// tps builds TPs of topic "t".
func tps(ps ...int32) []groups.TP {
	out := make([]groups.TP, len(ps))
	for i, p := range ps {
		out[i] = groups.TP{Topic: "t", Partition: p}
	}
	return out
}

func tpList(ts []groups.TP) string {
	s := make([]string, len(ts))
	for i, tp := range ts {
		s[i] = tp.String()
	}
	return strings.Join(s, ",")
}
