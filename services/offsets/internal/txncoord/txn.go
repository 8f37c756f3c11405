package txncoord

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/txns"
	"github.com/sluicemq/sluice/services/offsets/internal/coordinator"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
	"github.com/sluicemq/sluice/services/offsets/internal/keylock"
)

// Marker is one transaction marker: the end of producer ProducerID's
// transaction on a partition, carrying Epoch.
type Marker struct {
	TP         groups.TP
	ProducerID int64
	Epoch      int16
	Commit     bool
}

// MarkerWriter writes transaction markers at partition leaders and
// returns one error per marker (nil: written); it is called concurrently,
// once per completing transaction. A partition that no longer exists,
// or that has a newer epoch of the producer (the marker is obsolete),
// counts as written.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, ms []Marker) []error
}

// ProducerIDs hands out producer ids (the metadata service's allocator).
type ProducerIDs interface {
	NewProducerID(ctx context.Context) (int64, error)
}

// Settings are the transaction coordinator's limits and timings.
type Settings struct {
	// MaxTimeout bounds a producer's transaction timeout (Kafka's
	// transaction.max.timeout.ms, 15 minutes).
	MaxTimeout time.Duration
	// CheckInterval is how often the leader aborts timed-out transactions
	// and resumes the completion of prepared ones (after a leader change).
	CheckInterval time.Duration
	// MarkerTimeout bounds one marker write; a failed write is retried
	// with backoff until the transaction completes or leadership moves.
	MarkerTimeout time.Duration
}

// Counts are the coordinator's counters since this process started.
type Counts struct {
	Committed, Aborted atomic.Int64 // transactions completed so
	TimedOut           atomic.Int64 // aborted by the coordinator at their timeout
	MarkerFailures     atomic.Int64 // marker writes that failed and were retried
}

// Counts returns the coordinator's counters.
func (x *Coordinator) Counts() *Counts { return &x.counts }

// DefaultSettings returns the defaults.
func DefaultSettings() Settings {
	return Settings{MaxTimeout: 15 * time.Minute, CheckInterval: time.Second, MarkerTimeout: 10 * time.Second}
}

// Validate checks ranges.
func (s Settings) Validate() error {
	switch {
	case s.MaxTimeout <= 0 || s.MaxTimeout > time.Duration(math.MaxInt32)*time.Millisecond:
		return fmt.Errorf("flag -transaction-max-timeout: %v must be positive and fit 32-bit milliseconds", s.MaxTimeout)
	case s.CheckInterval <= 0 || s.MarkerTimeout <= 0:
		return fmt.Errorf("transaction check interval %v and marker timeout %v must be positive", s.CheckInterval, s.MarkerTimeout)
	}
	return nil
}

// Coordinator is the transaction coordinator. Its methods answer the API on
// the leader; Start runs the loop that aborts timed-out transactions and
// completes prepared ones.
type Coordinator struct {
	co      coordinator.Plane
	markers MarkerWriter
	ids     ProducerIDs
	s       Settings

	counts Counts

	locks      keylock.Locks // per transactional id
	mu         sync.Mutex
	completing map[string]*completion // ids whose markers a goroutine writes
	// handed holds, by id, the state version whose markers were written
	// and left to a waiting request to complete: until that request's
	// entry is decided, the check loop must not write them again (a marker
	// written again after the next transaction's records would end them).
	handed  map[string]uint64
	stopped bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

// New returns the transaction coordinator of co's replica (the group
// coordinator, *coordinator.Coordinator).
func New(co coordinator.Plane, markers MarkerWriter, ids ProducerIDs, s Settings) *Coordinator {
	return &Coordinator{co: co, markers: markers, ids: ids, s: s, completing: map[string]*completion{}, handed: map[string]uint64{},
		stop: make(chan struct{})}
}

// completion is a goroutine completing a prepared transaction.
type completion struct {
	done chan struct{} // closed when the goroutine ends
	// Guarded by Coordinator.mu: the requests waiting to begin the
	// producer's next transaction, and the state version whose markers the
	// goroutine wrote and left for one of them to complete (0: none).
	waiters int
	marked  uint64
}

// Start runs the check loop until Stop.
func (x *Coordinator) Start() {
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		t := time.NewTicker(x.s.CheckInterval)
		defer t.Stop()
		for {
			select {
			case <-x.stop:
				return
			case <-t.C:
				x.check()
			}
		}
	}()
}

// Stop ends the loop and the completions in progress, and waits for them.
func (x *Coordinator) Stop() {
	x.mu.Lock()
	already := x.stopped
	x.stopped = true
	x.mu.Unlock()
	if !already {
		close(x.stop)
	}
	x.wg.Wait()
}

// lock takes a transactional id's lock.
func (x *Coordinator) lock(id string) (unlock func()) { return x.locks.Lock(id) }

// begin checks the request's preconditions and returns the id's state.
func (x *Coordinator) begin(id string) (*fsm.Txn, error) {
	if err := txns.ValidateID(id); err != nil {
		return nil, protocol.InvalidRequest.Err("%v", err)
	}
	if !x.co.Ready() {
		return nil, coordinator.ErrNotLeader
	}
	t, _, err := x.co.FSM().Txn(id)
	return t, err
}

// put proposes t as the id's next state after version expect.
func (x *Coordinator) put(ctx context.Context, expect uint64, t *fsm.Txn, commit bool) error {
	t.UpdateMs = x.co.Now().UnixMilli()
	return x.co.Propose(ctx, fsm.Command{Type: fsm.TypePutTxn, PutTxn: &fsm.PutTxn{ExpectVersion: expect, Txn: t, Commit: commit}})
}

// checkProducer is the fencing rule of a session's requests.
func checkProducer(t *fsm.Txn, id string, p txns.Producer) error {
	if t == nil {
		return protocol.InvalidProducerIDMapping.Err("producer %d is not transactional id %s's", p.ProducerID, id)
	}
	pid, epoch := t.Session()
	switch {
	case p.ProducerID != pid:
		return protocol.InvalidProducerIDMapping.Err("producer %d is not transactional id %s's", p.ProducerID, id)
	case p.ProducerEpoch != epoch:
		return protocol.ProducerFenced.Err("transactional id %s is at epoch %d; epoch %d was fenced", id, epoch, p.ProducerEpoch)
	}
	return nil
}

// session is t's session as the API answers it.
func session(t *fsm.Txn) txns.Producer {
	pid, epoch := t.Session()
	return txns.Producer{ProducerID: pid, ProducerEpoch: epoch}
}

// bump raises n's epoch for the end of its transaction (the markers carry
// the result). At the largest epoch the session moves on to a new producer
// id (NextProducerID), as KIP-890 does, so that the markers still carry an
// epoch above every write of the transaction.
func (x *Coordinator) bump(ctx context.Context, n *fsm.Txn) error {
	if n.Epoch < math.MaxInt16-1 {
		n.Epoch++
		return nil
	}
	pid, err := x.ids.NewProducerID(ctx)
	if err != nil {
		return protocol.CoordinatorNotAvailable.Err("allocating a producer id: %v", err)
	}
	n.Epoch, n.NextProducerID = math.MaxInt16, pid
	return nil
}

// moveOn makes n, a state after its transaction's markers, the next
// producer id's when the epoch ran out.
func moveOn(n *fsm.Txn) {
	if n.NextProducerID > 0 {
		n.ProducerID, n.Epoch, n.NextProducerID = n.NextProducerID, 0, 0
	}
}

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

// complete starts writing the markers of a prepared transaction unless a
// goroutine does already.
func (x *Coordinator) complete(id string) { x.completion(id, false) }

// completion returns the goroutine completing id's prepared transaction,
// starting one unless one runs that has not handed its completion over;
// with wait it registers the caller as a request waiting for it
// (leaveCompletion ends the wait). Nil once the coordinator stops.
func (x *Coordinator) completion(id string, wait bool) *completion {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.stopped {
		return nil
	}
	c, ok := x.completing[id]
	if !ok {
		c = &completion{done: make(chan struct{})}
		x.completing[id] = c
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			defer func() {
				x.mu.Lock()
				if x.completing[id] == c {
					delete(x.completing, id)
				}
				x.mu.Unlock()
				close(c.done)
			}()
			x.completeLoop(id, c)
		}()
	}
	if wait {
		c.waiters++
	}
	return c
}

// completeLoop writes the markers of a prepared transaction, retrying until
// every partition has its marker, then proposes the Complete state (with
// the offsets, for a commit), unless a request waits to begin the
// producer's next transaction: that request's entry completes this one
// (join). It gives up when this replica stops coordinating: the next
// leader completes the transaction.
func (x *Coordinator) completeLoop(id string, c *completion) {
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-x.stop:
			return
		default:
		}
		if !x.co.Ready() {
			return
		}
		t, _, err := x.co.FSM().Txn(id)
		if err != nil || t == nil || !t.Preparing() {
			return
		}
		err = x.writeMarkers(t)
		if err == nil {
			x.mu.Lock()
			if c.waiters > 0 {
				// Handed over: the waiting request completes it (or hands
				// it back with restartCompletion).
				c.marked = t.Version
				x.handed[id] = t.Version
				delete(x.completing, id)
				x.mu.Unlock()
				return
			}
			x.mu.Unlock()
			if err = x.completeEntry(id, t); err == nil {
				return
			}
		}
		x.co.Logger().Warn("completing a transaction failed; retrying", "transactional_id", id, "state", t.State, "err", err, "backoff", backoff)
		select {
		case <-x.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// completeEntry proposes the Complete state of t, whose markers are
// written, unless the id's state moved on meanwhile (a request completed
// it).
func (x *Coordinator) completeEntry(id string, t *fsm.Txn) error {
	ctx, cancel := context.WithTimeout(context.Background(), x.s.MarkerTimeout)
	defer cancel()
	defer x.lock(id)()
	if cur, _, err := x.co.FSM().Txn(id); err != nil || cur == nil || cur.Version != t.Version {
		return err
	}
	done := t.Clone()
	commit := t.State == fsm.TxnPrepareCommit
	done.State = fsm.TxnCompleteAbort
	if commit {
		done.State = fsm.TxnCompleteCommit
	}
	done.Partitions, done.Groups, done.StartMs = nil, nil, 0
	if !commit {
		done.Offsets = nil
	}
	moveOn(done)
	if err := x.put(ctx, t.Version, done, commit); err != nil {
		return err
	}
	x.completed(done, commit)
	return nil
}

// completed counts and logs a transaction's completion.
func (x *Coordinator) completed(t *fsm.Txn, commit bool) {
	if commit {
		x.counts.Committed.Add(1)
	} else {
		x.counts.Aborted.Add(1)
	}
	x.co.Logger().Debug("transaction completed", "transactional_id", t.ID, "committed", commit, "producer_id", t.ProducerID, "epoch", t.Epoch)
}

// writeMarkers writes t's marker to each of its partitions (the writer
// sends the markers of the transactions that end together in one request
// per storage node).
func (x *Coordinator) writeMarkers(t *fsm.Txn) error {
	commit := t.State == fsm.TxnPrepareCommit
	ms := make([]Marker, len(t.Partitions))
	for i, tp := range t.Partitions {
		ms[i] = Marker{TP: tp, ProducerID: t.ProducerID, Epoch: t.Epoch, Commit: commit}
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.s.MarkerTimeout)
	defer cancel()
	errs := x.markers.WriteMarkers(ctx, ms)
	for i := range errs {
		if errs[i] != nil {
			x.counts.MarkerFailures.Add(1)
			errs[i] = fmt.Errorf("%s: %w", ms[i].TP, errs[i])
		}
	}
	return errors.Join(errs...)
}

// check aborts the transactions open longer than their timeout and resumes
// the completion of prepared ones (a new leader finds them so).
func (x *Coordinator) check() {
	if !x.co.Ready() {
		return
	}
	all, err := x.co.FSM().Txns()
	if err != nil {
		x.co.Logger().Warn("reading the transactions failed", "err", err)
		return
	}
	now := x.co.Now().UnixMilli()
	for _, t := range all {
		switch {
		case t.Preparing() && !x.isHanded(t.ID, t.Version):
			x.complete(t.ID)
		case t.State == fsm.TxnOngoing && now-t.StartMs > int64(t.TimeoutMs):
			x.abortExpired(t.ID, now)
		}
	}
}

// abortExpired aborts a transaction past its timeout, fencing its producer.
func (x *Coordinator) abortExpired(id string, now int64) {
	defer x.lock(id)()
	t, _, err := x.co.FSM().Txn(id)
	if err != nil || t == nil || t.State != fsm.TxnOngoing || now-t.StartMs <= int64(t.TimeoutMs) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.s.MarkerTimeout)
	defer cancel()
	if err := x.prepare(ctx, t, false, true, false); err != nil {
		x.co.Logger().Warn("aborting a timed-out transaction failed", "transactional_id", id, "err", err)
		return
	}
	x.counts.TimedOut.Add(1)
	x.co.Logger().Info("transaction timed out and aborted", "transactional_id", id, "timeout_ms", t.TimeoutMs)
}

// Describe returns a transactional id's state.
func (x *Coordinator) Describe(id string) (*txns.Description, error) {
	t, ok, err := x.co.FSM().Txn(id)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, protocol.TransactionalIDNotFound.Err("no transactional id %q", id)
	}
	return describeTxn(t), nil
}

// List returns the transactional ids in the given states (all when none).
func (x *Coordinator) List(states []string) ([]txns.Description, error) {
	all, err := x.co.FSM().Txns()
	if err != nil {
		return nil, err
	}
	out := []txns.Description{}
	for _, t := range all {
		if len(states) == 0 || slices.Contains(states, t.State) {
			out = append(out, *describeTxn(t))
		}
	}
	return out, nil
}

func describeTxn(t *fsm.Txn) *txns.Description {
	d := &txns.Description{ID: t.ID, State: t.State, ProducerID: t.ProducerID, Epoch: t.Epoch, TimeoutMs: t.TimeoutMs,
		StartMs: -1, Partitions: slices.Clone(t.Partitions), Groups: slices.Clone(t.Groups)}
	if d.Partitions == nil {
		d.Partitions = []groups.TP{}
	}
	if t.State == fsm.TxnOngoing || t.Preparing() {
		d.StartMs = t.StartMs
	}
	return d
}
