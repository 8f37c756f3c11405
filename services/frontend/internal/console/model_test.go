package console

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

func TestPartitionState(t *testing.T) {
	alive := map[int32]bool{1: true, 2: true, 3: false}
	for _, tc := range []struct {
		name string
		p    cluster.Partition
		want string
	}{
		{"all in sync", cluster.Partition{Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{2, 1}}, stateOK},
		{"one out of sync", cluster.Partition{Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}, stateUnderReplicated},
		{"no leader", cluster.Partition{Leader: -1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, stateOffline},
		{"leader on a dead node", cluster.Partition{Leader: 3, Replicas: []int32{3, 1}, ISR: []int32{3}}, stateOffline},
		{"leader on an unknown node", cluster.Partition{Leader: 9, Replicas: []int32{9}, ISR: []int32{9}}, stateOffline},
	} {
		if got := partitionState(&tc.p, alive); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestLeaderTotals: sizes and records come from each partition's leader only
// (not its followers), a leader that does not report sizes leaves the size
// partial, and the text says how many partitions a partial sum covers.
func TestLeaderTotals(t *testing.T) {
	topic := &cluster.Topic{Name: "t", Partitions: []cluster.Partition{
		{ID: 0, Leader: 1, Replicas: []int32{1, 2}},
		{ID: 1, Leader: 2, Replicas: []int32{2, 1}},
		{ID: 2, Leader: -1, Replicas: []int32{1, 2}},
	}}
	states := replicaStates{
		{"t", 0, 1}: {LogStartOffset: 10, HighWatermark: 110, LogEndOffset: 112, SizeBytes: 4096},
		{"t", 0, 2}: {LogStartOffset: 0, HighWatermark: 110, LogEndOffset: 110, SizeBytes: 9999}, // a follower
		{"t", 1, 2}: {LogStartOffset: 0, HighWatermark: 5, LogEndOffset: 5, SizeBytes: -1},       // an older node
		{"t", 2, 1}: {LogStartOffset: 0, HighWatermark: 7, LogEndOffset: 7, SizeBytes: 100},      // no leader: not counted
	}
	size, records := leaderTotals(topic, states)
	if size != (total{Value: 4096, Known: 1, Of: 3}) || records != (total{Value: 105, Known: 2, Of: 3}) {
		t.Fatalf("size %+v records %+v", size, records)
	}
	if got := size.text(formatBytes); got != "4.0 KiB (1 of 3 partitions)" {
		t.Fatalf("size text %q", got)
	}
	for _, tc := range []struct {
		t    total
		want string
	}{
		{total{Value: 0, Known: 0, Of: 2}, "—"},
		{total{Value: 1234567, Known: 2, Of: 2}, "1,234,567"},
		{total{Value: 0, Known: 0, Of: 0}, "0"},
	} {
		if got := tc.t.text(formatCount); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.t, got, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB",
		3 << 40: "3.0 TiB", math.MaxInt64: "8.0 EiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234",
		math.MinInt64: "-9,223,372,036,854,775,808"} {
		if got := formatCount(n); got != want {
			t.Errorf("formatCount(%d) = %q, want %q", n, got, want)
		}
	}
	if got := formatAssignment([]groups.TopicPartitions{{Topic: "b", Partitions: []int32{3}}, {Topic: "a", Partitions: []int32{2, 0}}}); got != "a: 0, 2; b: 3" {
		t.Errorf("formatAssignment: %q", got)
	}
}

// TestBuildTopicReplicaLag: a replica's lag is the leader's log end minus
// its own, unknown (-1) when the leader did not report.
func TestBuildTopicReplicaLag(t *testing.T) {
	snap := &cluster.Snapshot{Nodes: []cluster.Node{{ID: 1, Addr: "a:1", Alive: true}, {ID: 2, Addr: "a:2", Alive: true}}}
	topic := &cluster.Topic{Name: "t", Partitions: []cluster.Partition{
		{ID: 1, Leader: 2, Replicas: []int32{2, 1}, ISR: []int32{2, 1}},
		{ID: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}},
	}}
	states := replicaStates{
		{"t", 0, 1}: protocol.ReplicaInfo{LogEndOffset: 50, HighWatermark: 40, SizeBytes: 1},
		{"t", 0, 2}: protocol.ReplicaInfo{LogEndOffset: 40, SizeBytes: 1},
		{"t", 1, 1}: protocol.ReplicaInfo{LogEndOffset: 9, SizeBytes: 1},
	}
	v := buildTopic(snap, topic, states)
	if v.Partitions[0].ID != 0 || v.Partitions[0].LeaderAddr != "a:1" || !v.Partitions[0].Reported || v.Partitions[1].Reported {
		t.Fatalf("partitions %+v", v.Partitions)
	}
	if v.UnderReplicated != 1 || v.Partitions[0].State != stateUnderReplicated {
		t.Fatalf("under-replicated %d, partition 0 %s", v.UnderReplicated, v.Partitions[0].State)
	}
	lags := map[[2]int32]int64{}
	for _, r := range v.Replicas {
		lags[[2]int32{r.Partition, r.Node}] = r.Lag
	}
	want := map[[2]int32]int64{{0, 1}: 0, {0, 2}: 10, {1, 2}: -1, {1, 1}: -1}
	for k, w := range want {
		if lags[k] != w {
			t.Errorf("lag of partition %d on node %d: %d, want %d", k[0], k[1], lags[k], w)
		}
	}
}

// TestBuildGroupList: groups by name; one the offsets service did not
// describe keeps its listing without lag.
func TestBuildGroupList(t *testing.T) {
	rows := buildGroupList([]groups.Listing{{Group: "b", State: "stable", Members: 2}, {Group: "a", State: "empty"}},
		map[string]*groups.Description{"b": {Group: "b", TotalLag: 12, Partitions: []groups.PartitionLag{
			{Topic: "y", Partition: 0}, {Topic: "x", Partition: 1}, {Topic: "y", Partition: 1}}}})
	if len(rows) != 2 || rows[0].Name != "a" || rows[0].Described || rows[1].TotalLag != 12 || rows[1].Topics != "x, y" || rows[1].Partitions != 3 {
		t.Fatalf("rows %+v", rows)
	}
}

// TestGroupProtocols: a Kafka classic group shows as classic/<protocol
// type> with the assignor its leader ran and its members' hosts and
// instance ids; an SDK or KIP-848 group as consumer.
func TestGroupProtocols(t *testing.T) {
	rows := buildGroupList([]groups.Listing{{Group: "k", Protocol: groups.ProtocolClassic, ProtocolType: "connect"}, {Group: "s", Protocol: groups.ProtocolConsumer}}, nil)
	if rows[0].Protocol != "classic/connect" || rows[1].Protocol != "consumer" {
		t.Fatalf("rows %+v", rows)
	}
	v := buildGroup(&groups.Description{Group: "k", Protocol: groups.ProtocolClassic, ProtocolType: "consumer", ProtocolName: "range",
		Members: []groups.MemberDescription{{MemberID: "m1", ClientHost: "/10.1.2.3", InstanceID: "worker-1"}}})
	if v.Protocol != "classic/consumer" || v.Assignor != "range" || v.Members[0].Host != "/10.1.2.3" || v.Members[0].InstanceID != "worker-1" {
		t.Fatalf("view %+v", v)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    Config
		flag string
	}{
		{Config{Refresh: 500 * time.Millisecond, LookupTimeout: time.Second}, "-console-refresh"},
		{Config{Refresh: 1500 * time.Millisecond, LookupTimeout: time.Second}, "-console-refresh"},
		{Config{Refresh: 2 * time.Hour, LookupTimeout: time.Second}, "-console-refresh"},
		{Config{Refresh: 0, LookupTimeout: 0}, "-console-timeout"},
		{Config{Refresh: time.Second, LookupTimeout: 2 * time.Minute}, "-console-timeout"},
	} {
		if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%+v: %v, want an error naming %s", tc.c, err, tc.flag)
		}
	}
	if err := (Config{Refresh: 0, LookupTimeout: time.Second}).Validate(); err != nil {
		t.Errorf("refresh off: %v", err)
	}
}

// TestTemplatesParse: every page template parses with the layout, and a page
// with the refresh off carries no meta refresh.
func TestTemplatesParse(t *testing.T) {
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range pageNames {
		if p.byName[name] == nil {
			t.Errorf("no %s page", name)
		}
	}
	c := &Console{cfg: Config{Refresh: 0, LookupTimeout: time.Second}, pages: p}
	var sb strings.Builder
	if err := p.byName["message"].ExecuteTemplate(&sb, "layout", c.newPage("x", "", nil, message{Heading: "h", Text: "t"})); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sb.String(), "http-equiv") {
		t.Fatalf("refresh off, yet:\n%s", sb.String())
	}
}

// TestRemoteLogInConsole: a tiered topic shows its remote bytes, each
// partition its remote log's start and size, and its records count from
// the remote log's start; a topic without one shows none.
func TestRemoteLogInConsole(t *testing.T) {
	tiered := cluster.Topic{Name: "t", Partitions: []cluster.Partition{
		{ID: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, Remote: &cluster.RemoteSummary{Start: 0, End: 900, Bytes: 3 << 20, Segments: 3}},
		{ID: 1, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}},
	}}
	plain := cluster.Topic{Name: "p", Partitions: []cluster.Partition{{ID: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}}
	snap := &cluster.Snapshot{Nodes: []cluster.Node{{ID: 1, Alive: true}}, Topics: []cluster.Topic{tiered, plain}}
	states := replicaStates{
		{"t", 0, 1}: {LogStartOffset: 900, HighWatermark: 1000, LogEndOffset: 1000, SizeBytes: 1 << 20},
		{"t", 1, 1}: {LogStartOffset: 0, HighWatermark: 50, LogEndOffset: 50, SizeBytes: 1 << 10},
		{"p", 0, 1}: {LogStartOffset: 0, HighWatermark: 5, LogEndOffset: 5, SizeBytes: 100},
	}
	v := buildOverview(snap, states)
	if v.Topics[1].Name != "t" || v.Topics[1].Remote != "3.0 MiB" || v.Topics[1].Records != "1,050" || v.Topics[0].Remote != "—" {
		t.Fatalf("overview rows %+v", v.Topics)
	}
	tv := buildTopic(snap, &snap.Topics[0], states)
	if tv.Remote != "3.0 MiB" || tv.Partitions[0].RemoteStart != 0 || tv.Partitions[0].RemoteBytes != 3<<20 || tv.Partitions[1].RemoteBytes != -1 {
		t.Fatalf("topic view %+v", tv)
	}
}
