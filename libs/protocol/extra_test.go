package protocol

import "github.com/vmihailenco/msgpack/v5"

// extraField encodes a FetchResponse with one more field than this version knows.
type extraField struct{ r *FetchResponse }

func (x extraField) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(7), e.EncodeInt(x.r.HighWatermark), e.EncodeInt(x.r.LogStartOffset),
		e.EncodeInt(x.r.LogEndOffset), e.EncodeInt(int64(x.r.ThrottleMs)), e.EncodeInt(x.r.LastStableOffset),
		e.EncodeArrayLen(0), e.EncodeString("future"))
}

// oldFetchResponse encodes the three-field fetch response of nodes from
// before quotas.
type oldFetchResponse struct{ r *FetchResponse }

func (x oldFetchResponse) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(3), e.EncodeInt(x.r.HighWatermark), e.EncodeInt(x.r.LogStartOffset), e.EncodeInt(x.r.LogEndOffset))
}

func (x oldFetchResponse) DecodeMsgpack(d *msgpack.Decoder) error { return x.r.DecodeMsgpack(d) }

func (x extraField) DecodeMsgpack(d *msgpack.Decoder) error { return x.r.DecodeMsgpack(d) }

// oldFetch encodes the seven-field fetch request of the first protocol version.
type oldFetch struct{}

func (oldFetch) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(7), e.EncodeString("t"), e.EncodeInt(0), e.EncodeInt(0), e.EncodeInt(100),
		e.EncodeInt(0), e.EncodeInt(0), e.EncodeInt(-1))
}

func (oldFetch) DecodeMsgpack(*msgpack.Decoder) error { return nil }

// oddAborted encodes a fetch response whose aborted array has an odd
// number of fields.
type oddAborted struct{ r *FetchResponse }

func (x oddAborted) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(6), e.EncodeInt(x.r.HighWatermark), e.EncodeInt(x.r.LogStartOffset),
		e.EncodeInt(x.r.LogEndOffset), e.EncodeInt(0), e.EncodeInt(0), e.EncodeArrayLen(1), e.EncodeInt(5))
}

func (x oddAborted) DecodeMsgpack(d *msgpack.Decoder) error { return x.r.DecodeMsgpack(d) }
