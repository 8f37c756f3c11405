package client

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/txns"
)

// Transactions (ProducerConfig.TransactionalID): the producer writes
// records to several partitions and, with SendOffsetsToTxn, a consumer
// group's offsets, all committed or all aborted together. It runs
// transaction version 2 (KIP-890): the frontends add a partition to the
// transaction at its first batch, and every CommitTxn or AbortTxn raises
// the producer's epoch, so a late batch of an ended transaction is refused
// by its partition. Readers at read_committed see a transaction's records
// once it commits and never those of an aborted one.

// Errors of transactional producers.
var (
	// ErrNotTransactional is returned by the transaction methods of a
	// producer without TransactionalID.
	ErrNotTransactional = errors.New("client: the producer has no TransactionalID")
	// ErrNoTransaction is returned by Send, CommitTxn, AbortTxn and
	// SendOffsetsToTxn of a transactional producer outside a transaction.
	ErrNoTransaction = errors.New("client: no transaction is open (call BeginTxn)")
	// ErrTxnInProgress is returned by BeginTxn while a transaction is open.
	ErrTxnInProgress = errors.New("client: a transaction is already open")
	// ErrTxnEnding is returned by Send while CommitTxn or AbortTxn runs: a
	// record sent then would belong to no transaction the caller knows.
	ErrTxnEnding = errors.New("client: the transaction is being committed or aborted")
	// ErrTxnMustAbort wraps the failure that keeps the open transaction
	// from committing (a record or an offset commit failed): CommitTxn
	// returns it, and only AbortTxn may follow.
	ErrTxnMustAbort = errors.New("client: the transaction failed and must be aborted")
	// ErrProducerFenced wraps the refusal of a producer whose
	// transactional id a newer producer took over, or whose transaction
	// the coordinator aborted at its timeout (both raise the epoch): the
	// producer can only be closed.
	ErrProducerFenced = errors.New("client: producer fenced")
)

// txnState is a transactional producer's transaction.
type txnState struct {
	id    string
	coord *txns.Client
	calls sync.Mutex // one transaction method at a time

	// Guarded by Producer.mu.
	open   bool
	ending bool  // CommitTxn or AbortTxn runs: Send refuses
	wrote  bool  // a record was sent in the open transaction
	groups bool  // offsets were sent in it
	failed error // why the open transaction can only abort
	fenced error // set once: the producer can only be closed
}

// sendableLocked reports why records cannot be sent now. Producer.mu must
// be held.
func (x *txnState) sendableLocked() error {
	switch {
	case x.fenced != nil:
		return x.fenced
	case !x.open:
		return ErrNoTransaction
	case x.ending:
		return ErrTxnEnding
	}
	return nil
}

// TxnOffsets are a consumer group's offsets (each the next offset to read)
// to commit with the transaction. MemberID and MemberEpoch, when set, fence
// the commit as the group's own commits are (KIP-447): a member that lost
// the partitions cannot commit their offsets.
type TxnOffsets struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	Offsets     []groups.Offset
}

// BeginTxn opens a transaction. The first one starts the producer's
// session with the coordinator, which fences every earlier producer of
// the transactional id and aborts a transaction one of them left open.
func (p *Producer) BeginTxn(ctx context.Context) error {
	x := p.txn
	if x == nil {
		return ErrNotTransactional
	}
	x.calls.Lock()
	defer x.calls.Unlock()
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return ErrProducerClosed
	case x.fenced != nil:
		p.mu.Unlock()
		return x.fenced
	case x.open:
		p.mu.Unlock()
		return ErrTxnInProgress
	}
	need := p.ident.stale
	p.mu.Unlock()
	if need {
		var r txns.Producer
		err := p.txnCall(ctx, func() (err error) {
			r, err = x.coord.Init(ctx, x.id, txns.InitRequest{TimeoutMs: int32(p.cfg.TransactionTimeout.Milliseconds()), ProducerID: -1, ProducerEpoch: -1})
			return err
		})
		if err != nil {
			return fmt.Errorf("starting the transactional session of %s: %w", x.id, err)
		}
		p.mu.Lock()
		p.ident = producerIdentity{id: r.ProducerID, epoch: r.ProducerEpoch, gen: p.ident.gen + 1}
		p.mu.Unlock()
		p.log.Info("transactional producer session started", "transactional_id", x.id, "producer_id", r.ProducerID, "producer_epoch", r.ProducerEpoch)
	}
	p.mu.Lock()
	x.open, x.wrote, x.groups, x.failed = true, false, false, nil
	p.mu.Unlock()
	return nil
}

// SendOffsetsToTxn commits a consumer group's offsets with the open
// transaction: they become the group's committed offsets when it commits,
// and are dropped when it aborts. A failure makes the transaction abort.
func (p *Producer) SendOffsetsToTxn(ctx context.Context, o TxnOffsets) error {
	x, err := p.openTxn()
	if err != nil {
		return err
	}
	defer x.calls.Unlock()
	pr := p.txnProducer()
	err = p.txnCall(ctx, func() error {
		return x.coord.AddGroup(ctx, x.id, txns.AddGroupRequest{Producer: pr, Group: o.Group, V2: true})
	})
	if err == nil {
		err = p.txnCall(ctx, func() error {
			return x.coord.CommitOffsets(ctx, x.id, txns.CommitOffsetsRequest{Producer: pr, Group: o.Group, MemberID: o.MemberID,
				GenerationID: o.MemberEpoch, Offsets: o.Offsets})
		})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	x.groups = true // AddGroup may have succeeded: the transaction must end at the coordinator
	if err != nil {
		err = p.txnFailedLocked(fmt.Errorf("sending offsets of group %s: %w", o.Group, err))
	}
	return err
}

// CommitTxn sends every record of the transaction (Flush) and commits it.
// When a record or an offset commit failed it returns ErrTxnMustAbort, and
// the transaction stays open for AbortTxn. When ctx ends first the outcome
// may be unknown; CommitTxn may be called again.
func (p *Producer) CommitTxn(ctx context.Context) error {
	return p.endTxn(ctx, true)
}

// AbortTxn sends what the transaction still buffers (Flush) and aborts it:
// no read_committed reader sees its records, and its offsets are dropped.
func (p *Producer) AbortTxn(ctx context.Context) error {
	return p.endTxn(ctx, false)
}

func (p *Producer) endTxn(ctx context.Context, commit bool) error {
	x, err := p.openTxn()
	if err != nil {
		return err
	}
	defer x.calls.Unlock()
	p.mu.Lock()
	x.ending = true // Flush below waits for every record of the transaction
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		x.ending = false
		p.mu.Unlock()
	}()
	if err := p.Flush(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	failed, used := x.failed, x.wrote || x.groups
	if x.fenced != nil {
		p.mu.Unlock()
		return x.fenced
	}
	p.mu.Unlock()
	if commit && failed != nil {
		return failed
	}
	var next txns.Producer
	if used {
		pr := p.txnProducer()
		err := p.txnCall(ctx, func() (err error) {
			next, err = x.coord.End(ctx, x.id, txns.EndRequest{Producer: pr, Commit: commit, V2: true})
			return err
		})
		if err != nil {
			p.mu.Lock()
			defer p.mu.Unlock()
			if fenced(err) {
				return p.txnFailedLocked(err)
			}
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	x.open = false
	if used && (next.ProducerID != p.ident.id || next.ProducerEpoch != p.ident.epoch) {
		// The epoch rose (version 2): every partition's sequence restarts.
		p.ident = producerIdentity{id: next.ProducerID, epoch: next.ProducerEpoch, gen: p.ident.gen + 1}
	}
	return nil
}

// openTxn checks that a transaction is open and takes the calls lock.
func (p *Producer) openTxn() (*txnState, error) {
	x := p.txn
	if x == nil {
		return nil, ErrNotTransactional
	}
	x.calls.Lock()
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	switch {
	case x.fenced != nil:
		err = x.fenced
	case !x.open:
		err = ErrNoTransaction
	}
	if err != nil {
		x.calls.Unlock()
		return nil, err
	}
	return x, nil
}

// txnProducer returns the session's producer id and epoch.
func (p *Producer) txnProducer() txns.Producer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return txns.Producer{ProducerID: p.ident.id, ProducerEpoch: p.ident.epoch}
}

// txnFailedLocked records why the open transaction cannot commit, or that
// the producer is fenced, and returns the error to report. p.mu must be
// held.
func (p *Producer) txnFailedLocked(err error) error {
	x := p.txn
	if fenced(err) {
		if x.fenced == nil {
			x.fenced = fmt.Errorf("%w: transactional id %s: %w", ErrProducerFenced, x.id, err)
			p.log.Warn("transactional producer fenced", "transactional_id", x.id, "err", err)
		}
		return x.fenced
	}
	if x.failed == nil {
		x.failed = fmt.Errorf("%w: %w", ErrTxnMustAbort, err)
	}
	return x.failed
}

// fenced reports an error that ends the producer's session.
func fenced(err error) bool {
	switch protocol.CodeOf(err) {
	case protocol.ProducerFenced, protocol.InvalidProducerEpoch, protocol.InvalidProducerIDMapping:
		return true
	}
	return false
}

// txnCall runs a coordinator request, again after a backoff while it
// fails in a way that may clear (the previous transaction still
// completing, a coordinator election, a lost connection: each request is
// safe to repeat), until ctx ends.
func (p *Producer) txnCall(ctx context.Context, f func() error) error {
	backoff := 10 * time.Millisecond
	for {
		err := f()
		var pe *protocol.Error
		var ue *url.Error
		switch {
		case err == nil:
			return nil
		case errors.As(err, &pe) && pe.Code.Retriable():
		case !errors.As(err, &pe) && errors.As(err, &ue) && ctx.Err() == nil:
			// The coordinator could not be reached, or the connection broke.
		default:
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, p.cfg.MaxRetryBackoff)
	}
}
