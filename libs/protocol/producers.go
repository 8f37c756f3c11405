package protocol

import (
	"github.com/vmihailenco/msgpack/v5"
)

// MaxDescribedProducers bounds the producers one DescribeProducers answer
// may list; a decoder refuses more rather than allocate for a hostile
// length.
const MaxDescribedProducers = 1 << 20

// DescribeProducersRequest asks a partition's leader for the producers its
// log remembers (Kafka's DescribeProducers).
type DescribeProducersRequest struct {
	Topic     string
	Partition int32
}

// ProducerInfo is one producer id a partition's log remembers: its epoch,
// the sequence of its last record (-1 when its last write was a
// transaction marker), and the first offset of its open transaction (-1:
// none).
type ProducerInfo struct {
	ProducerID            int64
	Epoch                 int16
	LastSequence          int32
	CurrentTxnStartOffset int64
}

// DescribeProducersResponse lists a partition's producers, by producer id.
type DescribeProducersResponse struct {
	Producers []ProducerInfo
}

// EncodeMsgpack implements Body.
func (r *DescribeProducersRequest) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(2), e.EncodeString(r.Topic), e.EncodeInt(int64(r.Partition)))
}

// DecodeMsgpack implements Body.
func (r *DescribeProducersRequest) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(2) {
		r.Topic = f.str()
		r.Partition = int32(f.int())
	}
	return f.end("describe producers request")
}

// EncodeMsgpack implements Body: [[id, epoch, last sequence, txn start],
// ...] in a one-field array.
func (r *DescribeProducersResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := firstErr(e.EncodeArrayLen(1), e.EncodeArrayLen(len(r.Producers))); err != nil {
		return err
	}
	for _, p := range r.Producers {
		if err := firstErr(e.EncodeArrayLen(4), e.EncodeInt(p.ProducerID), e.EncodeInt(int64(p.Epoch)),
			e.EncodeInt(int64(p.LastSequence)), e.EncodeInt(p.CurrentTxnStartOffset)); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack implements Body.
func (r *DescribeProducersResponse) DecodeMsgpack(d *msgpack.Decoder) error {
	f := fields{d: d}
	if f.begin(1) {
		n := f.arrayLen(MaxDescribedProducers, "producers")
		r.Producers = make([]ProducerInfo, 0, min(n, 1024))
		for i := 0; i < n && f.err == nil; i++ {
			var p ProducerInfo
			p, f.err = decodeProducerInfo(d)
			r.Producers = append(r.Producers, p)
		}
	}
	return f.end("describe producers response")
}

// decodeProducerInfo reads one producer.
func decodeProducerInfo(d *msgpack.Decoder) (ProducerInfo, error) {
	var p ProducerInfo
	f := fields{d: d}
	if f.begin(4) {
		p.ProducerID = f.int()
		p.Epoch = int16(f.int())
		p.LastSequence = int32(f.int())
		p.CurrentTxnStartOffset = f.int()
	}
	return p, f.end("producer")
}
