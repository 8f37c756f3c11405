package replica

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// Key names a partition.
type Key struct {
	Topic     string
	Partition int32
}

func (k Key) String() string { return fmt.Sprintf("%s-%d", k.Topic, k.Partition) }

// Replica is this node's copy of one partition.
type Replica struct {
	Key Key
	Log *seglog.Log

	topicID string // the topic incarnation the log belongs to; set at open
	self    int32  // this node's id

	// roleMu orders role changes (setState) against the fetcher's changes
	// to the log (asFollower): a fetcher of an older role never appends to,
	// truncates or resets the log of a leader, nor reports its offsets to
	// an old leader once this replica leads. Taken before mu.
	roleMu sync.Mutex

	mu             sync.RWMutex            // guards the fields below
	leader         int32                   // current leader's node id, -1 when none
	leaderEpoch    int32                   // current leader epoch
	partitionEpoch int32                   // epoch of the partition state (leader and ISR)
	replicas       []int32                 // assigned replicas, preferred leader first
	isr            []int32                 // in-sync replicas as metadata last said
	config         cluster.TopicConfig     // the topic's configuration
	hw             int64                   // high watermark
	followers      map[int32]FollowerState // leader only: what each follower's fetches said
	hwCh           chan struct{}           // closed when hw or the role changes
	remote         cluster.RemoteSummary   // the remote log (tiered storage), as last known
	alterPending   bool                    // leader only: an ISR change is in flight
	// maxISR is the ISR plus the replicas an expansion asked to add that
	// metadata has not confirmed yet; the high watermark counts them too
	// (Kafka's maximal ISR), so records acknowledged meanwhile are on every
	// replica the committed ISR may hold. alterBase is the partition epoch the
	// request was based on.
	maxISR    []int32
	alterBase int32
	// alterReq is the ISR change in flight (alterPending), so that an
	// answer to a request a snapshot has since superseded changes nothing.
	alterReq *cluster.AlterPartitionRequest

	// repairing is set while corrupt data found in the log is being dealt
	// with (Manager.ReportCorrupt): no fetcher runs until the log is cut.
	repairing atomic.Bool
	// cutShort is set when recovery cut the log short of an older segment
	// (seglog.Log.RecoveryCut) until the replica has been a follower: it
	// may lack records it acknowledged, so it hands over any leadership it
	// is given first.
	cutShort atomic.Bool
	// failReported is set once this node reported the log failed
	// (Manager.ReportFailed): a failed log stays failed until it is
	// reopened, so its leadership is handed over once.
	failReported atomic.Bool
}

// State is a copy of a replica's role.
type State struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	Config         cluster.TopicConfig
	HighWatermark  int64
}

// logCut brings the high watermark down to the log's end after the log was
// cut (a truncation, a damaged suffix removed) and wakes every waiter.
func (r *Replica) logCut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hw = min(r.hw, r.Log.EndOffset())
	r.notifyLocked()
}

// depose marks the replica led by nobody and wakes every waiter (it is
// leaving this node: its topic was deleted, moved away or created again).
// An ISR change in flight is dropped with it: no snapshot will ever decide it
// for this replica, and its retries (Manager.Alter) end at their next answer.
func (r *Replica) depose() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader = -1
	r.alterPending, r.alterReq, r.maxISR = false, nil, nil
	r.notifyLocked()
}

// newReplica wraps an opened log; its high watermark starts at the log's
// checkpoint.
func newReplica(k Key, l *seglog.Log, topicID string, self int32) *Replica {
	return &Replica{Key: k, Log: l, topicID: topicID, self: self, leader: -1, hw: l.HighWatermark(),
		followers: map[int32]FollowerState{}, hwCh: make(chan struct{})}
}

// State returns the replica's current role and configuration. Its Replicas and
// ISR slices are shared, not copied (every produce and fetch checks the role):
// the replica only ever replaces them, never writes into them, and callers
// must not modify them either.
func (r *Replica) State() State {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return State{Leader: r.leader, LeaderEpoch: r.leaderEpoch, PartitionEpoch: r.partitionEpoch,
		Replicas: r.replicas, ISR: r.isr, Config: r.config, HighWatermark: r.hw}
}

// HighWatermark returns the offset below which records are visible to
// consumers: on a leader the smallest progress over the ISR, on a follower the
// leader's high watermark as of the last fetch (capped by its own log end).
func (r *Replica) HighWatermark() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.hw
}

// Changed returns a channel closed when the high watermark or the replica's
// role changes next.
func (r *Replica) Changed() <-chan struct{} {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.hwCh
}

// notifyLocked wakes everything waiting on Changed; mu must be held.
func (r *Replica) notifyLocked() {
	close(r.hwCh)
	r.hwCh = make(chan struct{})
}

// CheckLeader returns NOT_LEADER_OR_FOLLOWER unless self leads the partition.
func (r *Replica) CheckLeader(self int32) (State, error) {
	s := r.State()
	if s.Leader != self {
		return s, protocol.NotLeaderOrFollower.Err("node %d is not the leader of %s (leader %d, epoch %d)", self, r.Key, s.Leader, s.LeaderEpoch)
	}
	return s, nil
}

// setState applies the partition state metadata published. A new leader epoch
// resets what a leader knew of its followers and wakes every waiter so that
// acks=all waits of a deposed leader fail.
func (r *Replica) setState(p cluster.Partition, cfg cluster.TopicConfig) {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	roleChanged := p.LeaderEpoch != r.leaderEpoch || p.Leader != r.leader
	if p.LeaderEpoch < r.leaderEpoch {
		return // an older snapshot than one already applied
	}
	if p.LeaderEpoch > r.leaderEpoch {
		// Appends that passed a leadership check under an older epoch
		// finish now or never.
		r.Log.Fence(p.LeaderEpoch)
	}
	r.leader, r.leaderEpoch, r.config = p.Leader, p.LeaderEpoch, cfg
	if p.Remote != nil {
		r.setRemoteLocked(*p.Remote)
	}
	if p.PartitionEpoch >= r.partitionEpoch || roleChanged {
		r.partitionEpoch, r.replicas, r.isr = p.PartitionEpoch, slices.Clone(p.Replicas), slices.Clone(p.ISR)
		if roleChanged || p.PartitionEpoch > r.alterBase {
			// Metadata decided after the expansion was asked: its ISR is
			// the truth.
			r.alterPending, r.maxISR, r.alterReq = false, nil, nil
		}
	}
	if roleChanged {
		// A new leader gives every in-sync follower a full lag period to
		// fetch before it may drop it (Kafka's leader-election time).
		r.followers = map[int32]FollowerState{}
		if p.Leader == r.self {
			now := time.Now()
			for _, id := range p.ISR {
				if id != r.self {
					r.followers[id] = FollowerState{CaughtUpAt: now}
				}
			}
		}
		r.hw = min(r.hw, r.Log.EndOffset())
		r.notifyLocked()
	}
	if r.leader == r.self {
		r.recomputeHWLocked()
	}
}

// TopicID returns the topic incarnation the replica's log belongs to.
func (r *Replica) TopicID() string { return r.topicID }

// SetRemote records what the remote log holds after a change this node
// made (an upload, a drop) or metadata published. A summary older than the
// one known (a lower start or end) changes nothing. An empty one (the
// remote log emptied by retention, or read empty by a new leader) comes
// only from this node's own changes and reads, never from a stale
// snapshot (metadata publishes none for an empty remote log): it is taken.
func (r *Replica) SetRemote(s cluster.RemoteSummary) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setRemoteLocked(s)
}

func (r *Replica) setRemoteLocked(s cluster.RemoteSummary) {
	if s.Segments == 0 {
		end := max(r.remote.End, s.End)
		r.remote = cluster.RemoteSummary{Start: end, End: end}
		return
	}
	if s.End < r.remote.End || s.Start < r.remote.Start {
		return
	}
	r.remote = s
	r.Log.SetUploaded(s.End)
}

// Remote returns what the remote log holds, as last known.
func (r *Replica) Remote() cluster.RemoteSummary {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.remote
}

// StartOffset is the partition's log start offset as consumers see it:
// the remote log's start when it holds records below the local log's
// (tiered storage), else the local log's.
func (r *Replica) StartOffset() int64 {
	local := r.Log.StartOffset()
	if rem := r.Remote(); rem.Segments > 0 && rem.Start < local {
		return rem.Start
	}
	return local
}

// LogConfig maps a topic's configuration to the log's.
func LogConfig(tc cluster.TopicConfig) seglog.Config {
	c := seglog.DefaultConfig()
	c.SegmentBytes = tc.SegmentBytes
	c.SegmentMs = tc.SegmentMs
	c.RetentionMs, c.RetentionBytes = tc.LocalRetention()
	c.Tiered = tc.RemoteStorage
	c.Compact = tc.Compact
	if !tc.Delete && !tc.RemoteStorage {
		// Compact alone: the cleaner, not retention, bounds the log. A
		// tiered compacted log keeps its local retention: what it deletes
		// is in remote storage.
		c.RetentionMs, c.RetentionBytes = -1, -1
	}
	if tc.MaxMessageBytes > 0 && tc.MaxMessageBytes < int64(c.MaxBatchBytes) {
		c.MaxBatchBytes = int(tc.MaxMessageBytes)
	}
	if tc.MaxMessageBytes > int64(c.MaxBatchBytes) {
		c.MaxBatchBytes = int(tc.MaxMessageBytes)
	}
	return c
}
