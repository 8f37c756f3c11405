package log

import (
	"fmt"
	"slices"
	"sort"

	"github.com/sluicemq/sluice/libs/record"
)

// Transactions (Kafka's KIP-98): the log's side.
//
// A transactional producer writes batches with the transactional attribute
// and its producer id; its transaction coordinator ends the transaction by
// having each partition's leader append a marker (a control batch,
// record.BuildMarker) that commits or aborts it (AppendMarker). The log
// keeps, derived from the batches like the producer state and by the same
// one rule for leader, follower and recovery (txnState.apply):
//
//   - the open transactions: for each producer id with transactional
//     batches after its last marker, the offset of the first of them;
//   - the aborted transactions: for each abort marker, the producer id, the
//     first offset of the transaction it ended and the marker's offset,
//     in marker order (Kafka's aborted-transaction index).
//
// The last stable offset (LSO) is the high watermark, or the first offset
// of the oldest open transaction if that is lower: a read_committed reader
// reads below it and drops the records of the aborted transactions that
// AbortedTxns reports for the range it read. Kafka also holds the LSO below
// a transaction whose marker is not yet replicated; Sluice does not: a
// coordinator writes markers only after its decision is durable in its own
// replicated state and writes them again to a new leader, so a marker's
// outcome never changes, only its replication can lag.
//
// Both lists live with the producer state in memory (producerState.txns),
// are saved in the producer snapshots (format version 2) and rebuilt from
// them and a header scan, which reads the one record of each control batch
// it meets. Retention forgets aborted transactions whose marker it deleted.
//
// The leader's checks (under appendMu, with the producer checks): clients
// may not append control batches (ErrControlBatch; only AppendMarker writes
// them); a transactional batch needs a producer id; an idempotent producer
// with an open transaction may only append transactional batches until a
// marker ends it (ErrInvalidTxnState); a marker with an epoch below the
// producer's is refused (ErrInvalidProducerEpoch: a fenced coordinator or
// producer session).

// AbortedTxn is an aborted transaction: producer ProducerID's transactional
// records from FirstOffset up to its abort marker at LastOffset.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// txnState is the log's transaction state (see above). Used under the same
// locks as the producerState holding it.
type txnState struct {
	open    map[int64]int64 // producer id -> first offset of its open transaction
	aborted []AbortedTxn    // by LastOffset
}

// apply records one batch appended to the log: a transactional data batch
// opens its producer's transaction if none is open; a marker (m, for a
// control batch) ends it, and an abort marker records it as aborted.
func (t *txnState) apply(h *record.Header, m *record.Marker) {
	if h.ProducerID < 0 || !h.IsTransactional() {
		return
	}
	if !h.IsControl() {
		if _, ok := t.open[h.ProducerID]; !ok {
			if t.open == nil {
				t.open = map[int64]int64{}
			}
			t.open[h.ProducerID] = h.BaseOffset
		}
		return
	}
	first, ok := t.open[h.ProducerID]
	if !ok || m == nil {
		return // a marker for a partition the transaction never wrote to
	}
	delete(t.open, h.ProducerID)
	if m.Type == record.ControlAbort {
		t.aborted = append(t.aborted, AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset})
	}
}

// firstOpen is the first offset of the oldest open transaction, or limit
// when every transaction that began below limit has ended.
func (t *txnState) firstOpen(limit int64) int64 {
	for _, first := range t.open {
		limit = min(limit, first)
	}
	return limit
}

// abortedIn returns the aborted transactions with records in [from, to]: a
// marker at or after from and a first offset at or before to.
func (t *txnState) abortedIn(from, to int64) []AbortedTxn {
	i := sort.Search(len(t.aborted), func(i int) bool { return t.aborted[i].LastOffset >= from })
	var out []AbortedTxn
	for _, a := range t.aborted[i:] {
		if a.FirstOffset <= to {
			out = append(out, a)
		}
	}
	return out
}

// evictBelow forgets the aborted transactions whose marker is below start.
func (t *txnState) evictBelow(start int64) {
	i := sort.Search(len(t.aborted), func(i int) bool { return t.aborted[i].LastOffset >= start })
	if i > 0 {
		t.aborted = slices.Delete(t.aborted, 0, i)
	}
}

// clone copies the state for a check that must not change it.
func (t *txnState) clone() txnState {
	c := txnState{aborted: slices.Clone(t.aborted)}
	if len(t.open) > 0 {
		c.open = make(map[int64]int64, len(t.open))
		for pid, first := range t.open {
			c.open[pid] = first
		}
	}
	return c
}

// checkTxns runs the leader's transaction checks over l.pendingTxn
// (collectProducers) for an append from origin. appendMu must be held.
func (l *Log) checkTxns(origin appendOrigin) error {
	if origin == originReplica {
		return nil
	}
	var opened []int64 // producers whose transaction an earlier batch of the append opened
	for i := range l.pendingTxn {
		h := &l.pendingTxn[i].h
		_, open := l.producers.txns.open[h.ProducerID]
		open = open || slices.Contains(opened, h.ProducerID)
		switch {
		case origin == originCoordinator:
			if e := l.producers.m[h.ProducerID]; e != nil && h.ProducerEpoch < e.epoch {
				return fmt.Errorf("%w: marker for producer %d at epoch %d, the producer has epoch %d",
					ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
			}
		case h.IsTransactional() && h.ProducerID < 0:
			return fmt.Errorf("%w: a transactional batch without a producer id", ErrInvalidProducerBatch)
		case h.IsTransactional():
			opened = append(opened, h.ProducerID)
		case open:
			return fmt.Errorf("%w: producer %d has an open transaction and sent a batch outside it", ErrInvalidTxnState, h.ProducerID)
		}
	}
	return nil
}

// markerOf reads the marker of a control batch b; nil for a batch that is
// not one.
func markerOf(b []byte, h *record.Header) (*record.Marker, error) {
	if !h.IsControl() {
		return nil, nil
	}
	m, err := record.ParseMarker(b, h)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// LastStableOffset is the log's last stable offset: the high watermark, or
// the first offset of the oldest open transaction if lower.
func (l *Log) LastStableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.producers.txns.firstOpen(l.hw.Load())
}

// AbortedTxns returns the aborted transactions with records in [from, to],
// in marker order: what a read_committed reader of that range drops (each
// transaction's records from FirstOffset on, until its marker).
func (l *Log) AbortedTxns(from, to int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.producers.txns.abortedIn(from, to)
}

// OpenTxns returns the open transactions: producer id -> first offset.
func (l *Log) OpenTxns() map[int64]int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.producers.txns.clone().open
}

// AppendMarker appends the marker m ending producer pid's transaction at
// epoch, as the partition's leader at leaderEpoch, for the transaction
// coordinator. A marker for a producer with no open transaction is still
// appended (the coordinator writes one to every partition the transaction
// named) and changes nothing. An epoch below the producer's is refused with
// ErrInvalidProducerEpoch.
func (l *Log) AppendMarker(pid int64, epoch int16, m record.Marker, leaderEpoch int32) (AppendInfo, error) {
	return l.AppendMarkers([]MarkerAppend{{ProducerID: pid, Epoch: epoch, Marker: m}}, leaderEpoch)
}

// MarkerAppend is one marker of AppendMarkers.
type MarkerAppend struct {
	ProducerID int64
	Epoch      int16
	Marker     record.Marker
}

// AppendMarkers appends the markers ms, in order, in one append (one
// control batch each), as AppendMarker does for one. One refused marker
// (an epoch below its producer's) refuses them all: the caller appends
// them one by one to learn which.
func (l *Log) AppendMarkers(ms []MarkerAppend, leaderEpoch int32) (AppendInfo, error) {
	l.mu.RLock()
	now := l.cfg.now()
	l.mu.RUnlock()
	var b []byte
	for _, m := range ms {
		if m.ProducerID < 0 || m.Epoch < 0 {
			return AppendInfo{}, fmt.Errorf("%w: marker for producer %d epoch %d", ErrInvalidProducerBatch, m.ProducerID, m.Epoch)
		}
		one, err := record.BuildMarker(m.ProducerID, m.Epoch, m.Marker, now.UnixMilli())
		if err != nil {
			return AppendInfo{}, err
		}
		b = append(b, one...)
	}
	if len(b) == 0 {
		return AppendInfo{}, fmt.Errorf("%w: no markers", ErrInvalidProducerBatch)
	}
	return l.append(b, leaderEpoch, originCoordinator)
}
