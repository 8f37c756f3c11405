package txncoord

import (
	"context"
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
