package txncoord

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/txns"
	"github.com/sluicemq/sluice/services/offsets/internal/coordinator"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// Init starts a producer session (see package txns).
func (x *Coordinator) Init(ctx context.Context, id string, req txns.InitRequest) (txns.Producer, error) {
	if req.TimeoutMs <= 0 || time.Duration(req.TimeoutMs)*time.Millisecond > x.s.MaxTimeout {
		return txns.Producer{}, protocol.InvalidTransactionTimeout.Err("transaction timeout %d ms is not in (0, %d]", req.TimeoutMs, x.s.MaxTimeout.Milliseconds())
	}
	defer x.lock(id)()
	t, err := x.begin(id)
	if err != nil {
		return txns.Producer{}, err
	}
	if t == nil {
		pid, err := x.ids.NewProducerID(ctx)
		if err != nil {
			return txns.Producer{}, protocol.CoordinatorNotAvailable.Err("allocating a producer id: %v", err)
		}
		n := &fsm.Txn{ID: id, ProducerID: pid, State: fsm.TxnEmpty, TimeoutMs: req.TimeoutMs}
		if err := x.put(ctx, 0, n, false); err != nil {
			return txns.Producer{}, err
		}
		x.co.Logger().Info("transactional id registered", "transactional_id", id, "producer_id", pid)
		return txns.Producer{ProducerID: pid}, nil
	}
	if req.ProducerID >= 0 && (req.ProducerID != t.ProducerID || req.ProducerEpoch != t.Epoch) {
		// KIP-360: only the current session may ask for a new epoch.
		return txns.Producer{}, checkProducer(t, id, txns.Producer{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch})
	}
	switch {
	case t.Preparing():
		return txns.Producer{}, protocol.ConcurrentTransactions.Err("transactional id %s: its last transaction is being completed (%s)", id, t.State)
	case t.State == fsm.TxnOngoing:
		// A new session fences the old one and aborts what it left open;
		// the producer asks again once the abort completed.
		if err := x.prepare(ctx, t, false, true, false); err != nil {
			return txns.Producer{}, err
		}
		return txns.Producer{}, protocol.ConcurrentTransactions.Err("transactional id %s: aborting the transaction of the previous session", id)
	}
	n := t.Clone()
	n.State, n.TimeoutMs, n.Partitions, n.Groups, n.Offsets, n.StartMs, n.V2 = fsm.TxnEmpty, req.TimeoutMs, nil, nil, nil, 0, false
	n.EndBumped = false
	if n.Epoch == math.MaxInt16 {
		if n.ProducerID, err = x.ids.NewProducerID(ctx); err != nil {
			return txns.Producer{}, protocol.CoordinatorNotAvailable.Err("allocating a producer id: %v", err)
		}
		n.Epoch = 0
	} else {
		n.Epoch++
	}
	if err := x.put(ctx, t.Version, n, false); err != nil {
		return txns.Producer{}, err
	}
	return txns.Producer{ProducerID: n.ProducerID, ProducerEpoch: n.Epoch}, nil
}

// completionWait bounds how long a request that would begin a transaction
// waits for the producer's previous one to complete (its markers, a few
// milliseconds) before it is answered CONCURRENT_TRANSACTIONS.
const completionWait = time.Second

// join adds partitions or a group to the session's transaction, starting
// one if none is open. While the previous transaction is being completed
// it waits for that, up to completionWait: a producer under transaction
// version 2 starts its next transaction as soon as EndTxn is answered.
// When the previous transaction's markers are written by then, one Raft
// entry completes it (its offsets committed) and begins the next: the
// completion goroutine leaves its Complete entry to a waiting request.
func (x *Coordinator) join(ctx context.Context, id string, p txns.Producer, v2 bool, add func(n *fsm.Txn) bool) error {
	unlock := x.lock(id)
	defer func() { unlock() }()
	deadline := time.NewTimer(completionWait)
	defer deadline.Stop()
	var t *fsm.Txn
	var completes bool // t is prepared and its markers are written
	var handed bool    // markers were left to this request
	var settled bool   // its Complete entry, with completes, applied
	defer func() {
		if handed { // before the id's lock is released
			x.settleHanded(id, !settled)
		}
	}()
	for {
		var err error
		t, err = x.begin(id)
		if err == nil {
			err = checkProducer(t, id, p)
		}
		if err != nil {
			return err
		}
		if !t.Preparing() {
			break
		}
		c := x.completion(id, true)
		if c == nil {
			return coordinator.ErrNotLeader // stopping
		}
		unlock()
		var gaveUp error
		select {
		case <-c.done:
		case <-deadline.C:
			gaveUp = protocol.ConcurrentTransactions.Err("transactional id %s: its last transaction is being completed (%s)", id, t.State)
		case <-ctx.Done():
			gaveUp = ctx.Err()
		}
		unlock = x.lock(id)
		marked := x.leaveCompletion(c)
		// Markers left to this request: it completes the transaction
		// below, or hands it back to a goroutine.
		handed = handed || marked != 0
		if gaveUp != nil {
			return gaveUp
		}
		if t, err = x.begin(id); err != nil {
			return err
		}
		if t.Preparing() && marked == t.Version {
			if err := checkProducer(t, id, p); err != nil {
				return err
			}
			completes = true
			break
		}
	}
	n := t.Clone()
	if completes {
		moveOn(n)
	}
	if completes || t.State != fsm.TxnOngoing {
		n.State, n.Partitions, n.Groups, n.StartMs, n.V2 = fsm.TxnOngoing, nil, nil, x.co.Now().UnixMilli(), v2
		if !completes || t.State != fsm.TxnPrepareCommit {
			n.Offsets = nil
		} // else the entry commits the ended transaction's offsets (and clears them)
	}
	if !add(n) && t.State == fsm.TxnOngoing {
		return nil // nothing new
	}
	commit := completes && t.State == fsm.TxnPrepareCommit
	if err := x.put(ctx, t.Version, n, commit); err != nil {
		return err // a hand-over restarts the completion
	}
	if completes {
		settled = true
		x.completed(t, commit)
	}
	return nil
}

// isHanded reports whether version's markers are written and left to a
// waiting request.
func (x *Coordinator) isHanded(id string, version uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	v, ok := x.handed[id]
	return ok && v == version
}

// settleHanded ends a hand-over of id's markers: with restart the
// transaction was not completed and a new goroutine completes it.
func (x *Coordinator) settleHanded(id string, restart bool) {
	x.mu.Lock()
	delete(x.handed, id)
	x.mu.Unlock()
	if restart {
		x.complete(id)
	}
}

// leaveCompletion ends a wait registered by completion and returns
// the version whose markers the goroutine left to be completed (0: none);
// the caller completes it, or restarts the completion (x.complete). The
// id's lock must be held.
func (x *Coordinator) leaveCompletion(c *completion) uint64 {
	x.mu.Lock()
	c.waiters--
	marked := c.marked
	x.mu.Unlock()
	return marked
}

// AddPartitions adds partitions to the transaction, or with VerifyOnly
// checks that they are in the open one.
func (x *Coordinator) AddPartitions(ctx context.Context, id string, req txns.AddPartitionsRequest) error {
	for _, tp := range req.Partitions {
		if tp.Partition < 0 || tp.Topic == "" {
			return protocol.InvalidRequest.Err("partition %s", tp)
		}
	}
	if req.VerifyOnly {
		t, err := x.begin(id)
		if err == nil {
			err = checkProducer(t, id, req.Producer)
		}
		if err != nil {
			return err
		}
		for _, tp := range req.Partitions {
			if t.State != fsm.TxnOngoing || !slices.Contains(t.Partitions, tp) {
				return protocol.InvalidTxnState.Err("transactional id %s: %s is not in its open transaction (%s)", id, tp, t.State)
			}
		}
		return nil
	}
	return x.join(ctx, id, req.Producer, req.V2, func(n *fsm.Txn) bool {
		changed := false
		for _, tp := range req.Partitions {
			if !slices.Contains(n.Partitions, tp) {
				n.Partitions, changed = append(n.Partitions, tp), true
			}
		}
		slices.SortFunc(n.Partitions, func(a, b groups.TP) int {
			if a.Less(b) {
				return -1
			}
			if b.Less(a) {
				return 1
			}
			return 0
		})
		return changed
	})
}

// AddGroup adds a consumer group to the transaction.
func (x *Coordinator) AddGroup(ctx context.Context, id string, req txns.AddGroupRequest) error {
	if err := groups.ValidateGroupID(req.Group); err != nil {
		return protocol.InvalidGroupID.Err("%v", err)
	}
	return x.join(ctx, id, req.Producer, req.V2, func(n *fsm.Txn) bool {
		if slices.Contains(n.Groups, req.Group) {
			return false
		}
		n.Groups = append(n.Groups, req.Group)
		slices.Sort(n.Groups)
		return true
	})
}

// CommitOffsets records a group's offsets in the open transaction; they
// become the group's committed offsets when it commits. A member's commit
// is fenced as the group's own commits are.
func (x *Coordinator) CommitOffsets(ctx context.Context, id string, req txns.CommitOffsetsRequest) error {
	cmd := &fsm.Commit{Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.GenerationID, Offsets: req.Offsets}
	if err := fsm.ValidateOffsets(req.Group, req.Offsets); err != nil {
		return err
	}
	defer x.lock(id)()
	t, err := x.begin(id)
	if err == nil {
		err = checkProducer(t, id, req.Producer)
	}
	if err != nil {
		return err
	}
	if t.State != fsm.TxnOngoing || !slices.Contains(t.Groups, req.Group) {
		return protocol.InvalidTxnState.Err("transactional id %s: group %s was not added to an open transaction (%s)", id, req.Group, t.State)
	}
	if req.MemberID != "" {
		g, _ := x.co.FSM().Group(req.Group)
		if err := fsm.CheckCommit(g, cmd); err != nil {
			return err
		}
	}
	n := t.Clone()
	if n.Offsets == nil {
		n.Offsets = map[string][]groups.Offset{}
	}
	pending := n.Offsets[req.Group]
	for _, o := range req.Offsets {
		i := slices.IndexFunc(pending, func(p groups.Offset) bool { return p.Topic == o.Topic && p.Partition == o.Partition })
		if i >= 0 {
			pending[i] = o
		} else {
			pending = append(pending, o)
		}
	}
	n.Offsets[req.Group] = pending
	return x.put(ctx, t.Version, n, false)
}

// End commits or aborts the open transaction. The answer comes once the
// decision is durable; the markers follow.
func (x *Coordinator) End(ctx context.Context, id string, req txns.EndRequest) (txns.Producer, error) {
	defer x.lock(id)()
	t, err := x.begin(id)
	if err != nil {
		return txns.Producer{}, err
	}
	outcome := fsm.TxnCompleteAbort
	if req.Commit {
		outcome = fsm.TxnCompleteCommit
	}
	cur := txns.Producer{ProducerID: -1, ProducerEpoch: -1}
	if t != nil {
		cur = session(t)
	}
	// A version 2 End whose answer was lost is retried with the epoch
	// before its bump: the same outcome is answered again. Not when a new
	// session or a timeout raised the epoch: that producer is fenced.
	if t != nil && t.V2 && t.EndBumped && req.ProducerID == t.ProducerID && req.ProducerEpoch == t.Epoch-1 &&
		(t.State == outcome || t.State == prepared(outcome)) {
		return cur, nil
	}
	if err := checkProducer(t, id, req.Producer); err != nil {
		return txns.Producer{}, err
	}
	if !req.Commit && req.V2 && (t.State == fsm.TxnEmpty || t.State == fsm.TxnCompleteCommit || t.State == fsm.TxnCompleteAbort) {
		// Version 2: aborting a transaction that wrote nothing succeeds
		// and, like every end, bumps the epoch.
		n := t.Clone()
		n.State, n.V2, n.EndBumped = fsm.TxnCompleteAbort, true, true
		if err := x.bump(ctx, n); err != nil {
			return txns.Producer{}, err
		}
		moveOn(n) // no markers to write
		if err := x.put(ctx, t.Version, n, false); err != nil {
			return txns.Producer{}, err
		}
		return session(n), nil
	}
	switch t.State {
	case fsm.TxnOngoing:
		if err := x.prepare(ctx, t, req.Commit, req.V2 || t.V2, true); err != nil {
			return txns.Producer{}, err
		}
		t, _, err = x.co.FSM().Txn(id)
		if err != nil {
			return txns.Producer{}, err
		}
		return session(t), nil
	case outcome:
		if !req.V2 {
			return cur, nil // a retry of the End that completed it (version 1: same epoch)
		}
	case prepared(outcome), prepared(fsm.TxnCompleteCommit), prepared(fsm.TxnCompleteAbort):
		// Its previous transaction's markers are being written (or this
		// one's, retried): once they are, the answer is known.
		return txns.Producer{}, protocol.ConcurrentTransactions.Err("transactional id %s: its transaction is being completed (%s)", id, t.State)
	}
	return txns.Producer{}, protocol.InvalidTxnState.Err("transactional id %s: no open transaction to %s (%s)", id, map[bool]string{true: "commit", false: "abort"}[req.Commit], t.State)
}

// prepared is the Prepare state of a Complete one.
func prepared(complete string) string {
	if complete == fsm.TxnCompleteCommit {
		return fsm.TxnPrepareCommit
	}
	return fsm.TxnPrepareAbort
}

// prepare makes the decision on the ongoing transaction t durable and
// starts writing its markers. bump raises the producer epoch (transaction
// version 2, and every abort the coordinator decides: it fences the
// session); the markers carry the epoch that results. byEnd: the
// producer's own End decided (EndBumped). The id's lock must be held.
func (x *Coordinator) prepare(ctx context.Context, t *fsm.Txn, commit, bump, byEnd bool) error {
	n := t.Clone()
	n.State = fsm.TxnPrepareAbort
	if commit {
		n.State = fsm.TxnPrepareCommit
	}
	n.EndBumped = bump && byEnd
	if bump {
		if err := x.bump(ctx, n); err != nil {
			return err
		}
	}
	if err := x.put(ctx, t.Version, n, false); err != nil {
		return err
	}
	x.co.Logger().Debug("transaction ended", "transactional_id", t.ID, "producer_id", n.ProducerID, "epoch", n.Epoch, "state", n.State,
		"partitions", len(n.Partitions), "groups", len(n.Groups))
	x.complete(t.ID)
	return nil
}
