package produce

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/sluicemq/sluice/libs/record"
)

// parseMsgpack reads the JSON body's structure encoded as msgpack: a map with
// "records", an array of maps whose "key", "value" and header values are bin
// or str (raw bytes) or nil. It is written against the decoder's primitives,
// without reflection, so that order, presence and limits are checked as the
// bytes are read and a declared length is never trusted for an allocation.
func parseMsgpack(body []byte, maxRecords int) ([]Input, error) {
	rd := bytes.NewReader(body)
	d := &mpDecoder{Decoder: msgpack.NewDecoder(rd), rd: rd, body: body}
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, malformed("the body must be a map with \"records\"")
	}
	var recs []Input
	seen := false
	for i := 0; i < n; i++ {
		name, err := d.str()
		if err != nil {
			return nil, malformed("the body's keys must be strings: %v", err)
		}
		if name != "records" {
			return nil, malformed("unknown field %q in the body (want \"records\")", name)
		}
		if seen {
			return nil, malformed("\"records\" given twice")
		}
		seen = true
		if recs, err = msgpackRecords(d, maxRecords); err != nil {
			return nil, err
		}
	}
	if !seen {
		return nil, malformed("\"records\" is missing")
	}
	if rd.Len() != 0 {
		return nil, malformed("%d bytes after the body's map", rd.Len())
	}
	return recs, nil
}

func msgpackRecords(d *mpDecoder, maxRecords int) ([]Input, error) {
	n, err := d.DecodeArrayLen()
	if err != nil || n < 0 {
		return nil, malformed("\"records\" must be an array")
	}
	if maxRecords > 0 && n > maxRecords {
		return nil, tooMany(maxRecords)
	}
	// The declared length is only a hint: each record takes at least one
	// byte, so a lying length fails on the bytes before memory grows.
	recs := make([]Input, 0, min(n, 1024))
	for i := 0; i < n; i++ {
		in, err := msgpackRecord(d)
		if err != nil {
			return nil, malformed("record %d: %v", i, err)
		}
		recs = append(recs, in)
	}
	return recs, nil
}

func msgpackRecord(d *mpDecoder) (Input, error) {
	var in Input
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return in, errors.New("must be a map")
	}
	var keyText, keyB64, valText, valB64, hasHeaders, hasPart, hasTS bool
	for i := 0; i < n; i++ {
		name, err := d.str()
		if err != nil {
			return in, fmt.Errorf("field names must be strings: %v", err)
		}
		var dup bool
		switch name {
		case "key":
			dup, keyText = keyText, true
			in.Key, err = msgpackBytes(d, name)
		case "value":
			dup, valText = valText, true
			in.Value, err = msgpackBytes(d, name)
		case "key_b64":
			dup, keyB64 = keyB64, true
			in.Key, err = msgpackB64(d, name)
		case "value_b64":
			dup, valB64 = valB64, true
			in.Value, err = msgpackB64(d, name)
		case "headers":
			dup, hasHeaders = hasHeaders, true
			in.Headers, err = msgpackHeaders(d)
		case "partition":
			dup, hasPart = hasPart, true
			in.Partition, in.Explicit, err = msgpackPartition(d)
		case "timestamp":
			dup, hasTS = hasTS, true
			in.Timestamp, err = msgpackTimestamp(d)
		default:
			return in, fmt.Errorf("unknown field %q", name)
		}
		if err != nil {
			return in, err
		}
		if dup {
			return in, fmt.Errorf("field %q given twice", name)
		}
	}
	switch {
	case keyText && keyB64:
		return in, errors.New("key and key_b64 are both given")
	case valText && valB64:
		return in, errors.New("value and value_b64 are both given")
	case !valText && !valB64:
		return in, errors.New("value is missing (give \"value\" or \"value_b64\")")
	}
	return in, nil
}

// msgpackBytes reads bin or str as raw bytes, nil as Kafka's null.
func msgpackBytes(d *mpDecoder, name string) ([]byte, error) {
	c, err := d.PeekCode()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if c != msgpcode.Nil && !msgpcode.IsString(c) && !msgpcode.IsBin(c) {
		return nil, fmt.Errorf("%s must be bin, str or nil", name)
	}
	if err := d.checkLen(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	b, err := d.DecodeBytes()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if b == nil && c != msgpcode.Nil {
		b = []byte{} // an empty bin or str is empty, not null
	}
	return b, nil
}

func msgpackB64(d *mpDecoder, name string) ([]byte, error) {
	b, err := msgpackBytes(d, name)
	if err != nil || b == nil {
		return nil, err
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
	n, err := base64.StdEncoding.Decode(out, b)
	if err != nil {
		return nil, fmt.Errorf("%s is not valid base64: %v", name, err)
	}
	return out[:n], nil
}

func msgpackHeaders(d *mpDecoder) ([]record.RecordHeader, error) {
	n, err := d.DecodeMapLen()
	if err != nil {
		return nil, errors.New("headers must be a map of bin, str or nil")
	}
	var hs []record.RecordHeader
	for i := 0; i < n; i++ {
		key, err := d.str()
		if err != nil {
			return nil, fmt.Errorf("header keys must be strings: %v", err)
		}
		v, err := msgpackBytes(d, "header "+fmt.Sprintf("%q", key))
		if err != nil {
			return nil, err
		}
		hs = append(hs, record.RecordHeader{Key: key, Value: v})
	}
	return hs, nil
}

func msgpackInt(d *mpDecoder, name string) (v int64, isNil bool, err error) {
	c, err := d.PeekCode()
	if err != nil {
		return 0, false, fmt.Errorf("%s: %v", name, err)
	}
	if c == msgpcode.Nil {
		return 0, true, d.DecodeNil()
	}
	if !msgpcode.IsFixedNum(c) && (c < msgpcode.Uint8 || c > msgpcode.Int64) {
		return 0, false, fmt.Errorf("%s must be an integer", name)
	}
	if c == msgpcode.Uint64 {
		u, err := d.DecodeUint64()
		if err != nil {
			return 0, false, fmt.Errorf("%s: %v", name, err)
		}
		if u > 1<<63-1 {
			return 0, false, fmt.Errorf("%s %d is out of range", name, u)
		}
		return int64(u), false, nil
	}
	if v, err = d.DecodeInt64(); err != nil {
		return 0, false, fmt.Errorf("%s: %v", name, err)
	}
	return v, false, nil
}

func msgpackPartition(d *mpDecoder) (int32, bool, error) {
	v, isNil, err := msgpackInt(d, "partition")
	if err != nil || isNil {
		return 0, false, err
	}
	if v < -1<<31 || v > 1<<31-1 {
		return 0, false, fmt.Errorf("partition %d is out of range", v)
	}
	return int32(v), true, nil
}

func msgpackTimestamp(d *mpDecoder) (int64, error) {
	v, _, err := msgpackInt(d, "timestamp")
	if err != nil {
		return 0, err
	}
	if v < 0 {
		return 0, fmt.Errorf("timestamp %d is negative (want milliseconds since the epoch, or 0 for now)", v)
	}
	return v, nil
}

// mpDecoder is a msgpack decoder over a body held in memory. The decoder
// allocates a str or bin's declared length up front, so every str and bin is
// first checked against the bytes actually left: a 5-byte header cannot make
// the frontend allocate gigabytes.
type mpDecoder struct {
	*msgpack.Decoder
	rd   *bytes.Reader // the decoder reads straight from it (no buffering)
	body []byte
}

// checkLen fails when the str or bin at the read position declares more bytes
// than remain; other types are left for the decoder to judge.
func (d *mpDecoder) checkLen() error {
	pos := len(d.body) - d.rd.Len()
	if pos >= len(d.body) {
		return nil // the decoder reports the end of input
	}
	c := d.body[pos]
	var n, hdr int
	rest := d.body[pos+1:]
	switch {
	case c >= msgpcode.FixedStrLow && c <= msgpcode.FixedStrHigh:
		n, hdr = int(c&msgpcode.FixedStrMask), 1
	case (c == msgpcode.Str8 || c == msgpcode.Bin8) && len(rest) >= 1:
		n, hdr = int(rest[0]), 2
	case (c == msgpcode.Str16 || c == msgpcode.Bin16) && len(rest) >= 2:
		n, hdr = int(binary.BigEndian.Uint16(rest)), 3
	case (c == msgpcode.Str32 || c == msgpcode.Bin32) && len(rest) >= 4:
		n, hdr = int(binary.BigEndian.Uint32(rest)), 5
	default:
		return nil
	}
	if left := len(d.body) - pos - hdr; n > left {
		return fmt.Errorf("declares %d bytes, %d left in the body", n, left)
	}
	return nil
}

// str decodes a string after checking its length.
func (d *mpDecoder) str() (string, error) {
	if err := d.checkLen(); err != nil {
		return "", err
	}
	return d.DecodeString()
}
