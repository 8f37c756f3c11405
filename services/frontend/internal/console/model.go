package console

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/libs/cluster"
)

// The views in this file are built by pure functions from what the sources
// returned, so the rules (which partition is offline, what a topic's size
// is) are tested without sockets.

// Partition states, shown on the pages and used as row classes.
const (
	stateOK              = "ok"
	stateUnderReplicated = "under-replicated"
	stateOffline         = "offline"
)

// partitionState classifies a partition: offline when it has no leader or
// its leader's node is not alive (nobody can produce to it or read it),
// under-replicated when fewer of its replicas are in sync than it has (the
// metadata service's under-replicated count), ok otherwise.
func partitionState(p *cluster.Partition, alive map[int32]bool) string {
	switch {
	case p.Leader < 0 || !alive[p.Leader]:
		return stateOffline
	case p.UnderReplicated():
		return stateUnderReplicated
	}
	return stateOK
}

// aliveNodes returns which registered nodes the controller holds alive.
func aliveNodes(snap *cluster.Snapshot) map[int32]bool {
	alive := make(map[int32]bool, len(snap.Nodes))
	for _, n := range snap.Nodes {
		alive[n.ID] = n.Alive
	}
	return alive
}

// total is a sum over a topic's partitions of what their leaders reported.
type total struct {
	Value int64
	Known int // partitions whose leader reported the value
	Of    int // partitions of the topic
}

// text formats the sum: "—" when no leader reported, and how many
// partitions it covers when only some did.
func (t total) text(format func(int64) string) string {
	switch {
	case t.Known == 0 && t.Of > 0:
		return "—"
	case t.Known < t.Of:
		return fmt.Sprintf("%s (%d of %d partitions)", format(t.Value), t.Known, t.Of)
	}
	return format(t.Value)
}

// leaderTotals sums, over a topic's partitions, the log size and the records
// (high watermark minus log start: the records a consumer can read) that
// each partition's leader reported. Replicas are not counted: the size is
// that of one copy of the data.
func leaderTotals(t *cluster.Topic, states replicaStates) (size, records total) {
	size.Of, records.Of = len(t.Partitions), len(t.Partitions)
	for _, p := range t.Partitions {
		r, ok := states[replicaKey{topic: t.Name, partition: p.ID, node: p.Leader}]
		if !ok || p.Leader < 0 {
			continue
		}
		records.Known++
		records.Value += max(r.HighWatermark-partitionStart(&p, r.LogStartOffset), 0)
		if r.SizeBytes >= 0 {
			size.Known++
			size.Value += r.SizeBytes
		}
	}
	return size, records
}

// partitionStart is the partition's log start: the remote log's when it
// holds records below the leader's local log (tiered storage), else the
// local log's.
func partitionStart(p *cluster.Partition, local int64) int64 {
	if rs := p.Remote; rs != nil && rs.Segments > 0 && rs.Start < local {
		return rs.Start
	}
	return local
}

// remoteBytes sums the bytes of a topic's remote logs, "—" when none has
// one (tiered storage).
func remoteBytes(t *cluster.Topic) string {
	var n int64
	tiered := false
	for _, p := range t.Partitions {
		if p.Remote != nil && p.Remote.Segments > 0 {
			n, tiered = n+p.Remote.Bytes, true
		}
	}
	if !tiered {
		return "—"
	}
	return formatBytes(n)
}

// overviewView is the body of /console.
type overviewView struct {
	ClusterID      string
	Version        uint64
	MetadataLeader string
	NodesAlive     int
	Nodes          []nodeRow
	// Partitions counts every partition; UnderReplicated and Offline those
	// in that state.
	Partitions      int
	UnderReplicated int
	Offline         int
	Topics          []topicRow
}

// nodeRow is one storage node on the overview.
type nodeRow struct {
	ID             int32
	Addr           string
	AdvertisedAddr string
	Rack           string
	Alive          bool
	Decommissioned bool
	Replicas       int // replicas placed on the node
	Leaders        int // partitions it leads
}

// topicRow is one topic on the overview.
type topicRow struct {
	Name              string
	Partitions        int
	ReplicationFactor int
	UnderReplicated   int
	Offline           int
	Size              string
	Remote            string // bytes in remote storage
	Records           string
}

// buildOverview summarizes the cluster model and the replica states.
func buildOverview(snap *cluster.Snapshot, states replicaStates) overviewView {
	v := overviewView{ClusterID: snap.ClusterID, Version: snap.Version, MetadataLeader: snap.Leader}
	alive := aliveNodes(snap)
	rows := map[int32]*nodeRow{}
	for _, n := range snap.Nodes {
		v.Nodes = append(v.Nodes, nodeRow{ID: n.ID, Addr: n.Addr, AdvertisedAddr: n.AdvertisedAddr, Rack: n.Rack,
			Alive: n.Alive, Decommissioned: n.Decommissioned})
		if n.Alive {
			v.NodesAlive++
		}
	}
	sort.Slice(v.Nodes, func(i, j int) bool { return v.Nodes[i].ID < v.Nodes[j].ID })
	for i := range v.Nodes {
		rows[v.Nodes[i].ID] = &v.Nodes[i]
	}
	for i := range snap.Topics {
		t := &snap.Topics[i]
		row := topicRow{Name: t.Name, Partitions: len(t.Partitions), ReplicationFactor: t.ReplicationFactor}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			switch partitionState(p, alive) {
			case stateOffline:
				row.Offline++
			case stateUnderReplicated:
				row.UnderReplicated++
			}
			for _, id := range p.Replicas {
				if r := rows[id]; r != nil {
					r.Replicas++
					if id == p.Leader {
						r.Leaders++
					}
				}
			}
		}
		size, records := leaderTotals(t, states)
		row.Size, row.Records, row.Remote = size.text(formatBytes), records.text(formatCount), remoteBytes(t)
		v.Partitions += row.Partitions
		v.UnderReplicated += row.UnderReplicated
		v.Offline += row.Offline
		v.Topics = append(v.Topics, row)
	}
	sort.Slice(v.Topics, func(i, j int) bool { return v.Topics[i].Name < v.Topics[j].Name })
	return v
}

// topicView is the body of /console/topics/{name}.
type topicView struct {
	Name              string
	ID                string
	ReplicationFactor int
	Config            []configEntry
	Partitions        []partitionRow
	Replicas          []replicaRow
	UnderReplicated   int
	Offline           int
	Size              string
	Remote            string // bytes in remote storage
	Records           string
}

// configEntry is one topic config override.
type configEntry struct{ Key, Value string }

// partitionRow is one partition as metadata holds it and its leader reports
// it.
type partitionRow struct {
	ID          int32
	Leader      int32 // -1 when none
	LeaderAddr  string
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	State       string
	Reassigning bool
	// Reported is whether the leader answered; the log fields below are
	// its answer.
	Reported      bool
	LogStart      int64
	LogEnd        int64
	HighWatermark int64
	SizeBytes     int64 // -1 when the leader does not report sizes
	// RemoteStart and RemoteBytes describe the remote log (tiered
	// storage); RemoteBytes is -1 without one.
	RemoteStart, RemoteBytes int64
}

// replicaRow is one replica as its node reports it.
type replicaRow struct {
	Partition int32
	Node      int32
	Leader    bool
	InSync    bool
	// Reported is whether the node answered; the log fields below are its
	// answer.
	Reported      bool
	LogStart      int64
	LogEnd        int64
	HighWatermark int64
	SizeBytes     int64
	// Lag is the leader's log end minus this replica's, -1 when either did
	// not answer.
	Lag int64
}

// buildTopic describes a topic's partitions and replicas.
func buildTopic(snap *cluster.Snapshot, t *cluster.Topic, states replicaStates) topicView {
	v := topicView{Name: t.Name, ID: t.ID, ReplicationFactor: t.ReplicationFactor}
	for k, val := range t.Config {
		v.Config = append(v.Config, configEntry{Key: k, Value: val})
	}
	sort.Slice(v.Config, func(i, j int) bool { return v.Config[i].Key < v.Config[j].Key })
	alive := aliveNodes(snap)
	parts := slices.Clone(t.Partitions)
	sort.Slice(parts, func(i, j int) bool { return parts[i].ID < parts[j].ID })
	for i := range parts {
		p := &parts[i]
		row := partitionRow{ID: p.ID, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR,
			State: partitionState(p, alive), Reassigning: p.Reassigning(), SizeBytes: -1, RemoteBytes: -1}
		if rs := p.Remote; rs != nil && rs.Segments > 0 {
			row.RemoteStart, row.RemoteBytes = rs.Start, rs.Bytes
		}
		if n, ok := snap.Node(p.Leader); ok {
			row.LeaderAddr = n.Addr
		}
		leader, leaderOK := states[replicaKey{topic: t.Name, partition: p.ID, node: p.Leader}]
		if leaderOK && p.Leader >= 0 {
			row.Reported, row.LogStart, row.LogEnd = true, leader.LogStartOffset, leader.LogEndOffset
			row.HighWatermark, row.SizeBytes = leader.HighWatermark, leader.SizeBytes
		}
		switch row.State {
		case stateOffline:
			v.Offline++
		case stateUnderReplicated:
			v.UnderReplicated++
		}
		v.Partitions = append(v.Partitions, row)
		for _, id := range p.Replicas {
			rr := replicaRow{Partition: p.ID, Node: id, Leader: id == p.Leader, InSync: slices.Contains(p.ISR, id), SizeBytes: -1, Lag: -1}
			if r, ok := states[replicaKey{topic: t.Name, partition: p.ID, node: id}]; ok {
				rr.Reported, rr.LogStart, rr.LogEnd, rr.HighWatermark, rr.SizeBytes = true, r.LogStartOffset, r.LogEndOffset, r.HighWatermark, r.SizeBytes
				if row.Reported {
					rr.Lag = max(leader.LogEndOffset-r.LogEndOffset, 0)
				}
			}
			v.Replicas = append(v.Replicas, rr)
		}
	}
	size, records := leaderTotals(t, states)
	v.Size, v.Records, v.Remote = size.text(formatBytes), records.text(formatCount), remoteBytes(t)
	return v
}

// replicaNodes returns the nodes holding a replica of t, in id order.
func replicaNodes(t *cluster.Topic) []int32 {
	var ids []int32
	for _, p := range t.Partitions {
		for _, id := range p.Replicas {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// registeredNodes returns every registered node, in id order.
func registeredNodes(snap *cluster.Snapshot) []int32 {
	ids := make([]int32, 0, len(snap.Nodes))
	for _, n := range snap.Nodes {
		ids = append(ids, n.ID)
	}
	slices.Sort(ids)
	return ids
}

// formatBytes prints a size in IEC units with one decimal ("1.5 KiB"), bytes
// exactly below 1 KiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// formatCount prints a count with thousands separators ("12,345").
func formatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	b.WriteString(sign)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
