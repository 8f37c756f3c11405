package protocol

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// APIKey names a storage protocol API.
type APIKey uint16

// The storage protocol's APIs.
const (
	APIProduce     APIKey = 0
	APIFetch       APIKey = 1
	APIListOffsets APIKey = 2
	// APIOffsetForLeaderEpoch asks a leader where an epoch ends in its log.
	APIOffsetForLeaderEpoch APIKey = 3
	// APIDescribeReplicas asks a node for the state of its replicas.
	APIDescribeReplicas APIKey = 4
	// APIDeleteRecords moves a leader's log start offset (Kafka's
	// DeleteRecords).
	APIDeleteRecords APIKey = 5
	// APIWriteTxnMarker has a leader append the marker that ends a
	// producer's transaction (Kafka's WriteTxnMarkers, one partition); the
	// transaction coordinator sends it.
	APIWriteTxnMarker APIKey = 6
	// APIWriteTxnMarkers has a node append the markers of several
	// transactions on the partitions it leads, in one request (Kafka's
	// WriteTxnMarkers); the transaction coordinator sends it.
	APIWriteTxnMarkers APIKey = 7
	// APIDescribeProducers asks a leader for the producers its log of a
	// partition remembers (Kafka's DescribeProducers).
	APIDescribeProducers APIKey = 8
)

func (k APIKey) String() string {
	switch k {
	case APIProduce:
		return "Produce"
	case APIFetch:
		return "Fetch"
	case APIListOffsets:
		return "ListOffsets"
	case APIOffsetForLeaderEpoch:
		return "OffsetForLeaderEpoch"
	case APIDescribeReplicas:
		return "DescribeReplicas"
	case APIDeleteRecords:
		return "DeleteRecords"
	case APIWriteTxnMarker:
		return "WriteTxnMarker"
	case APIWriteTxnMarkers:
		return "WriteTxnMarkers"
	case APIDescribeProducers:
		return "DescribeProducers"
	}
	return fmt.Sprintf("API(%d)", uint16(k))
}

// Body is an API request or response body. Implementations encode themselves as
// one msgpack array and skip trailing fields they do not know when decoding.
type Body interface {
	EncodeMsgpack(*msgpack.Encoder) error
	DecodeMsgpack(*msgpack.Decoder) error
}

// RequestHeader starts every request frame.
type RequestHeader struct {
	APIKey        APIKey
	Version       uint16
	CorrelationID uint32
	ClientID      string
	// PayloadLen is the length of the raw payload that follows the header.
	PayloadLen uint32
}

// ResponseHeader starts every response frame. A response with a non-zero
// ErrorCode may omit its body.
type ResponseHeader struct {
	CorrelationID uint32
	ErrorCode     Code
	ErrorMessage  string
	PayloadLen    uint32
}

// Err returns the header's error as an *Error, or nil.
func (h *ResponseHeader) Err() error {
	if h.ErrorCode == None {
		return nil
	}
	return &Error{Code: h.ErrorCode, Message: h.ErrorMessage}
}

// Encoder builds frame prefixes (length, header and body; the payload is written
// by the caller, for example with sendfile). An Encoder reuses its buffer and is
// not safe for concurrent use; pool it.
type Encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

// NewEncoder returns an Encoder with an empty buffer.
func NewEncoder() *Encoder {
	e := &Encoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	return e
}

// Request returns the frame prefix of a request whose payload is payloadLen bytes.
// The slice is valid until the next call.
func (e *Encoder) Request(h *RequestHeader, body Body, payloadLen int) ([]byte, error) {
	h.PayloadLen = uint32(payloadLen)
	e.start()
	enc := e.enc
	if err := firstErr(
		enc.EncodeArrayLen(5),
		enc.EncodeUint(uint64(h.APIKey)),
		enc.EncodeUint(uint64(h.Version)),
		enc.EncodeUint(uint64(h.CorrelationID)),
		enc.EncodeString(h.ClientID),
		enc.EncodeUint(uint64(h.PayloadLen)),
	); err != nil {
		return nil, err
	}
	return e.finish(body, payloadLen)
}

// Response returns the frame prefix of a response whose payload is payloadLen
// bytes. body may be nil (an error response). The slice is valid until the next
// call.
func (e *Encoder) Response(h *ResponseHeader, body Body, payloadLen int) ([]byte, error) {
	h.PayloadLen = uint32(payloadLen)
	e.start()
	enc := e.enc
	if err := firstErr(
		enc.EncodeArrayLen(4),
		enc.EncodeUint(uint64(h.CorrelationID)),
		enc.EncodeInt(int64(h.ErrorCode)),
		enc.EncodeString(h.ErrorMessage),
		enc.EncodeUint(uint64(h.PayloadLen)),
	); err != nil {
		return nil, err
	}
	return e.finish(body, payloadLen)
}

func (e *Encoder) start() {
	e.buf.Reset()
	e.buf.Write([]byte{0, 0, 0, 0})
}

func (e *Encoder) finish(body Body, payloadLen int) ([]byte, error) {
	var err error
	if body == nil {
		err = e.enc.EncodeNil()
	} else {
		err = body.EncodeMsgpack(e.enc)
	}
	if err != nil {
		return nil, err
	}
	b := e.buf.Bytes()
	total := len(b) - LengthSize + payloadLen
	if total > 1<<31 {
		return nil, fmt.Errorf("%w: frame of %d bytes", ErrFrameTooLarge, total)
	}
	binary.BigEndian.PutUint32(b, uint32(total))
	return b, nil
}

// Decoder decodes frames cut by a FrameReader. It is not safe for concurrent use.
type Decoder struct {
	rd    bytes.Reader
	dec   *msgpack.Decoder
	frame []byte
	plen  int
}

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder {
	d := &Decoder{}
	d.dec = msgpack.NewDecoder(&d.rd)
	return d
}

// Request decodes the header of a request frame into h and checks its lengths.
// The body is decoded next with Body, and the payload is then Payload().
func (d *Decoder) Request(frame []byte, h *RequestHeader) error {
	d.reset(frame)
	dec := d.dec
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 5 {
		return malformed("request header", err, n)
	}
	var key, ver uint16
	if key, err = dec.DecodeUint16(); err == nil {
		if ver, err = dec.DecodeUint16(); err == nil {
			if h.CorrelationID, err = dec.DecodeUint32(); err == nil {
				if h.ClientID, err = dec.DecodeString(); err == nil {
					h.PayloadLen, err = dec.DecodeUint32()
				}
			}
		}
	}
	if err != nil {
		return malformed("request header", err, n)
	}
	h.APIKey, h.Version = APIKey(key), ver
	if err := skipN(dec, n-5); err != nil {
		return malformed("request header", err, n)
	}
	return d.setPayload(h.PayloadLen)
}

// Response decodes the header of a response frame into h and checks its lengths.
func (d *Decoder) Response(frame []byte, h *ResponseHeader) error {
	d.reset(frame)
	dec := d.dec
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 4 {
		return malformed("response header", err, n)
	}
	var code int16
	if h.CorrelationID, err = dec.DecodeUint32(); err == nil {
		if code, err = dec.DecodeInt16(); err == nil {
			if h.ErrorMessage, err = dec.DecodeString(); err == nil {
				h.PayloadLen, err = dec.DecodeUint32()
			}
		}
	}
	if err != nil {
		return malformed("response header", err, n)
	}
	h.ErrorCode = Code(code)
	if err := skipN(dec, n-4); err != nil {
		return malformed("response header", err, n)
	}
	return d.setPayload(h.PayloadLen)
}

// Body decodes the body that follows the header. A nil body in the frame leaves
// b untouched. Body must consume exactly the bytes before the payload.
func (d *Decoder) Body(b Body) error {
	if d.rd.Len() > d.plen {
		if isNil, err := d.peekNil(); err != nil {
			return malformed("body", err, 0)
		} else if !isNil {
			if err := b.DecodeMsgpack(d.dec); err != nil {
				return fmt.Errorf("%w: body: %w", ErrMalformedFrame, err)
			}
		}
	}
	if d.rd.Len() != d.plen {
		return fmt.Errorf("%w: %d bytes between body and payload", ErrMalformedFrame, d.rd.Len()-d.plen)
	}
	return nil
}

// Payload returns the frame's raw payload (aliasing the frame).
func (d *Decoder) Payload() []byte { return d.frame[len(d.frame)-d.plen:] }

func (d *Decoder) reset(frame []byte) {
	d.frame = frame
	d.plen = 0
	d.rd.Reset(frame)
	d.dec.Reset(&d.rd)
}

func (d *Decoder) setPayload(n uint32) error {
	if int64(n) > int64(d.rd.Len()) {
		return fmt.Errorf("%w: payload of %d bytes in a frame with %d bytes left", ErrMalformedFrame, n, d.rd.Len())
	}
	d.plen = int(n)
	return nil
}

func (d *Decoder) peekNil() (bool, error) {
	c, err := d.rd.ReadByte()
	if err != nil {
		return false, err
	}
	if c == 0xc0 {
		return true, nil
	}
	return false, d.rd.UnreadByte()
}

func malformed(what string, err error, n int) error {
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformedFrame, what, err)
	}
	return fmt.Errorf("%w: %s has %d fields", ErrMalformedFrame, what, n)
}

// maxSkip bounds the values skipped in one body: more than any newer peer's
// extra fields, few enough to refuse a frame built to make the decoder work.
const maxSkip = 1 << 16

// skipN skips n msgpack values without recursion: nested arrays and maps add
// their elements to the count of values left, so a frame of deeply nested
// containers cannot grow the stack (msgpack's own Skip recurses per level).
func skipN(dec *msgpack.Decoder, n int) error {
	return SkipValues(dec, n)
}

// SkipValues skips n msgpack values iteratively, refusing more than 65,536
// values in all. Decoders of untrusted input use it instead of Decoder.Skip.
func SkipValues(dec *msgpack.Decoder, n int) error {
	left, seen := n, 0
	for left > 0 {
		if seen++; seen > maxSkip {
			return fmt.Errorf("more than %d values to skip", maxSkip)
		}
		c, err := dec.PeekCode()
		if err != nil {
			return err
		}
		left--
		switch {
		case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
			k, err := dec.DecodeArrayLen()
			if err != nil {
				return err
			}
			left += max(k, 0)
		case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
			k, err := dec.DecodeMapLen()
			if err != nil {
				return err
			}
			left += 2 * max(k, 0)
		default:
			if err := dec.Skip(); err != nil { // a scalar, string, binary or extension
				return err
			}
		}
		if left > maxSkip {
			return fmt.Errorf("more than %d values to skip", maxSkip)
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
