package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/sluicemq/sluice/libs/groups"
)

// TxnSession is the two ends of a consume-transform-produce loop (as
// franz-go's GroupTransactSession): a group Consumer and a transactional
// Producer. Each transaction holds the records sent while processing what
// Poll returned and the consumer's positions after those records; End
// commits both or aborts both, and after an abort the consumer reads the
// transaction's input again. So each input record's output is committed
// exactly once, for readers at read_committed, whatever fails:
//
//	for {
//		recs, err := s.Poll(ctx)
//		// ...
//		for _, r := range recs {
//			s.Send(ctx, transform(r), nil)
//		}
//		if _, err := s.End(ctx, true); err != nil { /* ... */ }
//	}
//
// A partition revoked or lost while a transaction is open makes it abort:
// another member reads the partition from its last committed offset. The
// commit of the offsets is fenced by the member's epoch (KIP-447), and a
// member starting on a partition waits for offsets an open transaction
// holds (the consumer reads at read_committed). Poll, Send and End are
// called from one goroutine.
type TxnSession struct {
	c *Consumer
	p *Producer

	mu      sync.Mutex
	open    bool                // a transaction is open
	start   map[groups.TP]int64 // per partition read in it, its first record's offset
	revoked bool                // a partition was revoked or lost while it was open
	sent    bool                // its offsets were sent (End is being retried)
}

// NewTxnSession starts a group consumer and a transactional producer (pc
// needs TransactionalID). The consumer's AutoCommit is turned off, and its
// IsolationLevel defaults to read_committed. cc's OnRevoked and OnLost are
// still called.
func NewTxnSession(cc ConsumerConfig, pc ProducerConfig) (*TxnSession, error) {
	if pc.TransactionalID == "" {
		return nil, fmt.Errorf("%w: a transaction session needs TransactionalID", ErrInvalidProducerConfig)
	}
	s := &TxnSession{}
	cc.AutoCommit = false
	if cc.IsolationLevel == "" {
		cc.IsolationLevel = ReadCommitted
	}
	onRevoked, onLost := cc.OnRevoked, cc.OnLost
	cc.OnRevoked = func(tps []groups.TP) {
		s.lose()
		if onRevoked != nil {
			onRevoked(tps)
		}
	}
	cc.OnLost = func(tps []groups.TP) {
		s.lose()
		if onLost != nil {
			onLost(tps)
		}
	}
	p, err := NewProducer(pc)
	if err != nil {
		return nil, err
	}
	c, err := NewConsumer(cc)
	if err != nil {
		_ = p.Close(context.Background())
		return nil, err
	}
	s.c, s.p = c, p
	return s, nil
}

// lose marks the open transaction as one that must abort.
func (s *TxnSession) lose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked = s.open
}

// Consumer returns the session's consumer.
func (s *TxnSession) Consumer() *Consumer { return s.c }

// Producer returns the session's producer.
func (s *TxnSession) Producer() *Producer { return s.p }

// Poll returns the next records (Consumer.Poll) and, when it returns some
// and no transaction is open, opens one.
func (s *TxnSession) Poll(ctx context.Context) ([]ConsumerRecord, error) {
	recs, err := s.c.Poll(ctx)
	if len(recs) == 0 {
		return recs, err
	}
	s.mu.Lock()
	open := s.open
	s.mu.Unlock()
	if !open {
		if err := s.p.BeginTxn(ctx); err != nil {
			// The records are read again: the transaction that would have
			// held them never began.
			s.rewind(firstOffsets(recs, nil))
			return nil, err
		}
		s.mu.Lock()
		s.open, s.start, s.revoked, s.sent = true, map[groups.TP]int64{}, false, false
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.start = firstOffsets(recs, s.start)
	s.mu.Unlock()
	return recs, err
}

// firstOffsets adds to m (made when nil) the offset of each partition's
// first record in recs, for partitions m does not hold yet.
func firstOffsets(recs []ConsumerRecord, m map[groups.TP]int64) map[groups.TP]int64 {
	if m == nil {
		m = map[groups.TP]int64{}
	}
	for _, r := range recs {
		tp := groups.TP{Topic: r.Topic, Partition: r.Partition}
		if _, ok := m[tp]; !ok {
			m[tp] = r.Offset
		}
	}
	return m
}

// Send sends a record in the open transaction (Producer.Send).
func (s *TxnSession) Send(ctx context.Context, rec ProducerRecord, cb func(RecordMetadata)) error {
	return s.p.Send(ctx, rec, cb)
}

// End ends the open transaction (none is open when the last Poll returned
// nothing; End then does nothing). With commit it sends the consumer's
// positions of the partitions read in the transaction and commits; when
// that fails, or a partition was revoked meanwhile, or without commit, it
// aborts and rewinds the consumer to the transaction's first records, which
// the next Poll returns again. committed reports the outcome; err is the
// failure that made it abort (nil after a revocation or a requested abort),
// or why the transaction could not end (ctx ended: End may be called
// again; ErrProducerFenced: the session can only be closed).
func (s *TxnSession) End(ctx context.Context, commit bool) (committed bool, err error) {
	s.mu.Lock()
	open, revoked, start, sent := s.open, s.revoked, s.start, s.sent
	s.mu.Unlock()
	if !open {
		return false, nil
	}
	offs := s.c.TxnOffsets(slices.Collect(maps.Keys(start)))
	if offs.MemberID == "" && !sent {
		// The membership was lost (OnLost runs at the next Poll): another
		// member may own the partitions already.
		revoked = true
	}
	if commit && !revoked {
		if !sent {
			err = s.p.SendOffsetsToTxn(ctx, offs)
			if err == nil {
				s.mu.Lock()
				s.sent = true // a retried End must not send them again with the old epoch
				s.mu.Unlock()
			}
		}
		if err == nil {
			err = s.p.CommitTxn(ctx)
		}
		if err == nil {
			s.ended()
			return true, nil
		}
		if ctx.Err() != nil || errors.Is(err, ErrProducerFenced) {
			return false, err
		}
	}
	if aerr := s.p.AbortTxn(ctx); aerr != nil {
		return false, errors.Join(err, aerr)
	}
	s.ended()
	s.rewind(start)
	return false, err
}

func (s *TxnSession) ended() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open, s.start, s.revoked, s.sent = false, nil, false, false
}

// rewind moves the consumer back to the given offsets of the partitions it
// still owns.
func (s *TxnSession) rewind(start map[groups.TP]int64) {
	for tp, off := range start {
		if err := s.c.Seek(tp, off); err != nil && !errors.Is(err, ErrNotOwned) {
			s.c.log.Warn("rewinding after an aborted transaction failed", "partition", tp, "offset", off, "err", err)
		}
	}
}

// Close closes the consumer (nothing is committed: the open transaction,
// if any, is aborted first) and the producer.
func (s *TxnSession) Close(ctx context.Context) error {
	var errs []error
	s.mu.Lock()
	open := s.open
	s.mu.Unlock()
	if open {
		if _, err := s.End(ctx, false); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.c.Close(ctx), s.p.Close(ctx))
	return errors.Join(errs...)
}
