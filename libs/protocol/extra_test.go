package protocol

import "github.com/vmihailenco/msgpack/v5"

// extraField encodes a FetchResponse with one more field than this version knows.
type extraField struct{ r *FetchResponse }

func (x extraField) EncodeMsgpack(e *msgpack.Encoder) error {
	return firstErr(e.EncodeArrayLen(5), e.EncodeInt(x.r.HighWatermark), e.EncodeInt(x.r.LogStartOffset),
		e.EncodeInt(x.r.LogEndOffset), e.EncodeInt(int64(x.r.ThrottleMs)), e.EncodeString("future"))
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
