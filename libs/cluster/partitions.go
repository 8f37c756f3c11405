package cluster

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluicemq/sluice/libs/protocol"
)

// AlterPartitionRequest is the body of POST /v1/partitions/alter: a partition
// leader asks the metadata controller to change the partition's ISR (Kafka's
// AlterPartition). The answer is the Partition as changed.
//
// The change is accepted only when LeaderID is registered and alive at
// NodeEpoch (else STALE_BROKER_EPOCH, or UNKNOWN_NODE), LeaderEpoch is the
// partition's current leader epoch (else FENCED_LEADER_EPOCH: the sender is a
// deposed leader and should refresh its metadata), LeaderID is the current
// leader (else INVALID_REQUEST), PartitionEpoch is the current partition
// epoch (else INVALID_UPDATE_VERSION: the partition changed meanwhile; refresh
// and decide again), and ISR holds the leader, only replicas and no
// duplicates, and adds only nodes that are alive and not shutting down (else
// INVALID_REQUEST with the reason). On success the partition epoch grows by
// one; the leader and leader epoch do not change.
//
// A retried request whose first attempt was applied gets
// INVALID_UPDATE_VERSION: compare the partition in a fresh snapshot with the
// ISR asked for.
type AlterPartitionRequest struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	LeaderID       int32   `json:"leader_id"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	NodeEpoch      int64   `json:"node_epoch"`
	ISR            []int32 `json:"isr"`
}

// ResignRequest is the body of POST /v1/partitions/resign: a replica found
// its own copy damaged (corrupt data on disk) and asks to leave the ISR until
// it has fetched again what it lost, so that it is not elected with records
// missing; a leader also hands the partition to another in-sync replica.
// LeaderID is the asking node (the leader, or a follower); LeaderEpoch the
// leader epoch it leads or follows at; NodeEpoch its registration.
type ResignRequest struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	LeaderID    int32  `json:"leader_id"`
	NodeEpoch   int64  `json:"node_epoch"`
	LeaderEpoch int32  `json:"leader_epoch"`
}

// ElectRequest is the body of POST /v1/partitions/elect (Kafka's
// ElectLeaders): a leader election for partitions of a topic now (all of
// them when Partitions is empty). Preferred moves leadership to the first
// replica when it is alive and in sync; unclean elects a live replica out of
// sync for a partition without a leader.
type ElectRequest struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions,omitempty"`
	Unclean    bool    `json:"unclean,omitempty"`
}

// ElectResult is one partition's outcome: Code 0 (elected), or
// ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
// ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION and the like,
// with a message.
type ElectResult struct {
	Partition int32         `json:"partition"`
	Code      protocol.Code `json:"code,omitempty"`
	Error     string        `json:"error,omitempty"`
	Leader    int32         `json:"leader"`
}

// ElectResponse is the answer of POST /v1/partitions/elect.
type ElectResponse struct {
	Results []ElectResult `json:"results"`
}

// ShutdownRequest is the body of POST /v1/nodes/shutdown: a storage node
// about to exit asks the controller to move its leaderships away (controlled
// shutdown). ID and Epoch are the node's registration.
type ShutdownRequest struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// ShutdownResponse answers a controlled shutdown.
type ShutdownResponse struct {
	// Remaining is how many partitions the node still leads: zero when every
	// leadership moved, more when the node is the only ISR member somewhere.
	Remaining int `json:"remaining"`
}

// AlterPartition asks the controller to change a partition's ISR; see
// AlterPartitionRequest for when it is accepted. It returns the partition as
// changed.
func (c *Client) AlterPartition(ctx context.Context, req AlterPartitionRequest) (*Partition, error) {
	var p Partition
	if err := c.do(ctx, http.MethodPost, "/v1/partitions/alter", req, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ControlledShutdown asks the controller to move the node's leaderships to
// other ISR members and to take it out of the ISRs where it is not the last
// member. It returns how many partitions the node still leads; the node may
// retry while that is not zero, or exit. Its session then expires as usual.
func (c *Client) ControlledShutdown(ctx context.Context, req ShutdownRequest) (remaining int, err error) {
	var r ShutdownResponse
	if err := c.do(ctx, http.MethodPost, "/v1/nodes/shutdown", req, &r); err != nil {
		return 0, err
	}
	return r.Remaining, nil
}

// ReassignPartition starts moving a partition to the given replicas and
// returns the partition as changed (see Partition.AddingReplicas). A
// partition already being reassigned is refused with
// REASSIGNMENT_IN_PROGRESS.
func (c *Client) ReassignPartition(ctx context.Context, topic string, partition int32, replicas []int32) (*Partition, error) {
	var p Partition
	if err := c.do(ctx, http.MethodPost, reassignmentPath(topic, partition), ReassignPartitionRequest{Replicas: replicas}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// CancelReassignment stops a partition's reassignment: the replicas being
// added are dropped, and the partition keeps its replicas from before.
func (c *Client) CancelReassignment(ctx context.Context, topic string, partition int32) (*Partition, error) {
	var p Partition
	if err := c.do(ctx, http.MethodDelete, reassignmentPath(topic, partition), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func reassignmentPath(topic string, partition int32) string {
	return "/v1/topics/" + url.PathEscape(topic) + "/partitions/" + strconv.Itoa(int(partition)) + "/reassignment"
}

// DecommissionNode marks a storage node decommissioned and starts
// reassigning every replica it holds to other nodes.
func (c *Client) DecommissionNode(ctx context.Context, id int32) (*DecommissionResponse, error) {
	var r DecommissionResponse
	if err := c.do(ctx, http.MethodPost, "/v1/nodes/"+strconv.Itoa(int(id))+"/decommission", nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// RecommissionNode lets new replicas be placed on a decommissioned node
// again. Replicas already moved away stay where they are.
func (c *Client) RecommissionNode(ctx context.Context, id int32) error {
	return c.do(ctx, http.MethodDelete, "/v1/nodes/"+strconv.Itoa(int(id))+"/decommission", nil, nil)
}

// SetQuota sets a client's byte-rate quota (ClientID "" is the default for
// clients without one); both rates 0 removes it.
func (c *Client) SetQuota(ctx context.Context, q Quota) error {
	return c.do(ctx, http.MethodPut, "/v1/quotas", q, nil)
}

// ElectLeaders runs leader elections for partitions of a topic now.
func (c *Client) ElectLeaders(ctx context.Context, req ElectRequest) ([]ElectResult, error) {
	var r ElectResponse
	if err := c.do(ctx, http.MethodPost, "/v1/partitions/elect", req, &r); err != nil {
		return nil, err
	}
	return r.Results, nil
}

// ResignLeadership hands a partition led by a node with a damaged copy to
// another in-sync replica (see ResignRequest) and returns the partition as
// changed. LEADER_NOT_AVAILABLE means no other alive in-sync replica exists.
func (c *Client) ResignLeadership(ctx context.Context, req ResignRequest) (*Partition, error) {
	var p Partition
	if err := c.do(ctx, http.MethodPost, "/v1/partitions/resign", req, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// PrincipalChange is the body of PUT /v1/principals: a principal to add or
// replace, or with Delete to remove (with its ACLs).
type PrincipalChange struct {
	Principal
	Delete bool `json:"delete,omitempty"`
}

// ACLChange is the body of PUT /v1/acls: an ACL to add, or with Delete to
// remove.
type ACLChange struct {
	ACL
	Delete bool `json:"delete,omitempty"`
}

// SetPrincipal adds, replaces or (delete) removes a principal.
func (c *Client) SetPrincipal(ctx context.Context, p Principal, delete bool) error {
	return c.do(ctx, http.MethodPut, "/v1/principals", PrincipalChange{Principal: p, Delete: delete}, nil)
}

// SetACL adds or (delete) removes an ACL.
func (c *Client) SetACL(ctx context.Context, a ACL, delete bool) error {
	return c.do(ctx, http.MethodPut, "/v1/acls", ACLChange{ACL: a, Delete: delete}, nil)
}
