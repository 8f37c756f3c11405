package kafkaapi

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
)

// __consumer_offsets, read from the offsets service's change log
// (groups.OffsetsLogRecord) and encoded as Kafka writes it
// (kafka.OffsetsLogBatches).

// offsetsLogPoll is how often a fetch of __consumer_offsets that found
// nothing asks again while its wait lasts.
const offsetsLogPoll = 200 * time.Millisecond

// offsetsLogRecordSize is a change-log record's encoded size, roughly: it
// turns a fetch's byte budget into a number of records to ask for.
const offsetsLogRecordSize = 100

// offsetsLogPart is one __consumer_offsets partition of a fetch.
type offsetsLogPart struct {
	partition int32
	offset    int64
	maxBytes  int32
	out       *kafka.FetchPartition
	batches   []byte
}

// readOffsetsLog answers the __consumer_offsets partitions of a fetch. When
// none has records and the request waits, it asks again every
// offsetsLogPoll until the wait passes. maxBytes bounds the answer as a
// fetch's (the first partition with records is always sent whole).
func (s *Service) readOffsetsLog(ctx context.Context, c *kafka.Conn, parts []*offsetsLogPart, wait time.Duration, maxBytes int) {
	if len(parts) == 0 {
		return
	}
	deadline := time.Now().Add(wait)
	for {
		got := false
		forEach(parts, func(p *offsetsLogPart) { s.readOffsetsLogPart(ctx, c, p) })
		for _, p := range parts {
			got = got || len(p.batches) > 0 || p.out.ErrorCode != 0
		}
		left := time.Until(deadline)
		if got || left <= 0 {
			break
		}
		select {
		case <-time.After(min(left, offsetsLogPoll)):
		case <-ctx.Done():
			return
		}
	}
	budget := maxBytes
	for _, p := range parts {
		n := len(p.batches)
		if n == 0 || budget < n && budget != maxBytes {
			continue // over the response's max bytes: the client asks again
		}
		budget -= n
		p.out.Records = byteRecords(p.batches)
	}
}

func (s *Service) readOffsetsLogPart(ctx context.Context, c *kafka.Conn, p *offsetsLogPart) {
	limit := min(max(int(p.maxBytes)/offsetsLogRecordSize, 1), groups.MaxOffsetsLogRecords)
	page, err := s.groupsFor(c).OffsetsLog(ctx, p.partition, p.offset, limit)
	if err != nil {
		p.out.ErrorCode = protocol.KafkaOf(err, protocol.CoordinatorAnswer)
		return
	}
	p.out.HighWatermark, p.out.LastStableOffset, p.out.LogStartOffset = page.End, page.End, 0
	if p.offset > page.End {
		p.out.ErrorCode = int16(protocol.OffsetOutOfRange)
		return
	}
	if p.batches, err = kafka.OffsetsLogBatches(page.Records, max(int(p.maxBytes), 1)); err != nil {
		p.out.ErrorCode = int16(protocol.UnknownServerError)
	}
}

// offsetsLogOffset answers ListOffsets for a __consumer_offsets partition:
// the start (0), the end, or the first commit at or after a timestamp (the
// end when there is none), or for -3 the commit with the largest one.
func (s *Service) offsetsLogOffset(ctx context.Context, c *kafka.Conn, partition int32, ts int64) (offset, timestamp int64, code int16) {
	const latest, earliest, maxTimestamp = -1, -2, -3
	if partition < 0 || partition >= groups.OffsetsLogPartitions {
		return -1, -1, int16(protocol.UnknownTopicOrPartition)
	}
	client := s.groupsFor(c)
	if ts == earliest {
		return 0, -1, 0
	}
	best, bestTs := int64(-1), int64(-1)
	for from := int64(0); ; {
		page, err := client.OffsetsLog(ctx, partition, from, 0)
		if err != nil {
			return -1, -1, protocol.KafkaOf(err, protocol.CoordinatorAnswer)
		}
		for _, r := range page.Records {
			switch {
			case ts == latest || r.Offset == nil:
			case ts == maxTimestamp && r.Offset.CommitTimeMs >= bestTs:
				best, bestTs = r.Position, r.Offset.CommitTimeMs
			case ts >= 0 && r.Offset.CommitTimeMs >= ts:
				return r.Position, r.Offset.CommitTimeMs, 0
			}
		}
		if ts == latest || len(page.Records) == 0 {
			if ts == maxTimestamp && best >= 0 {
				return best, bestTs, 0
			}
			return page.End, -1, 0
		}
		from = page.Records[len(page.Records)-1].Position + 1
	}
}

// offsetsLogEpochEnd answers OffsetForLeaderEpoch for a __consumer_offsets
// partition: its leader epoch is always 0, so every epoch ends at the end.
func (s *Service) offsetsLogEpochEnd(ctx context.Context, c *kafka.Conn, partition int32) (epoch int32, end int64, code int16) {
	if partition < 0 || partition >= groups.OffsetsLogPartitions {
		return -1, -1, int16(protocol.UnknownTopicOrPartition)
	}
	page, err := s.groupsFor(c).OffsetsLog(ctx, partition, 1<<62, 1)
	if err != nil {
		return -1, -1, protocol.KafkaOf(err, protocol.CoordinatorAnswer)
	}
	return 0, page.End, 0
}

// byteRecords are encoded batches held in memory.
type byteRecords []byte

func (b byteRecords) Len() int                      { return len(b) }
func (b byteRecords) WriteTo(w *kafka.Writer) error { return w.Write(b) }
func (b byteRecords) Release()                      {}
