package fsm

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/sluicemq/sluice/libs/cluster"
)

// Sentinel errors of Apply. They come back in Result.Err, wrapped with %w and
// the details; the API maps them to wire codes and HTTP statuses.
var (
	// ErrMalformedCommand: the entry's bytes are not a valid command.
	ErrMalformedCommand = errors.New("malformed command")
	// ErrTopicExists: CreateTopic for a name in use.
	ErrTopicExists = errors.New("topic already exists")
	// ErrUnknownTopic: the named topic does not exist.
	ErrUnknownTopic = errors.New("unknown topic")
	// ErrUnknownPartition: the topic has no such partition.
	ErrUnknownPartition = errors.New("unknown partition")
	// ErrUnknownNode: the storage node was never registered.
	ErrUnknownNode = errors.New("unknown storage node")
	// ErrInvalidTopic: a CreateTopic's name, shape, placement or config is invalid.
	ErrInvalidTopic = errors.New("invalid topic")
	// ErrStalePartitionCount: an AddPartitions was based on an old count.
	ErrStalePartitionCount = errors.New("stale partition count")
	// ErrInvalidConfig: an AlterTopicConfig would leave an invalid config.
	ErrInvalidConfig = errors.New("invalid topic config")
	// ErrStaleNodeEpoch: a liveness change names an old registration.
	ErrStaleNodeEpoch = errors.New("stale node epoch")
	// ErrFencedLeaderEpoch: an UpdatePartition was based on an old leader epoch.
	ErrFencedLeaderEpoch = errors.New("fenced leader epoch")
	// ErrStalePartitionEpoch: an UpdatePartition was based on an old partition epoch.
	ErrStalePartitionEpoch = errors.New("stale partition epoch")
	// ErrInvalidPartitionState: an UpdatePartition's or AlterPartition's
	// leader or ISR is not valid.
	ErrInvalidPartitionState = errors.New("invalid partition state")
	// ErrNotPartitionLeader: an AlterPartition from a node that does not lead
	// the partition at the leader epoch it names.
	ErrNotPartitionLeader = errors.New("not the partition leader")
	// ErrIneligibleReplica: an AlterPartition adds to the ISR a node that is
	// dead, fenced or shutting down.
	ErrIneligibleReplica = errors.New("ineligible replica")
	// ErrProducerIDsExhausted: an AllocProducerIDs past the largest int64.
	ErrProducerIDsExhausted = errors.New("producer ids exhausted")
	// ErrInvalidReassignment: a reassignment's replica list is not valid
	// for the topic (count, unknown or repeated nodes).
	ErrInvalidReassignment = errors.New("invalid replica assignment")
	// ErrReassignmentInProgress: the partition is already being reassigned.
	ErrReassignmentInProgress = errors.New("reassignment in progress")
	// ErrNoReassignmentInProgress: the partition is not being reassigned.
	ErrNoReassignmentInProgress = errors.New("no reassignment in progress")
	// ErrReassignmentNotReady: the adding replicas are not all in the ISR,
	// or no replica could lead after the change.
	ErrReassignmentNotReady = errors.New("reassignment cannot end yet")
	// ErrInvalidPrincipal: a principal or ACL that is not valid (name, token
	// hash, operation, topic), or an ACL for a principal that does not exist.
	ErrInvalidPrincipal = errors.New("invalid principal or ACL")
	// ErrUnknownPrincipal: no principal by that name.
	ErrUnknownPrincipal = errors.New("unknown principal")
	// ErrInvalidQuota: a quota with a negative rate or a client id too long.
	ErrInvalidQuota = errors.New("invalid quota")
	// ErrCorruptSnapshot: Restore was given bytes that are not a snapshot.
	ErrCorruptSnapshot = errors.New("corrupt snapshot")
)

// state is the replicated model. Its maps are owned by the FSM.
type state struct {
	clusterID string
	version   uint64
	nodes     map[int32]*cluster.Node
	topics    map[string]*cluster.Topic
	// shuttingDown holds the nodes in controlled shutdown (ShutdownNode),
	// until they register again or are fenced. It is not part of
	// cluster.Snapshot; the controller reads it through View.
	shuttingDown map[int32]bool
	// nextProducerID is the lowest producer id no AllocProducerIDs has
	// reserved; it only grows. Not part of cluster.Snapshot either.
	nextProducerID int64
	// quotas are the client quotas by client id ("" the default).
	quotas map[string]cluster.Quota
	// principals by name, and the ACLs as a set.
	principals map[string]cluster.Principal
	acls       map[cluster.ACL]bool
	// frontends are the registered frontends by id; config the
	// cluster-wide settings.
	frontends map[int32]*cluster.Frontend
	config    map[string]string
	// remote holds each partition's remote log (tiered storage), its
	// segments in offset order; a partition with none has no entry. The
	// partition's Remote field summarizes it. remoteGarbage holds the
	// segments of deleted topics whose objects are still to be deleted
	// from the store. See remote.go.
	remote        map[partitionKey][]cluster.RemoteSegment
	remoteGarbage map[partitionKey][]cluster.RemoteSegment
	// remoteStart is a remote log's start where DeleteRecords moved it
	// inside its first segment (cluster.RemoteLog.LogStart).
	remoteStart map[partitionKey]int64
}

func newState() state {
	return state{
		nodes: map[int32]*cluster.Node{}, topics: map[string]*cluster.Topic{}, shuttingDown: map[int32]bool{},
		nextProducerID: FirstProducerID, quotas: map[string]cluster.Quota{},
		principals: map[string]cluster.Principal{}, acls: map[cluster.ACL]bool{},
		frontends: map[int32]*cluster.Frontend{},
		remote:    map[partitionKey][]cluster.RemoteSegment{}, remoteGarbage: map[partitionKey][]cluster.RemoteSegment{},
		remoteStart: map[partitionKey]int64{},
	}
}

// FSM is the metadata state machine. Apply, Snapshot and Restore are called
// by raft from its FSM goroutine; the read methods from any goroutine.
type FSM struct {
	mu      sync.RWMutex
	st      state         // guarded by mu
	changed chan struct{} // closed and replaced on every change; guarded by mu
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty FSM.
func New() *FSM {
	return &FSM{st: newState(), changed: make(chan struct{})}
}

// Apply applies one committed entry and returns a *Result. Called by raft on
// its FSM goroutine, in log order.
func (f *FSM) Apply(l *raft.Log) any {
	cmd, err := DecodeCommand(l.Data)
	if err != nil {
		return &Result{Index: l.Index, Err: err}
	}
	return f.ApplyCommand(l.Index, cmd)
}

// ApplyCommand applies cmd as the entry at index. It is Apply without the
// decoding, for tests and tools that replay commands.
func (f *FSM) ApplyCommand(index uint64, cmd Command) *Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := &Result{Index: index}
	var changed bool
	switch cmd.Type {
	case TypeInitCluster:
		changed, res.Err = f.st.initCluster(cmd.InitCluster)
	case TypeRegisterNode:
		res.Epoch, res.Err = f.st.registerNode(index, cmd.RegisterNode)
	case TypeSetNodeAlive:
		changed, res.Err = f.st.setNodeAlive(cmd.SetNodeAlive)
	case TypeCreateTopic:
		res.Topic, res.Err = f.st.createTopic(cmd.CreateTopic)
	case TypeDeleteTopic:
		res.Err = f.st.deleteTopic(cmd.DeleteTopic)
	case TypeAlterTopicConfig:
		res.Topic, res.Err = f.st.alterTopicConfig(cmd.AlterTopicConfig)
	case TypeAddPartitions:
		res.Topic, res.Err = f.st.addPartitions(cmd.AddPartitions)
	case TypeUpdatePartition:
		res.Partition, res.Err = f.st.updatePartition(cmd.UpdatePartition)
	case TypeFenceNode:
		res.Epoch, res.Err = f.st.fenceNode(index, cmd.FenceNode)
	case TypeShutdownNode:
		changed, res.Err = f.st.shutdownNode(cmd.ShutdownNode)
	case TypeAlterPartition:
		res.Partition, res.Err = f.st.alterPartition(cmd.AlterPartition)
	case TypeReassignPartition, TypeCompleteReassignment, TypeCancelReassignment:
		changed = f.st.applyReassign(cmd, res)
	case TypeDecommissionNode:
		changed, res.Err = f.st.decommissionNode(cmd.DecommissionNode)
	case TypeSetQuota:
		changed, res.Err = f.st.setQuota(cmd.SetQuota)
	case TypeSetPrincipal:
		changed, res.Err = f.st.setPrincipal(cmd.SetPrincipal)
	case TypeSetACL:
		changed, res.Err = f.st.setACL(cmd.SetACL)
	case TypeRegisterFrontend:
		res.Frontend, res.Err = f.st.registerFrontend(index, cmd.RegisterFrontend)
	case TypeRemoveFrontend:
		changed, res.Err = f.st.removeFrontend(cmd.RemoveFrontend)
	case TypeSetClusterConfig:
		changed, res.Err = f.st.setClusterConfig(cmd.SetClusterConfig)
	case TypeAddRemoteSegment, TypeDropRemoteSegments, TypeClearRemoteGarbage:
		changed = f.st.applyRemote(cmd, res)
	case TypeAllocProducerIDs:
		// Not a change of the cluster model: watchers have nothing to see.
		res.ProducerID, res.Err = f.st.allocProducerIDs(cmd.AllocProducerIDs)
	default:
		res.Err = cmd.check()
	}
	switch cmd.Type {
	case TypeRegisterNode, TypeCreateTopic, TypeDeleteTopic, TypeAlterTopicConfig, TypeAddPartitions, TypeUpdatePartition, TypeFenceNode, TypeAlterPartition,
		TypeCompleteReassignment, TypeCancelReassignment, TypeRegisterFrontend:
		changed = res.Err == nil
	}
	if changed {
		f.st.version = index
		f.notifyLocked()
	}
	return res
}

// notifyLocked wakes every watcher. Callers hold mu for writing.
func (f *FSM) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Changed returns the current version and a channel closed at the next change.
func (f *FSM) Changed() (uint64, <-chan struct{}) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.version, f.changed
}

// WaitNewer blocks until the version is greater than since or ctx ends, and
// returns the version it saw last (ctx's error when it ended first).
func (f *FSM) WaitNewer(ctx context.Context, since uint64) (uint64, error) {
	for {
		v, ch := f.Changed()
		if v > since {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
}

// Version returns the Raft index of the last change (0 before any).
func (f *FSM) Version() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.version
}

// ClusterID returns the cluster id, empty until InitCluster was applied.
func (f *FSM) ClusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.clusterID
}

// Cluster returns a deep copy of the whole model, nodes by id and topics by
// name. (raft.FSM already owns the name Snapshot.)
func (f *FSM) Cluster() *cluster.Snapshot {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.export()
}

// Access returns the principals and ACLs alone, with the version, for
// authorization.
func (f *FSM) Access() *cluster.Snapshot {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &cluster.Snapshot{Version: f.st.version, Principals: f.st.sortedPrincipals(), ACLs: f.st.sortedACLs()}
}

// Topic returns a deep copy of the named topic.
func (f *FSM) Topic(name string) (cluster.Topic, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.st.topics[name]
	if !ok {
		return cluster.Topic{}, false
	}
	return copyTopic(t), true
}

// Topics returns deep copies of every topic, by name.
func (f *FSM) Topics() []cluster.Topic {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.sortedTopics()
}

// Node returns a copy of the storage node with the given id.
func (f *FSM) Node(id int32) (cluster.Node, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.st.nodes[id]
	if !ok {
		return cluster.Node{}, false
	}
	return *n, true
}

// Nodes returns copies of every storage node, by id.
func (f *FSM) Nodes() []cluster.Node {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.sortedNodes()
}

// View is a consistent copy of the whole model, for decisions that need
// more than cluster.Snapshot holds.
type View struct {
	*cluster.Snapshot
	// ShuttingDown holds the nodes in controlled shutdown.
	ShuttingDown map[int32]bool
	// NextProducerID is the lowest producer id not reserved yet.
	NextProducerID int64
}

// View returns the model, the nodes in controlled shutdown and the producer
// id counter, all at the same version.
func (f *FSM) View() View {
	f.mu.RLock()
	defer f.mu.RUnlock()
	sd := make(map[int32]bool, len(f.st.shuttingDown))
	for id := range f.st.shuttingDown {
		sd[id] = true
	}
	return View{Snapshot: f.st.export(), ShuttingDown: sd, NextProducerID: f.st.nextProducerID}
}

// CheckAlterPartition tells whether c would apply to the current state,
// with the error Apply would return, without changing anything. The leader
// calls it before proposing so that stale requests cost no log entry; Apply
// checks again.
func (f *FSM) CheckAlterPartition(c AlterPartition) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, err := f.st.checkAlterPartition(&c)
	return err
}

// CheckReassignPartition reports whether c would be applied now (the same
// checks as Apply).
func (f *FSM) CheckReassignPartition(c ReassignPartition) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, _, err := f.st.checkReassignPartition(&c)
	return err
}

// CheckEndReassignment reports whether completing (or, with complete false,
// cancelling) the partition's reassignment would be applied now.
func (f *FSM) CheckEndReassignment(c PartitionRef, complete bool) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, _, _, err := f.st.checkEndReassignment(&c, complete)
	return err
}

// CheckAlterTopicConfig reports whether c would be applied now (the same
// checks as Apply), so that a refused change costs no log entry.
func (f *FSM) CheckAlterTopicConfig(c AlterTopicConfig) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, _, err := f.st.checkAlterTopicConfig(&c)
	return err
}

// Counts returns the number of storage nodes and topics.
func (f *FSM) Counts() (nodes, topics int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.st.nodes), len(f.st.topics)
}

// HealthCounts summarizes the cluster's partitions and nodes.
type HealthCounts struct {
	Partitions int
	// UnderReplicated counts partitions with fewer in-sync replicas than
	// they should have (cluster.Partition.UnderReplicated).
	UnderReplicated int
	// Offline counts partitions without a leader.
	Offline int
	// Reassigning counts partitions being moved to other replicas.
	Reassigning int
	// AliveNodes counts registered storage nodes with a live session.
	AliveNodes int
}

// Health counts partitions by state and the storage nodes alive.
func (f *FSM) Health() HealthCounts {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var h HealthCounts
	for _, t := range f.st.topics {
		for _, p := range t.Partitions {
			h.Partitions++
			if p.UnderReplicated() {
				h.UnderReplicated++
			}
			if p.Leader < 0 {
				h.Offline++
			}
			if p.Reassigning() {
				h.Reassigning++
			}
		}
	}
	for _, n := range f.st.nodes {
		if n.Alive {
			h.AliveNodes++
		}
	}
	return h
}

func (s *state) export() *cluster.Snapshot {
	return &cluster.Snapshot{
		Version:    s.version,
		ClusterID:  s.clusterID,
		Nodes:      s.sortedNodes(),
		Topics:     s.sortedTopics(),
		Quotas:     s.sortedQuotas(),
		Principals: s.sortedPrincipals(),
		ACLs:       s.sortedACLs(),
		Frontends:  s.sortedFrontends(),
		Config:     maps.Clone(s.config),
	}
}

func (s *state) sortedQuotas() []cluster.Quota { return valuesByKey(s.quotas) }

// valuesByKey returns m's values ordered by key, nil when m is empty.
func valuesByKey[V any](m map[string]V) []V {
	if len(m) == 0 {
		return nil
	}
	out := make([]V, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

func (s *state) sortedNodes() []cluster.Node {
	out := make([]cluster.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *state) sortedTopics() []cluster.Topic {
	out := make([]cluster.Topic, 0, len(s.topics))
	for _, t := range s.topics {
		out = append(out, copyTopic(t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// copyTopic deep-copies t: config map and every partition's slices.
func copyTopic(t *cluster.Topic) cluster.Topic {
	c := *t
	c.Config = make(map[string]string, len(t.Config))
	for k, v := range t.Config {
		c.Config[k] = v
	}
	c.Partitions = make([]cluster.Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		c.Partitions[i] = copyPartition(p)
	}
	return c
}

func copyPartition(p cluster.Partition) cluster.Partition {
	p.Replicas = append([]int32(nil), p.Replicas...)
	p.ISR = append([]int32(nil), p.ISR...)
	p.TargetReplicas = slices.Clone(p.TargetReplicas)
	p.AddingReplicas = slices.Clone(p.AddingReplicas)
	if p.Remote != nil {
		r := *p.Remote
		p.Remote = &r
	}
	return p
}
