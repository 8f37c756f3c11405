package log

import (
	"fmt"
	"math"

	"github.com/sluicemq/sluice/libs/record"
)

// Idempotent producers (Kafka's KIP-98, without transactions).
//
// A batch whose header carries a producer id (>= 0) comes from an idempotent
// producer: with the id it carries the producer's epoch and the sequence
// number of its first record; its last record's sequence is
// record.Header.LastSequence (first + lastOffsetDelta, which is
// recordCount-1 for every batch a leader accepts, wrapping from MaxInt32 to
// 0). A batch with producer id record.NoProducerID (-1), and control
// batches, skip everything here.
//
// For each producer id the log remembers its epoch and its last
// ProducerWindow batches (sequence range and offset range). That state is
// derived from the batch headers in the log, by one rule (producerEntry.apply)
// used by the leader after it accepted a batch, by a follower for the batches
// it replicates (AppendReplica), and by recovery and truncation when they
// rebuild it from the log. A follower therefore holds the same state as its
// leader for the same log, and after a leadership change still recognizes a
// producer's retry of a batch the old leader appended.
//
// The leader (Append) checks every idempotent batch before writing anything,
// under Log.appendMu, so the check and the append are atomic with respect to
// every other append of the partition (checkBatch has the rules):
//
//   - an epoch below the producer's is ErrInvalidProducerEpoch;
//   - an epoch above it starts a new epoch, whose first batch must have
//     sequence 0 (ErrOutOfOrderSequence otherwise);
//   - a batch whose (first, last) sequence equals one of the remembered batches
//     is a duplicate (a producer's retry after a lost answer): nothing is
//     appended and Append answers the original offsets (AppendInfo.Duplicate);
//   - otherwise the first sequence must follow the last remembered one;
//     a batch wholly before the remembered window is an older duplicate the
//     log can no longer place: ErrDuplicateSequence (Kafka's
//     DUPLICATE_SEQUENCE_NUMBER, which its producers treat as "already
//     written, offset unknown"); any other gap or overlap is
//     ErrOutOfOrderSequence;
//   - a producer id the log does not know may start at any sequence. Its
//     state may have been removed with the segments retention deleted
//     (EnforceRetention drops producers whose last batch is below the new log
//     start offset), and refusing its next batch would fail a healthy
//     producer, so the leader accepts it as Kafka 2.5+ does for unknown
//     producers (KIP-360) instead of answering UNKNOWN_PRODUCER_ID.
//
// An append of several batches is checked batch by batch in order, each
// against the state as the earlier batches of the append would leave it. A
// duplicate is answered only when every batch of the append is one; an
// append mixing duplicates and new batches is refused whole with
// ErrMixedDuplicates (producers send one batch per partition per request,
// as Kafka requires of RecordBatch v2 produce requests).
//
// Persistence is in producersnap.go. Producer ids are never expired by age
// (Kafka's producer.id.expiration.ms); a producer leaves the state only when
// retention deletes its last batch.

// ProducerWindow is how many of a producer's latest batches the log
// remembers for duplicate detection (Kafka's 5, which is also the most
// in-flight requests an idempotent producer may have).
const ProducerWindow = 5

// ProducerBatch is one remembered batch of an idempotent producer.
type ProducerBatch struct {
	FirstSeq    int32 // sequence of the first record
	LastSeq     int32 // sequence of the last record
	FirstOffset int64 // offset of the first record
	LastOffset  int64 // offset of the last record
}

// ProducerEntry is what the log remembers of one producer: its epoch and its
// latest batches, oldest first (at most ProducerWindow).
type ProducerEntry struct {
	Epoch   int16
	Batches []ProducerBatch
}

// producerEntry is the in-memory form of a ProducerEntry: a fixed ring, so
// recording a batch never allocates.
type producerEntry struct {
	epoch int16
	n     uint8 // batches held: 1..ProducerWindow, or 0 after a marker's bump
	head  uint8 // ring slot of the oldest batch
	// bumpedAt is, while n is 0, the offset of the transaction marker that
	// raised the epoch (KIP-890: a marker ends a transaction with the
	// producer's next epoch), and -1 in an entry not yet used.
	bumpedAt int64
	ring     [ProducerWindow]ProducerBatch
}

// newProducerEntry is an entry not yet used.
func newProducerEntry() *producerEntry { return &producerEntry{bumpedAt: -1} }

// used reports whether the entry holds an epoch: a batch or a marker's bump.
func (e *producerEntry) used() bool { return e.n > 0 || e.bumpedAt >= 0 }

// lastOffset is the offset of the entry's newest batch, or of the marker
// that bumped its epoch.
func (e *producerEntry) lastOffset() int64 {
	if e.n == 0 {
		return e.bumpedAt
	}
	return e.newest().LastOffset
}

// bump records a transaction marker of the producer at epoch, written at
// offset at: a higher epoch starts an empty window that the next batch must
// start at sequence 0, and fences every older epoch.
func (e *producerEntry) bump(epoch int16, at int64) {
	if !e.used() || epoch > e.epoch {
		*e = producerEntry{epoch: epoch, bumpedAt: at}
	}
}

// at returns the i-th oldest batch.
func (e *producerEntry) at(i int) *ProducerBatch {
	return &e.ring[(int(e.head)+i)%ProducerWindow]
}

func (e *producerEntry) newest() *ProducerBatch { return e.at(int(e.n) - 1) }

// push records b as the newest batch, forgetting the oldest when full.
func (e *producerEntry) push(b ProducerBatch) {
	if int(e.n) < ProducerWindow {
		*e.at(int(e.n)) = b
		e.n++
		return
	}
	e.ring[e.head] = b
	e.head = (e.head + 1) % ProducerWindow
}

// find returns the remembered batch with exactly these sequences.
func (e *producerEntry) find(first, last int32) (ProducerBatch, bool) {
	for i := range int(e.n) {
		if b := e.at(i); b.FirstSeq == first && b.LastSeq == last {
			return *b, true
		}
	}
	return ProducerBatch{}, false
}

// apply records a batch appended to the log. It is the one state rule for
// leader, follower and recovery: a new epoch (or a new entry) starts an empty
// window; a batch of an older epoch leaves the entry alone (a leader never
// accepts one for a known producer, so it can only come from a log written
// while this producer was unknown to its leader).
func (e *producerEntry) apply(epoch int16, b ProducerBatch) {
	switch {
	case !e.used() || epoch > e.epoch:
		*e = producerEntry{epoch: epoch, bumpedAt: -1}
	case epoch < e.epoch:
		return
	}
	e.push(b)
}

// export copies the entry out.
func (e *producerEntry) export() ProducerEntry {
	out := ProducerEntry{Epoch: e.epoch, Batches: make([]ProducerBatch, e.n)}
	for i := range out.Batches {
		out.Batches[i] = *e.at(i)
	}
	return out
}

// producerState maps producer ids to their entries. Entries are pointers so
// the steady-state append updates them in place without a map write. txns
// is the transaction state derived from the same batches (txn.go).
type producerState struct {
	m    map[int64]*producerEntry
	txns txnState
}

func newProducerState() producerState { return producerState{m: map[int64]*producerEntry{}} }

// apply records one appended batch (see producerEntry.apply).
func (s *producerState) apply(pid int64, epoch int16, b ProducerBatch) {
	e := s.m[pid]
	if e == nil {
		e = newProducerEntry()
		s.m[pid] = e
	}
	e.apply(epoch, b)
}

// applyMarker records a transaction marker of the control batch h (its
// epoch fences older ones, see producerEntry.bump).
func (s *producerState) applyMarker(h *record.Header) {
	if h.ProducerID < 0 || h.ProducerEpoch < 0 {
		return
	}
	e := s.m[h.ProducerID]
	if e == nil {
		e = newProducerEntry()
		s.m[h.ProducerID] = e
	}
	e.bump(h.ProducerEpoch, h.BaseOffset)
}

// applyHeader records the batch of a header read from the log, if it is an
// idempotent producer's, and its part in a transaction; m is the marker of
// a control batch.
func (s *producerState) applyHeader(h *record.Header, m *record.Marker) {
	if idempotent(h) {
		s.apply(h.ProducerID, h.ProducerEpoch, batchOf(h))
	}
	if m != nil {
		s.applyMarker(h)
	}
	s.txns.apply(h, m)
}

// evictBelow forgets every producer whose newest batch ends below start (its
// batches are all gone with the deleted segments), and the aborted
// transactions whose marker is below start. It returns how many producers.
func (s *producerState) evictBelow(start int64) int {
	s.txns.evictBelow(start)
	n := 0
	for pid, e := range s.m {
		if e.lastOffset() < start {
			delete(s.m, pid)
			n++
		}
	}
	return n
}

// idempotent reports whether a batch takes part in producer checks: it has a
// producer id, an epoch and a sequence, and is not a control batch.
func idempotent(h *record.Header) bool {
	return h.ProducerID >= 0 && h.ProducerEpoch >= 0 && h.BaseSequence >= 0 && !h.IsControl()
}

// batchOf is the remembered form of a batch whose offsets are in h.
func batchOf(h *record.Header) ProducerBatch {
	return ProducerBatch{FirstSeq: h.BaseSequence, LastSeq: h.LastSequence(), FirstOffset: h.BaseOffset, LastOffset: h.LastOffset()}
}

// checkProducerFields refuses, for a leader append, a batch that names a
// producer but lacks a valid epoch or sequence (Kafka's INVALID_RECORD).
func checkProducerFields(h *record.Header) error {
	if h.ProducerID >= 0 && !h.IsControl() && (h.ProducerEpoch < 0 || h.BaseSequence < 0) {
		return fmt.Errorf("%w: producer %d with epoch %d and base sequence %d", ErrInvalidProducerBatch,
			h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	return nil
}

// checkBatch is the leader's decision for one batch (epoch, sequences first
// to last) of a producer whose entry is e, nil when unknown. It returns the
// original batch when this one is a duplicate, an error wrapping
// ErrInvalidProducerEpoch, ErrOutOfOrderSequence or ErrDuplicateSequence when
// it must be refused, and neither when it may be appended. It is pure.
func checkBatch(e *producerEntry, epoch int16, first, last int32) (orig ProducerBatch, dup bool, err error) {
	if e == nil || !e.used() {
		return ProducerBatch{}, false, nil // unknown producer: any sequence starts it
	}
	switch {
	case epoch < e.epoch:
		return ProducerBatch{}, false, fmt.Errorf("%w: epoch %d, the producer has epoch %d", ErrInvalidProducerEpoch, epoch, e.epoch)
	case epoch > e.epoch || e.n == 0:
		if first != 0 {
			return ProducerBatch{}, false, fmt.Errorf("%w: epoch %d starts at sequence %d, want 0", ErrOutOfOrderSequence, epoch, first)
		}
		return ProducerBatch{}, false, nil
	}
	if b, ok := e.find(first, last); ok {
		return b, true, nil
	}
	newest := e.newest().LastSeq
	if first == record.IncrementSequence(newest, 1) {
		return ProducerBatch{}, false, nil
	}
	if oldest := e.at(0).FirstSeq; seqBefore(last, oldest) {
		return ProducerBatch{}, false, fmt.Errorf("%w: sequences %d..%d are older than the %d batches remembered (%d..%d)",
			ErrDuplicateSequence, first, last, e.n, oldest, newest)
	}
	return ProducerBatch{}, false, fmt.Errorf("%w: sequences %d..%d, expected %d next", ErrOutOfOrderSequence,
		first, last, record.IncrementSequence(newest, 1))
}

// seqBefore reports whether sequence a comes before b in the wrapping
// sequence space [0, MaxInt32]: b is less than half the space ahead of a.
func seqBefore(a, b int32) bool {
	const space = int64(math.MaxInt32) + 1
	d := (int64(b) - int64(a) + space) % space
	return d > 0 && d < space/2
}

// pendingTxn is a batch of the append in progress that may take part in a
// transaction: its header (offsets as assigned) and, for a control batch,
// its marker.
type pendingTxn struct {
	h record.Header
	m *record.Marker
}

// pendingBatch is an idempotent batch of the append in progress.
type pendingBatch struct {
	pid   int64
	epoch int16
	b     ProducerBatch // for a duplicate, the original batch
	dup   bool
}

// collectProducers fills l.pending with the idempotent batches of an append
// and their offsets (as leader assigned consecutively from base, as follower
// the stamped ones), and l.pendingTxn with its transactional and control
// batches, reading the marker of each control batch. A control batch whose
// record is not a marker is an error wrapping record.ErrCorrupt. appendMu
// must be held.
func (l *Log) collectProducers(b []byte, base int64, replica bool) error {
	out, txns, off := l.pending[:0], l.pendingTxn[:0], base
	for pos := 0; pos < len(b); {
		h, err := record.ParseHeader(b[pos:])
		if err != nil { // validated already; stamp reports a change
			break
		}
		if !replica {
			h.BaseOffset = off
		}
		if idempotent(&h) {
			out = append(out, pendingBatch{pid: h.ProducerID, epoch: h.ProducerEpoch, b: batchOf(&h)})
		}
		if h.IsTransactional() || h.IsControl() || h.ProducerID >= 0 && len(l.producers.txns.open) > 0 {
			m, err := markerOf(b[pos:pos+h.Size()], &h)
			if err != nil {
				return fmt.Errorf("batch at byte %d: %w", pos, err)
			}
			txns = append(txns, pendingTxn{h: h, m: m})
		}
		off = h.LastOffset() + 1
		pos += h.Size()
	}
	l.pending, l.pendingTxn = out, txns
	return nil
}

// entryWith returns pid's entry as the earlier batches of the append leave
// it: the stored entry itself when they hold none of pid's (no copy), or a
// copy in into with them applied. It returns nil for an unknown producer.
// appendMu must be held.
func (s *producerState) entryWith(pid int64, earlier []pendingBatch, into *producerEntry) *producerEntry {
	e := s.m[pid]
	mine := false
	for i := range earlier {
		if earlier[i].pid == pid && !earlier[i].dup {
			mine = true
			break
		}
	}
	if !mine {
		return e
	}
	*into = producerEntry{bumpedAt: -1}
	if e != nil {
		*into = *e
	}
	for i := range earlier {
		if p := &earlier[i]; p.pid == pid && !p.dup {
			into.apply(p.epoch, p.b)
		}
	}
	return into
}

// checkProducers runs the leader's checks over l.pending (collectProducers)
// for an append of batches batches. It marks duplicates in l.pending and
// reports whether the whole append is a duplicate, with the original offsets.
// appendMu must be held; it allocates only to describe a refusal.
func (l *Log) checkProducers(batches int) (first, last int64, dup bool, err error) {
	dups := 0
	for i := range l.pending {
		p := &l.pending[i]
		var view producerEntry
		e := l.producers.entryWith(p.pid, l.pending[:i], &view)
		orig, isDup, err := checkBatch(e, p.epoch, p.b.FirstSeq, p.b.LastSeq)
		if err != nil {
			return 0, 0, false, fmt.Errorf("producer %d: %w", p.pid, err)
		}
		if isDup {
			p.b, p.dup = orig, true
			dups++
		}
	}
	switch {
	case dups == 0:
		return 0, 0, false, nil
	case dups < batches:
		return 0, 0, false, fmt.Errorf("%w: %d of the append's %d batches were appended before and the others are new; nothing appended",
			ErrMixedDuplicates, dups, batches)
	}
	return l.pending[0].b.FirstOffset, l.pending[len(l.pending)-1].b.LastOffset, true, nil
}

// commitProducersLocked records the append's idempotent batches in the state.
// appendMu and mu must be held (mu for writing).
func (l *Log) commitProducersLocked() {
	for i := range l.pending {
		if p := &l.pending[i]; !p.dup {
			l.producers.apply(p.pid, p.epoch, p.b)
		}
	}
	for i := range l.pendingTxn {
		if p := &l.pendingTxn[i]; p.m != nil {
			l.producers.applyMarker(&p.h)
		}
		l.producers.txns.apply(&l.pendingTxn[i].h, l.pendingTxn[i].m)
	}
}

// Producer returns what the log remembers of a producer id.
func (l *Log) Producer(pid int64) (ProducerEntry, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e := l.producers.m[pid]
	if e == nil {
		return ProducerEntry{}, false
	}
	return e.export(), true
}

// Producers returns a copy of the producer state: every known producer id
// with its epoch and latest batches.
func (l *Log) Producers() map[int64]ProducerEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make(map[int64]ProducerEntry, len(l.producers.m))
	for pid, e := range l.producers.m {
		out[pid] = e.export()
	}
	return out
}
