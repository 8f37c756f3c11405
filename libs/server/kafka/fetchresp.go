package kafka

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/protocol"
)

// A FetchResponse is written by FetchBody rather than kmsg, so that record
// bytes never have to be in memory: each partition's records field is a
// Records that writes itself (a segment range sent with sendfile on a
// storage node, bytes fetched from a leader on a frontend). The encoding is
// kmsg's FetchResponse at versions 4 to 16 (a test checks them against each
// other byte for byte).

// Records are a partition's record batches in a fetch answer.
type Records interface {
	// Len is the number of bytes.
	Len() int
	// WriteTo writes exactly Len bytes to w. The bytes before them were
	// handed to w.WriteMore, so a socket may take them with sendfile.
	WriteTo(w *Writer) error
	// Release frees the records; called once, written or not.
	Release()
}

// BytesRecords are records held in memory.
type BytesRecords []byte

// Len implements Records.
func (b BytesRecords) Len() int { return len(b) }

// WriteTo implements Records.
func (b BytesRecords) WriteTo(w *Writer) error { return w.Write(b) }

// Release implements Records.
func (BytesRecords) Release() {}

// FetchPartition is one partition of a fetch answer.
type FetchPartition struct {
	Partition            int32
	ErrorCode            int16
	HighWatermark        int64
	LastStableOffset     int64
	LogStartOffset       int64
	PreferredReadReplica int32
	// Aborted are the aborted transactions of a read_committed answer.
	Aborted []protocol.AbortedTxn
	// Records are the batches; nil is an empty records field.
	Records Records
	// Leader, when its ID is not -1, is the current leader a v12+ answer
	// names (KIP-951) with a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH.
	Leader kmsg.FetchResponseTopicPartitionCurrentLeader
}

// NewFetchPartition returns a partition answer with Kafka's defaults (-1
// offsets, no preferred replica, no leader hint).
func NewFetchPartition(partition int32) FetchPartition {
	return FetchPartition{Partition: partition, HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1, PreferredReadReplica: -1,
		Leader: kmsg.NewFetchResponseTopicPartitionCurrentLeader()}
}

// FetchTopic is one topic of a fetch answer: by name before v13, by id
// from it.
type FetchTopic struct {
	Topic      string
	TopicID    [16]byte
	Partitions []FetchPartition
}

// FetchBody is a FetchResponse written as a Body.
type FetchBody struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	SessionID      int32
	Topics         []FetchTopic
	// Brokers are the NodeEndpoints of v16 answers: the leaders named in
	// partitions' Leader hints.
	Brokers []kmsg.FetchResponseBroker

	pieces []fetchPiece // built by Encode
	size   int
}

// fetchPiece is encoded bytes, then records (nil after the last bytes).
type fetchPiece struct {
	bytes   []byte
	records Records
}

// Encode lays the answer out; it must be called once, before Len.
func (f *FetchBody) Encode() {
	v := f.Version
	flex := v >= 12
	var b []byte
	if v >= 1 {
		b = binary.BigEndian.AppendUint32(b, uint32(f.ThrottleMillis))
	}
	if v >= 7 {
		b = binary.BigEndian.AppendUint16(b, uint16(f.ErrorCode))
		b = binary.BigEndian.AppendUint32(b, uint32(f.SessionID))
	}
	b = appendLen(b, len(f.Topics), flex)
	for ti := range f.Topics {
		t := &f.Topics[ti]
		if v <= 12 {
			b = appendString(b, t.Topic, flex)
		} else {
			b = append(b, t.TopicID[:]...)
		}
		b = appendLen(b, len(t.Partitions), flex)
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
			b = binary.BigEndian.AppendUint16(b, uint16(p.ErrorCode))
			b = binary.BigEndian.AppendUint64(b, uint64(p.HighWatermark))
			if v >= 4 {
				b = binary.BigEndian.AppendUint64(b, uint64(p.LastStableOffset))
			}
			if v >= 5 {
				b = binary.BigEndian.AppendUint64(b, uint64(p.LogStartOffset))
			}
			if v >= 4 { // aborted transactions: an array, empty rather than null
				b = appendLen(b, len(p.Aborted), flex)
				for _, a := range p.Aborted {
					b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
					b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
					if flex {
						b = append(b, 0) // no tagged fields
					}
				}
			}
			if v >= 11 {
				b = binary.BigEndian.AppendUint32(b, uint32(p.PreferredReadReplica))
			}
			n := 0
			if p.Records != nil {
				n = p.Records.Len()
			}
			b = appendLen(b, n, flex)
			if n > 0 {
				f.pieces = append(f.pieces, fetchPiece{bytes: b, records: p.Records})
				f.size += len(b) + n
				b = nil
			}
			if flex {
				if p.Leader.LeaderID != -1 || p.Leader.LeaderEpoch != -1 {
					b = append(b, 1, 1, 9) // one tag: CurrentLeader (1), 9 bytes
					b = binary.BigEndian.AppendUint32(b, uint32(p.Leader.LeaderID))
					b = binary.BigEndian.AppendUint32(b, uint32(p.Leader.LeaderEpoch))
					b = append(b, 0)
				} else {
					b = append(b, 0)
				}
			}
		}
		if flex {
			b = append(b, 0)
		}
	}
	if flex {
		if len(f.Brokers) > 0 && v >= 16 {
			var nb []byte
			nb = appendLen(nb, len(f.Brokers), true)
			for _, br := range f.Brokers {
				nb = binary.BigEndian.AppendUint32(nb, uint32(br.NodeID))
				nb = appendString(nb, br.Host, true)
				nb = binary.BigEndian.AppendUint32(nb, uint32(br.Port))
				if br.Rack == nil {
					nb = append(nb, 0)
				} else {
					nb = appendString(nb, *br.Rack, true)
				}
				nb = append(nb, 0)
			}
			b = append(b, 1, 0) // one tag: NodeEndpoints (0)
			b = binary.AppendUvarint(b, uint64(len(nb)))
			b = append(b, nb...)
		} else {
			b = append(b, 0)
		}
	}
	f.pieces = append(f.pieces, fetchPiece{bytes: b})
	f.size += len(b)
}

// Len implements Body.
func (f *FetchBody) Len() int { return f.size }

// codeFetchSessionNotFound is Kafka's FETCH_SESSION_ID_NOT_FOUND.
const codeFetchSessionNotFound = 70

// WriteBody implements Body.
func (f *FetchBody) WriteBody(w *Writer) error {
	for _, p := range f.pieces {
		if p.records == nil {
			if err := w.Write(p.bytes); err != nil {
				return err
			}
			continue
		}
		if err := w.WriteMore(p.bytes); err != nil {
			return err
		}
		if err := p.records.WriteTo(w); err != nil {
			return err
		}
	}
	return nil
}

// Release implements Body.
func (f *FetchBody) Release() {
	for ti := range f.Topics {
		for pi := range f.Topics[ti].Partitions {
			if r := f.Topics[ti].Partitions[pi].Records; r != nil {
				r.Release()
			}
		}
	}
}

// appendLen appends the length of an array or a bytes field: compact (n+1
// as an unsigned varint) in flexible versions, an int32 before.
func appendLen(b []byte, n int, flex bool) []byte {
	if flex {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

func appendString(b []byte, s string, flex bool) []byte {
	if flex {
		b = binary.AppendUvarint(b, uint64(len(s))+1)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	}
	return append(b, s...)
}
