package produce

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/sluicemq/sluice/libs/frontendapi"
	"github.com/sluicemq/sluice/libs/record"
)

// Sentinel errors of body parsing; every parse error wraps one of them and
// says what was wrong and where.
var (
	// ErrMalformed: the body is not a valid produce body (HTTP 400).
	ErrMalformed = errors.New("malformed produce body")
	// ErrTooManyRecords: the body holds more records than allowed (HTTP 413).
	ErrTooManyRecords = errors.New("too many records")
	// ErrContentType: the Content-Type is not one the frontend reads (HTTP 400).
	ErrContentType = errors.New("unsupported content type")
)

// Format is the encoding of a produce body.
type Format int

// The body formats.
const (
	FormatJSON Format = iota
	FormatMsgpack
	// FormatBatches is the SDK's body of ready-made record batches
	// (frontendapi.ContentTypeBatches); ProduceBatches serves it, Parse
	// does not read it.
	FormatBatches
)

// ParseContentType maps a Content-Type header to a Format. A missing header
// means JSON; parameters such as charset are ignored.
func ParseContentType(ct string) (Format, error) {
	mt := ct
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	switch strings.ToLower(strings.TrimSpace(mt)) {
	case "", "application/json", "application/vnd.kafka.json.v2+json", "application/vnd.kafka.v2+json":
		return FormatJSON, nil
	case "application/msgpack", "application/x-msgpack", "application/vnd.msgpack":
		return FormatMsgpack, nil
	case frontendapi.ContentTypeBatches:
		return FormatBatches, nil
	}
	return 0, fmt.Errorf("%w %q: send application/json (key_b64/value_b64 for binary), application/msgpack or %s",
		ErrContentType, ct, frontendapi.ContentTypeBatches)
}

// Input is one record of a produce request as the client sent it.
type Input struct {
	record.Record
	// Partition is the partition the client asked for; valid when Explicit.
	Partition int32
	Explicit  bool
}

// Parse decodes a produce body of the given format, accepting at most
// maxRecords records (no limit when maxRecords <= 0). A record's Timestamp is
// 0 when the client gave none. Parse never panics on any input.
func Parse(f Format, body []byte, maxRecords int) ([]Input, error) {
	var (
		recs []Input
		err  error
	)
	switch f {
	case FormatJSON:
		recs, err = parseJSON(body, maxRecords)
	case FormatMsgpack:
		recs, err = parseMsgpack(body, maxRecords)
	default:
		return nil, fmt.Errorf("%w: format %d", ErrContentType, f)
	}
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: no records", ErrMalformed)
	}
	return recs, nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

func tooMany(max int) error {
	return fmt.Errorf("%w: more than %d records in one request", ErrTooManyRecords, max)
}

// jsonRecord keeps every field raw so that presence, null and type are told
// apart and reported in the client's terms.
type jsonRecord struct {
	Key       json.RawMessage `json:"key"`
	KeyB64    json.RawMessage `json:"key_b64"`
	Value     json.RawMessage `json:"value"`
	ValueB64  json.RawMessage `json:"value_b64"`
	Headers   json.RawMessage `json:"headers"`
	Partition json.RawMessage `json:"partition"`
	Timestamp json.RawMessage `json:"timestamp"`
}

// parseJSON streams the records array so that a body with too many records is
// refused as soon as the limit is passed.
func parseJSON(body []byte, maxRecords int) ([]Input, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := expectDelim(dec, '{', "the body"); err != nil {
		return nil, err
	}
	var recs []Input
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed("%v", err)
		}
		name, _ := tok.(string)
		if name != "records" {
			return nil, malformed("unknown field %q in the body (want \"records\")", name)
		}
		if seen {
			return nil, malformed("\"records\" given twice")
		}
		seen = true
		if recs, err = parseJSONRecords(dec, maxRecords); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, malformed("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("data after the body's closing brace")
	}
	if !seen {
		return nil, malformed("\"records\" is missing")
	}
	return recs, nil
}

func parseJSONRecords(dec *json.Decoder, maxRecords int) ([]Input, error) {
	if err := expectDelim(dec, '[', "\"records\""); err != nil {
		return nil, err
	}
	var recs []Input
	for i := 0; dec.More(); i++ {
		if maxRecords > 0 && i >= maxRecords {
			return nil, tooMany(maxRecords)
		}
		var jr jsonRecord
		if err := dec.Decode(&jr); err != nil {
			return nil, malformed("record %d: %v", i, err)
		}
		in, err := jr.input()
		if err != nil {
			return nil, malformed("record %d: %v", i, err)
		}
		recs = append(recs, in)
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return nil, malformed("%v", err)
	}
	return recs, nil
}

func expectDelim(dec *json.Decoder, want json.Delim, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return malformed("%s: %v", what, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		kind := "an object"
		if want == '[' {
			kind = "an array"
		}
		return malformed("%s must be %s", what, kind)
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

func (jr *jsonRecord) input() (Input, error) {
	var in Input
	var err error
	if in.Key, _, err = jsonBytes("key", jr.Key, jr.KeyB64); err != nil {
		return in, err
	}
	var present bool
	if in.Value, present, err = jsonBytes("value", jr.Value, jr.ValueB64); err != nil {
		return in, err
	}
	if !present {
		return in, errors.New("value is missing (give \"value\" or \"value_b64\")")
	}
	if in.Headers, err = jsonHeaders(jr.Headers); err != nil {
		return in, err
	}
	if jr.Partition != nil && !isNull(jr.Partition) {
		p, err := jsonInt(jr.Partition, "partition")
		if err != nil {
			return in, err
		}
		if p < -1<<31 || p > 1<<31-1 {
			return in, fmt.Errorf("partition %d is out of range", p)
		}
		in.Partition, in.Explicit = int32(p), true
	}
	if jr.Timestamp != nil && !isNull(jr.Timestamp) {
		if in.Timestamp, err = jsonInt(jr.Timestamp, "timestamp"); err != nil {
			return in, err
		}
		if in.Timestamp < 0 {
			return in, fmt.Errorf("timestamp %d is negative (want milliseconds since the epoch, or 0 for now)", in.Timestamp)
		}
	}
	return in, nil
}

// jsonBytes reads a key or value given either as text (name) or as base64
// (name_b64). A string is taken as its UTF-8 bytes, null as Kafka's null, and
// any other JSON value (object, array, number, boolean) as its compact JSON
// text, the way Confluent's JSON embedded format stores it. present reports
// whether either field was given.
func jsonBytes(name string, text, b64 json.RawMessage) (b []byte, present bool, err error) {
	if text != nil {
		text = bytes.TrimSpace(text) // the decoder gives none; cheap insurance
	}
	switch {
	case text != nil && b64 != nil:
		return nil, true, fmt.Errorf("%s and %s_b64 are both given", name, name)
	case b64 != nil:
		if isNull(b64) {
			return nil, true, nil
		}
		var s string
		if err := json.Unmarshal(b64, &s); err != nil {
			return nil, true, fmt.Errorf("%s_b64 must be a base64 string", name)
		}
		if b, err = base64.StdEncoding.DecodeString(s); err != nil {
			return nil, true, fmt.Errorf("%s_b64 is not valid base64: %v", name, err)
		}
		return b, true, nil
	case text != nil:
		if isNull(text) {
			return nil, true, nil
		}
		if text[0] == '"' {
			if raw := text[1 : len(text)-1]; bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
				// No escapes: the decoder has checked the literal, and its
				// bytes are the string's.
				return append([]byte{}, raw...), true, nil
			}
			var s string
			if err := json.Unmarshal(text, &s); err != nil {
				return nil, true, fmt.Errorf("%s: %v", name, err)
			}
			return []byte(s), true, nil
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, text); err != nil {
			return nil, true, fmt.Errorf("%s: %v", name, err)
		}
		return buf.Bytes(), true, nil
	}
	return nil, false, nil
}

func jsonInt(raw json.RawMessage, name string) (int64, error) {
	var n json.Number
	// json.Number also takes a quoted number; a client sending one has a bug
	// worth telling about.
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		return 0, fmt.Errorf("%s must be an integer", name)
	}
	v, err := n.Int64()
	if err != nil {
		return 0, fmt.Errorf("%s %s is not a 64-bit integer", name, n)
	}
	return v, nil
}

// jsonHeaders reads the headers object in document order (Kafka headers are
// ordered and keys may repeat). Values are strings or null.
func jsonHeaders(raw json.RawMessage) ([]record.RecordHeader, error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if d, ok := tok.(json.Delim); err != nil || !ok || d != '{' {
		return nil, errors.New("headers must be an object of strings")
	}
	var hs []record.RecordHeader
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("headers: %v", err)
		}
		key, _ := tok.(string)
		if tok, err = dec.Token(); err != nil {
			return nil, fmt.Errorf("headers: %v", err)
		}
		switch v := tok.(type) {
		case nil:
			hs = append(hs, record.RecordHeader{Key: key})
		case string:
			hs = append(hs, record.RecordHeader{Key: key, Value: []byte(v)})
		default:
			return nil, fmt.Errorf("header %q: value must be a string or null", key)
		}
	}
	return hs, nil
}
