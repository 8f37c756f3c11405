package fetch

import (
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"unicode/utf8"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// The answer to GET /v1/topics/{topic}/partitions/{p}/records, in JSON:
//
//	{"records":[{"offset":O,"timestamp":T,"key":"k","value":"v","headers":{"h":"x"}}, ...],
//	 "next_offset":N,"high_watermark":H}
//
// mirroring the produce body: a key or value is a string when it is valid
// UTF-8 and key_b64/value_b64 (standard base64) otherwise, null for Kafka's
// null; headers is an object in record order (keys may repeat), or
// headers_b64 with every value in base64 when some value is not UTF-8; a
// record without headers has neither. In msgpack the same map carries raw
// bytes (bin) for keys, values and header values, and no _b64 fields.

// decodeFn is called for each record of r in order.
type decodeFn func(rec *record.Record)

// walk decodes r's records at or after r.Offset, calling fn for each, and
// returns the next offset to fetch. A corrupt batch ends the walk: it is an
// error only when no record came before it (the next fetch starts at the bad
// batch and reports it then).
func walk(r *Result, fn decodeFn) (next int64, n int, err error) {
	it := record.NewIterator(r.Payload)
	it.SetStartOffset(r.Offset)
	if r.Isolation == protocol.ReadCommitted {
		it.SetAborted(r.Aborted)
	}
	for it.Next() {
		fn(it.Record())
		n++
	}
	if it.Err() != nil && n == 0 {
		return r.Offset, 0, protocol.StorageError.Err("the leader sent a corrupt batch at offset %d: %v", r.Offset, it.Err())
	}
	return it.NextOffset(), n, nil
}

// AppendJSON appends r's JSON answer to b.
func AppendJSON(b []byte, r *Result) ([]byte, error) {
	b = append(b, `{"records":[`...)
	start := len(b)
	next, _, err := walk(r, func(rec *record.Record) {
		if len(b) > start {
			b = append(b, ',')
		}
		b = appendJSONRecord(b, rec)
	})
	if err != nil {
		return nil, err
	}
	b = append(b, `],"next_offset":`...)
	b = strconv.AppendInt(b, next, 10)
	b = append(b, `,"high_watermark":`...)
	b = strconv.AppendInt(b, r.HighWatermark, 10)
	b = append(b, `,"last_stable_offset":`...)
	b = strconv.AppendInt(b, r.LastStableOffset, 10)
	return append(b, '}'), nil
}

func appendJSONRecord(b []byte, rec *record.Record) []byte {
	return appendJSONRecordFields(append(b, '{'), rec)
}

// Records calls fn with each record of r in order (the record aliases r's
// payload and is valid during the call) and returns the offset after them.
func Records(r *Result, fn func(*record.Record)) (next int64, err error) {
	next, _, err = walk(r, fn)
	return next, err
}

// AppendSharedJSON appends a record acquired from a share group as a JSON
// object: its topic, partition and delivery count, then the fields
// AppendJSON gives each record.
func AppendSharedJSON(b []byte, topic string, partition int32, deliveryCount int16, rec *record.Record) []byte {
	b = append(b, `{"topic":`...)
	b = appendJSONString(b, []byte(topic))
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, `,"delivery_count":`...)
	b = strconv.AppendInt(b, int64(deliveryCount), 10)
	return appendJSONRecordFields(append(b, ','), rec)
}

// appendJSONRecordFields appends a record's fields, without braces before.
func appendJSONRecordFields(b []byte, rec *record.Record) []byte {
	b = append(b, `"offset":`...)
	b = strconv.AppendInt(b, rec.Offset, 10)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, rec.Timestamp, 10)
	b = appendJSONBytes(b, "key", rec.Key)
	b = appendJSONBytes(b, "value", rec.Value)
	if len(rec.Headers) > 0 {
		b = appendJSONHeaders(b, rec.Headers)
	}
	return append(b, '}')
}

// appendJSONBytes appends ,"name":"text" or ,"name_b64":"..." or ,"name":null.
func appendJSONBytes(b []byte, name string, v []byte) []byte {
	switch {
	case v == nil:
		return append(append(append(b, `,"`...), name...), `":null`...)
	case utf8.Valid(v):
		b = append(append(append(b, `,"`...), name...), `":`...)
		return appendJSONString(b, v)
	}
	b = append(append(append(b, `,"`...), name...), `_b64":"`...)
	return append(base64.StdEncoding.AppendEncode(b, v), '"')
}

func appendJSONHeaders(b []byte, hs []record.RecordHeader) []byte {
	text := true
	for i := range hs {
		if hs[i].Value != nil && !utf8.Valid(hs[i].Value) {
			text = false
			break
		}
	}
	if text {
		b = append(b, `,"headers":{`...)
	} else {
		b = append(b, `,"headers_b64":{`...)
	}
	for i := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, []byte(hs[i].Key))
		b = append(b, ':')
		switch v := hs[i].Value; {
		case v == nil:
			b = append(b, "null"...)
		case text:
			b = appendJSONString(b, v)
		default:
			b = append(base64.StdEncoding.AppendEncode(append(b, '"'), v), '"')
		}
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 (possible only
// in header keys, which Kafka declares strings but a producer may fill with
// anything) becomes U+FFFD, as encoding/json does.
func appendJSONString(b, s []byte) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c >= 0x20:
				b = append(b, c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// AppendMsgpack appends r's msgpack answer to b: a map of records (an array
// of maps), next_offset and high_watermark.
func AppendMsgpack(b []byte, r *Result) ([]byte, error) {
	b = append(b, 0x84) // fixmap of 4
	b = mpString(b, "records")
	// The count is known only after decoding: an array32 header is reserved
	// and filled in (a valid, if not minimal, msgpack encoding).
	at := len(b)
	b = append(b, 0xdd, 0, 0, 0, 0)
	next, n, err := walk(r, func(rec *record.Record) { b = appendMsgpackRecord(b, rec) })
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(b[at+1:], uint32(n))
	b = mpInt(mpString(b, "next_offset"), next)
	b = mpInt(mpString(b, "high_watermark"), r.HighWatermark)
	b = mpInt(mpString(b, "last_stable_offset"), r.LastStableOffset)
	return b, nil
}

func appendMsgpackRecord(b []byte, rec *record.Record) []byte {
	fields := byte(4)
	if len(rec.Headers) > 0 {
		fields++
	}
	b = append(b, 0x80|fields)
	b = mpInt(mpString(b, "offset"), rec.Offset)
	b = mpInt(mpString(b, "timestamp"), rec.Timestamp)
	b = mpBin(mpString(b, "key"), rec.Key)
	b = mpBin(mpString(b, "value"), rec.Value)
	if len(rec.Headers) > 0 {
		b = mpMapLen(mpString(b, "headers"), len(rec.Headers))
		for i := range rec.Headers {
			b = mpBin(mpString(b, rec.Headers[i].Key), rec.Headers[i].Value)
		}
	}
	return b
}

func mpString(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= 0xff:
		b = append(b, 0xd9, byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func mpBin(b []byte, v []byte) []byte {
	switch n := len(v); {
	case v == nil:
		return append(b, 0xc0)
	case n <= 0xff:
		b = append(b, 0xc4, byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
	}
	return append(b, v...)
}

func mpInt(b []byte, v int64) []byte {
	if v >= 0 && v < 128 {
		return append(b, byte(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func mpMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
}
