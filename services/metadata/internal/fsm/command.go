package fsm

import (
	"encoding/json"
	"fmt"

	"github.com/sluicemq/sluice/libs/cluster"
)

// CommandType names a command in the log. The strings are stored in the Raft
// log and in snapshots: never rename one.
type CommandType string

// The commands.
const (
	TypeInitCluster      CommandType = "init_cluster"
	TypeRegisterNode     CommandType = "register_node"
	TypeSetNodeAlive     CommandType = "set_node_alive"
	TypeCreateTopic      CommandType = "create_topic"
	TypeDeleteTopic      CommandType = "delete_topic"
	TypeAlterTopicConfig CommandType = "alter_topic_config"
	TypeAddPartitions    CommandType = "add_partitions"
	TypeUpdatePartition  CommandType = "update_partition"
	TypeFenceNode        CommandType = "fence_node"
	TypeShutdownNode     CommandType = "shutdown_node"
	TypeAlterPartition   CommandType = "alter_partition"
	TypeAllocProducerIDs CommandType = "alloc_producer_ids"

	TypeReassignPartition    CommandType = "reassign_partition"
	TypeCompleteReassignment CommandType = "complete_reassignment"
	TypeCancelReassignment   CommandType = "cancel_reassignment"
	TypeDecommissionNode     CommandType = "decommission_node"
	TypeSetQuota             CommandType = "set_quota"
	TypeSetPrincipal         CommandType = "set_principal"
	TypeSetACL               CommandType = "set_acl"

	TypeRegisterFrontend CommandType = "register_frontend"
	TypeRemoveFrontend   CommandType = "remove_frontend"
	TypeSetClusterConfig CommandType = "set_cluster_config"

	TypeAddRemoteSegment   CommandType = "add_remote_segment"
	TypeDropRemoteSegments CommandType = "drop_remote_segments"
	TypeClearRemoteGarbage CommandType = "clear_remote_garbage"
)

// Command is one entry of the metadata log: a type and exactly one matching
// body. It is encoded as JSON.
type Command struct {
	Type             CommandType       `json:"type"`
	InitCluster      *InitCluster      `json:"init_cluster,omitempty"`
	RegisterNode     *RegisterNode     `json:"register_node,omitempty"`
	SetNodeAlive     *SetNodeAlive     `json:"set_node_alive,omitempty"`
	CreateTopic      *CreateTopic      `json:"create_topic,omitempty"`
	DeleteTopic      *DeleteTopic      `json:"delete_topic,omitempty"`
	AlterTopicConfig *AlterTopicConfig `json:"alter_topic_config,omitempty"`
	AddPartitions    *AddPartitions    `json:"add_partitions,omitempty"`
	UpdatePartition  *UpdatePartition  `json:"update_partition,omitempty"`
	FenceNode        *FenceNode        `json:"fence_node,omitempty"`
	ShutdownNode     *ShutdownNode     `json:"shutdown_node,omitempty"`
	AlterPartition   *AlterPartition   `json:"alter_partition,omitempty"`
	AllocProducerIDs *AllocProducerIDs `json:"alloc_producer_ids,omitempty"`

	ReassignPartition    *ReassignPartition `json:"reassign_partition,omitempty"`
	CompleteReassignment *PartitionRef      `json:"complete_reassignment,omitempty"`
	CancelReassignment   *PartitionRef      `json:"cancel_reassignment,omitempty"`
	DecommissionNode     *DecommissionNode  `json:"decommission_node,omitempty"`
	SetQuota             *cluster.Quota     `json:"set_quota,omitempty"`
	SetPrincipal         *SetPrincipal      `json:"set_principal,omitempty"`
	SetACL               *SetACL            `json:"set_acl,omitempty"`

	RegisterFrontend *RegisterFrontend `json:"register_frontend,omitempty"`
	RemoveFrontend   *RemoveFrontend   `json:"remove_frontend,omitempty"`
	SetClusterConfig *SetClusterConfig `json:"set_cluster_config,omitempty"`

	AddRemoteSegment   *cluster.AddRemoteSegmentRequest   `json:"add_remote_segment,omitempty"`
	DropRemoteSegments *cluster.DropRemoteSegmentsRequest `json:"drop_remote_segments,omitempty"`
	ClearRemoteGarbage *cluster.ClearRemoteGarbageRequest `json:"clear_remote_garbage,omitempty"`
}

// InitCluster sets the cluster id once; later ones are ignored (not errors),
// so every new leader may propose it safely.
type InitCluster struct {
	ClusterID string `json:"cluster_id"`
}

// RegisterNode adds or replaces a storage node, bumps its epoch to the entry's
// index and marks it alive.
//
// A node that registers again restarted, perhaps with fewer records than it
// had (a replaced or emptied disk, damage recovery cut away, an unflushed
// tail lost with page-cache durability). With LeavesISRs it leaves every ISR
// where another member remains that is alive, not shutting down and in Fresh
// (the nodes the controller heard from lately), and such a member takes over
// what it led, at a new leader epoch (as a restarted Kafka broker is fenced
// out of its ISRs until it catches up); where no such member remains it
// stays, and what it leads gets a new leader epoch. Entries written without
// LeavesISRs keep replaying as they were applied: leader epochs bumped only.
type RegisterNode struct {
	ID             int32   `json:"id"`
	Addr           string  `json:"addr"`
	AdvertisedAddr string  `json:"advertised_addr"`
	KafkaAddr      string  `json:"kafka_addr,omitempty"`
	Rack           string  `json:"rack,omitempty"`
	LeavesISRs     bool    `json:"leaves_isrs,omitempty"`
	Fresh          []int32 `json:"fresh,omitempty"`
}

// SetNodeAlive records a liveness decision for a node without fencing it. It
// only applies when Epoch is the node's current epoch, so a decision about an
// old registration cannot override a newer one. The controller now expires
// nodes with FenceNode; SetNodeAlive stays so that logs written before keep
// replaying the same way.
type SetNodeAlive struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
	Alive bool  `json:"alive"`
}

// CreateTopic creates a topic with its placement already decided: partition i
// gets Replicas[i], its first replica leads, every replica is in the ISR.
type CreateTopic struct {
	Name string `json:"name"`
	// ID is the new topic's unique id, chosen by the proposer.
	ID                string            `json:"id,omitempty"`
	ReplicationFactor int               `json:"replication_factor"`
	Config            map[string]string `json:"config,omitempty"`
	Replicas          [][]int32         `json:"replicas"`
}

// DeleteTopic removes a topic.
type DeleteTopic struct {
	Name string `json:"name"`
}

// AlterTopicConfig sets and deletes configuration keys of a topic. The
// result is validated when applied, so every replica keeps or refuses it alike.
type AlterTopicConfig struct {
	Name   string            `json:"name"`
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

// AddPartitions appends partitions to a topic with their placement already
// decided: new partition len(existing)+i gets Replicas[i], its first replica
// leads, every replica is in the ISR. From is the partition count the
// proposer saw: the command applies only if it is still current.
type AddPartitions struct {
	Name     string    `json:"name"`
	From     int       `json:"from"`
	Replicas [][]int32 `json:"replicas"`
}

// UpdatePartition changes a partition's leader and ISR. LeaderEpoch and
// PartitionEpoch are the values the proposer read; the change applies only if
// they are still current. A new Leader bumps the leader epoch; every applied
// update bumps the partition epoch. Leader -1 takes the partition offline.
type UpdatePartition struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	Leader         int32   `json:"leader"`
	ISR            []int32 `json:"isr"`
}

// FenceNode records that a node's session expired: the node is marked dead
// and its epoch becomes the entry's index, so every request it still sends
// with the old epoch (heartbeat, AlterPartition, shutdown) is rejected and it
// must register again. It applies only when Epoch is the node's current epoch.
// It also ends a controlled shutdown in progress.
type FenceNode struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// ShutdownNode records that a node asked for a controlled shutdown: until it
// registers again or is fenced it may not join an ISR or be elected leader
// while another replica can lead. It applies only when Epoch is the current
// epoch of an alive node; repeating it changes nothing.
type ShutdownNode struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// AlterPartition is an ISR change requested by a partition's leader (Kafka's
// AlterPartition). It applies only when, in this order: LeaderID is a
// registered, alive node at NodeEpoch; the partition exists; LeaderEpoch is
// current; LeaderID is the partition's leader; PartitionEpoch is current; the
// new ISR holds the leader, only replicas, no duplicates; and every member it
// adds is alive and not shutting down. It bumps the partition epoch, never the
// leader epoch.
type AlterPartition struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	LeaderID       int32   `json:"leader_id"`
	NodeEpoch      int64   `json:"node_epoch"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	ISR            []int32 `json:"isr"`
}

// AllocProducerIDs reserves a block of Count idempotent producer ids for the
// proposer: the FSM's next Count ids, whatever they are when the entry
// applies (the proposer learns them from Result.ProducerID). Count is within
// 1..MaxProducerIDBlock. It is not a change of the cluster model: Version
// stays and watchers are not woken.
type AllocProducerIDs struct {
	Count int64 `json:"count"`
}

// ReassignPartition starts moving a partition to Replicas (see
// cluster.Partition.AddingReplicas). It applies only when no reassignment of
// the partition is in progress, Replicas has as many distinct registered
// nodes as the topic's replication factor, and every node new to the
// partition is alive, not shutting down and not decommissioned. The same set
// of replicas in another order only changes the preferred leader; the same
// list changes nothing.
type ReassignPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// PartitionRef names a partition. As CompleteReassignment it ends a
// reassignment whose adding replicas are all in the ISR: the removing
// replicas leave Replicas and the ISR, and if one of them led, the first
// target replica in the ISR that is alive and not shutting down (else one
// shutting down) leads instead, at a new leader epoch. As CancelReassignment
// it drops the adding replicas instead, with the same leader rule over the
// replicas from before. Either applies only when a replica can lead after it.
type PartitionRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// DecommissionNode marks a registered node decommissioned or not (see
// cluster.Node.Decommissioned).
type DecommissionNode struct {
	ID             int32 `json:"id"`
	Decommissioned bool  `json:"decommissioned"`
}

// SetQuota (a cluster.Quota) sets a client's quota, or the default one for
// ClientID ""; a quota with both rates 0 is removed. Rates must not be
// negative and the client id is at most cluster.MaxClientIDLen bytes.

// SetPrincipal adds or replaces a principal, or with Delete removes it and
// its ACLs.
type SetPrincipal struct {
	Principal cluster.Principal `json:"principal"`
	Delete    bool              `json:"delete,omitempty"`
}

// SetACL adds an ACL, or with Delete removes it. An ACL names an existing
// principal, an operation (produce or consume) and a topic name or "*".
type SetACL struct {
	ACL    cluster.ACL `json:"acl"`
	Delete bool        `json:"delete,omitempty"`
}

// AddRemoteSegment (a cluster.AddRemoteSegmentRequest) appends an uploaded
// segment to its partition's remote log. It applies only when, in this
// order: the segment is well formed (checkRemoteSegment); the leader named
// passes the checks AlterPartition's does (registered and alive at
// NodeEpoch, the partition exists, LeaderEpoch and LeaderID current); and
// the segment is either in the log already, unchanged (a retry: nothing
// changes), or starts where the log ends (any offset when it is empty).
// The partition's Remote summary follows; no epoch moves.
//
// DropRemoteSegments (a cluster.DropRemoteSegmentsRequest) removes from the
// front of the remote log every segment that ends at or below Below, after
// the same leader checks; Result.Dropped lists them. Dropping nothing is
// not an error and changes nothing.
//
// ClearRemoteGarbage (a cluster.ClearRemoteGarbageRequest) removes objects
// from a partition's remote garbage (segments of deleted topics whose
// objects the storage nodes have deleted). Objects not listed are ignored.
// Garbage is not part of the cluster model: Version stays.

// Result is what Apply returns for a command (raft's ApplyFuture.Response).
type Result struct {
	// Index is the Raft index of the entry.
	Index uint64
	// Epoch is the node's new epoch (RegisterNode, FenceNode).
	Epoch int64
	// Topic is the created topic (CreateTopic), a deep copy.
	Topic *cluster.Topic
	// Partition is the updated partition (UpdatePartition, AlterPartition,
	// AddRemoteSegment, DropRemoteSegments), a deep copy.
	Partition *cluster.Partition
	// Dropped lists the segments a DropRemoteSegments removed, in offset
	// order; nil when none.
	Dropped []cluster.RemoteSegment
	// Frontend is the frontend as registered (RegisterFrontend).
	Frontend cluster.Frontend
	// ProducerID is the first id of the block reserved (AllocProducerIDs);
	// the block is [ProducerID, ProducerID+Count).
	ProducerID int64
	// Err is the reason the command was rejected; the state is then unchanged.
	Err error
}

// Encode returns the command's log bytes.
func (c Command) Encode() ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return json.Marshal(c)
}

// DecodeCommand parses log bytes; a malformed entry is ErrMalformedCommand.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%w: %w", ErrMalformedCommand, err)
	}
	return c, c.check()
}

// check verifies that exactly the body named by Type is set.
func (c Command) check() error {
	bodies := map[CommandType]bool{
		TypeInitCluster:      c.InitCluster != nil,
		TypeRegisterNode:     c.RegisterNode != nil,
		TypeSetNodeAlive:     c.SetNodeAlive != nil,
		TypeCreateTopic:      c.CreateTopic != nil,
		TypeDeleteTopic:      c.DeleteTopic != nil,
		TypeAlterTopicConfig: c.AlterTopicConfig != nil,
		TypeAddPartitions:    c.AddPartitions != nil,
		TypeUpdatePartition:  c.UpdatePartition != nil,
		TypeFenceNode:        c.FenceNode != nil,
		TypeShutdownNode:     c.ShutdownNode != nil,
		TypeAlterPartition:   c.AlterPartition != nil,
		TypeAllocProducerIDs: c.AllocProducerIDs != nil,

		TypeReassignPartition:    c.ReassignPartition != nil,
		TypeCompleteReassignment: c.CompleteReassignment != nil,
		TypeCancelReassignment:   c.CancelReassignment != nil,
		TypeDecommissionNode:     c.DecommissionNode != nil,
		TypeSetQuota:             c.SetQuota != nil,
		TypeSetPrincipal:         c.SetPrincipal != nil,
		TypeSetACL:               c.SetACL != nil,

		TypeRegisterFrontend: c.RegisterFrontend != nil,
		TypeRemoveFrontend:   c.RemoveFrontend != nil,
		TypeSetClusterConfig: c.SetClusterConfig != nil,

		TypeAddRemoteSegment:   c.AddRemoteSegment != nil,
		TypeDropRemoteSegments: c.DropRemoteSegments != nil,
		TypeClearRemoteGarbage: c.ClearRemoteGarbage != nil,
	}
	own, known := bodies[c.Type]
	if !known {
		return fmt.Errorf("%w: unknown command type %q", ErrMalformedCommand, c.Type)
	}
	set := 0
	for _, present := range bodies {
		if present {
			set++
		}
	}
	if !own || set != 1 {
		return fmt.Errorf("%w: command %q must carry exactly its own body", ErrMalformedCommand, c.Type)
	}
	return nil
}
