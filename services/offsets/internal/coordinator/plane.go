package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// Plane is what the transaction and share-group coordinators (packages
// txncoord and sharecoord) share with the group coordinator, and all they
// reach of it: the offsets Raft group (leadership and proposals), the FSM's
// state, the partition counts of the cluster's topics, the clock and the
// log. *Coordinator implements it; its methods may be called from any
// goroutine, and none holds a lock of the caller's.
type Plane interface {
	// Ready reports whether this replica coordinates now (it leads, has
	// caught up, and its state file takes writes). A coordinator answers
	// ErrNotLeader while it is false, and its loops do nothing.
	Ready() bool
	// Propose proposes cmd and returns once its Raft entry is applied:
	// nil when the FSM applied it, the FSM's refusal, or an error when it
	// did not commit (ErrNotLeader, or REQUEST_TIMED_OUT: the entry may
	// still commit, and a retry sees the outcome).
	Propose(ctx context.Context, cmd fsm.Command) error
	// ProposeResult is Propose answering the FSM's whole result (the
	// refusal in Result.Err); the error is a failure to commit. Proposals
	// made while an entry is in flight share the next entry (group
	// commit), each with its own answer.
	ProposeResult(ctx context.Context, cmd fsm.Command) (*fsm.Result, error)
	// FSM is the replicated state, to read; what is read may be stale by
	// the time a proposal based on it applies, so every change is
	// compare-and-set or decided by the FSM.
	FSM() *fsm.FSM
	// Now is the coordinator's clock: the times it proposes and the
	// deadlines it keeps.
	Now() time.Time
	// Logger is the coordinator's log.
	Logger() *slog.Logger
	// PartitionCounts gives the cluster's partition count per topic; ok is
	// false until the first metadata snapshot arrived.
	PartitionCounts() (counts map[string]int32, ok bool)
}

var _ Plane = (*Coordinator)(nil)

// FSM implements Plane.
func (c *Coordinator) FSM() *fsm.FSM { return c.fsm }

// Now implements Plane.
func (c *Coordinator) Now() time.Time { return c.now() }

// Logger implements Plane.
func (c *Coordinator) Logger() *slog.Logger { return c.log }

// PartitionCounts implements Plane.
func (c *Coordinator) PartitionCounts() (map[string]int32, bool) { return c.topics.Partitions() }
