package fakecluster

import (
	"bytes"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// Appended is one produce request a Storage node accepted.
type Appended struct {
	Req        protocol.ProduceRequest
	BaseOffset int64
	Records    []record.Record
	// The first batch's idempotent producer fields (record.NoProducerID
	// and -1s for a batch without).
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
}

// partitionLog is one partition's batches on a fake node.
type partitionLog struct {
	start   int64    // log start offset
	end     int64    // log end offset (and high watermark)
	batches [][]byte // stamped with their base offsets, in order
	// seen maps an idempotent batch's identity to its first answer.
	seen map[producerSeq]protocol.ProduceResponse
}

type producerSeq struct {
	id    int64
	epoch int16
	seq   int32
}

// logLocked returns the partition's log, creating it empty. s.mu must be held.
func (s *Storage) logLocked(topic string, partition int32) *partitionLog {
	k := key(topic, partition)
	l := s.logs[k]
	if l == nil {
		l = &partitionLog{seen: map[producerSeq]protocol.ProduceResponse{}}
		s.logs[k] = l
	}
	return l
}

// SetLogStart moves a partition's log start offset, as retention would:
// offsets below it are out of range.
func (s *Storage) SetLogStart(topic string, partition int32, start int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logLocked(topic, partition).start = start
}

// LogEnd returns a partition's log end offset.
func (s *Storage) LogEnd(topic string, partition int32) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logLocked(topic, partition).end
}

// Append writes recs to a partition's log as one batch, as an accepted
// produce would, and returns its base offset; the records' own offsets are
// ignored.
func (s *Storage) Append(topic string, partition int32, recs ...record.Record) (int64, error) {
	b := record.NewBuilder(record.CodecNone)
	for _, r := range recs {
		b.Append(r)
	}
	batch, err := b.Build()
	if err != nil {
		return 0, err
	}
	return s.AppendBatch(topic, partition, batch)
}

// AppendBatch writes a batch to a partition's log as it is but for its base
// offset (the log's end), so that a test may serve a damaged one, and
// returns the base offset.
func (s *Storage) AppendBatch(topic string, partition int32, batch []byte) (int64, error) {
	h, err := record.ParseHeader(batch)
	if err != nil {
		return 0, err
	}
	batch = bytes.Clone(batch)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logLocked(topic, partition)
	base := l.end
	record.SetBaseOffset(batch, base)
	l.batches = append(l.batches, batch)
	l.end += int64(h.LastOffsetDelta) + 1
	close(s.changed)
	s.changed = make(chan struct{})
	return base, nil
}

// produce appends the request's batches. lose reports that the answer must
// be lost (the connection closed instead).
func (s *Storage) produce(dec *protocol.Decoder) (resp protocol.ProduceResponse, lose bool, err error) {
	var req protocol.ProduceRequest
	if err := dec.Body(&req); err != nil {
		return resp, false, protocol.MalformedFrame.Err("%v", err)
	}
	k := key(req.Topic, req.Partition)
	s.mu.Lock()
	s.attempts[k]++
	attempt := s.attempts[k]
	s.mu.Unlock()
	payload := append([]byte(nil), dec.Payload()...)
	var heads []record.Header
	var count int64
	for rest := payload; len(rest) > 0; {
		h, err := record.Validate(rest)
		if err != nil {
			return resp, false, protocol.CorruptRecord.Err("%v", err)
		}
		heads = append(heads, h)
		count += int64(h.RecordCount)
		rest = rest[h.Size():]
	}
	if count == 0 {
		return resp, false, protocol.InvalidRequest.Err("no records")
	}
	recs, err := decodeRecords(payload)
	if err != nil {
		return resp, false, protocol.CorruptRecord.Err("%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reject != nil {
		if err := s.reject(&req, attempt); err != nil {
			return resp, false, codeErr(err)
		}
	}
	l := s.logLocked(req.Topic, req.Partition)
	id := producerSeq{heads[0].ProducerID, heads[0].ProducerEpoch, heads[0].BaseSequence}
	if first, ok := l.seen[id]; ok && id.id >= 0 {
		return first, false, nil // a duplicate: its first answer
	}
	resp = protocol.ProduceResponse{BaseOffset: l.end, LastOffset: l.end + count - 1, LogAppendTime: -1, LogStartOffset: l.start}
	for rest, base := payload, l.end; len(rest) > 0; {
		h, _ := record.ParseHeader(rest)
		b := rest[:h.Size()]
		record.SetBaseOffset(b, base)
		l.batches = append(l.batches, b)
		base += int64(h.LastOffsetDelta) + 1
		rest = rest[h.Size():]
	}
	l.end += count
	if id.id >= 0 {
		l.seen[id] = resp
	}
	s.appended[k] = append(s.appended[k], Appended{Req: req, BaseOffset: resp.BaseOffset, Records: recs,
		ProducerID: id.id, ProducerEpoch: id.epoch, BaseSequence: id.seq})
	close(s.changed)
	s.changed = make(chan struct{})
	lose = s.loseAnswer != nil && s.loseAnswer(&req, attempt)
	return resp, lose, nil
}

func decodeRecords(payload []byte) ([]record.Record, error) {
	var recs []record.Record
	it := record.NewIterator(payload)
	for it.Next() {
		r := it.Record()
		recs = append(recs, record.Record{Timestamp: r.Timestamp, Key: clone(r.Key), Value: clone(r.Value), Headers: cloneHeaders(r.Headers)})
	}
	return recs, it.Err()
}

// fetch answers whole batches from req.Offset on, waiting up to MaxWaitMs for
// data when there is none.
func (s *Storage) fetch(req *protocol.FetchRequest) (protocol.FetchResponse, []byte, error) {
	deadline := time.Now().Add(time.Duration(req.MaxWaitMs) * time.Millisecond)
	k := key(req.Topic, req.Partition)
	s.mu.Lock()
	s.fetches[k]++
	if s.rejectFetch != nil {
		if err := s.rejectFetch(req, s.fetches[k]); err != nil {
			s.mu.Unlock()
			return protocol.FetchResponse{}, nil, codeErr(err)
		}
	}
	for {
		l := s.logLocked(req.Topic, req.Partition)
		resp := protocol.FetchResponse{HighWatermark: l.end, LastStableOffset: l.end, LogStartOffset: l.start, LogEndOffset: l.end}
		if req.Offset < l.start || req.Offset > l.end {
			s.mu.Unlock()
			return resp, nil, protocol.OffsetOutOfRange.Err("offset %d, the log holds [%d, %d)", req.Offset, l.start, l.end)
		}
		left := time.Until(deadline)
		if req.Offset < l.end || left <= 0 {
			payload := l.readLocked(req.Offset, int(req.MaxBytes))
			s.mu.Unlock()
			return resp, payload, nil
		}
		changed := s.changed
		s.mu.Unlock()
		t := time.NewTimer(left)
		select {
		case <-changed:
		case <-t.C:
		case <-s.done:
			deadline = time.Now() // closing: answer with what there is
		}
		t.Stop()
		s.mu.Lock()
	}
}

// readLocked copies the batches holding offset and after: the first one
// whole, then those that fit in maxBytes.
func (l *partitionLog) readLocked(offset int64, maxBytes int) []byte {
	var out []byte
	for _, b := range l.batches {
		h, _ := record.ParseHeader(b)
		if h.LastOffset() < offset {
			continue
		}
		if len(out) > 0 && len(out)+len(b) > maxBytes {
			break
		}
		out = append(out, b...)
	}
	return out
}

// listOffsets answers the earliest (log start) or latest (high watermark)
// offset.
func (s *Storage) listOffsets(dec *protocol.Decoder) (protocol.ListOffsetsResponse, error) {
	var req protocol.ListOffsetsRequest
	if err := dec.Body(&req); err != nil {
		return protocol.ListOffsetsResponse{}, protocol.MalformedFrame.Err("%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logLocked(req.Topic, req.Partition)
	switch req.Timestamp {
	case protocol.TimestampEarliest:
		return protocol.ListOffsetsResponse{Offset: l.start, Timestamp: -1}, nil
	case protocol.TimestampLatest:
		return protocol.ListOffsetsResponse{Offset: l.end, Timestamp: -1}, nil
	}
	return protocol.ListOffsetsResponse{}, protocol.InvalidTimestamp.Err("fake storage lists only earliest and latest")
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func cloneHeaders(hs []record.RecordHeader) []record.RecordHeader {
	var out []record.RecordHeader
	for _, h := range hs {
		out = append(out, record.RecordHeader{Key: h.Key, Value: clone(h.Value)})
	}
	return out
}
