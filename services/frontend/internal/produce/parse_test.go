package produce

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluicemq/sluice/libs/record"
)

func TestParseContentType(t *testing.T) {
	for _, tc := range []struct {
		ct   string
		want Format
		bad  bool
	}{
		{"", FormatJSON, false},
		{"application/json", FormatJSON, false},
		{"Application/JSON; charset=utf-8", FormatJSON, false},
		{"application/vnd.kafka.json.v2+json", FormatJSON, false},
		{"application/msgpack", FormatMsgpack, false},
		{"application/x-msgpack", FormatMsgpack, false},
		{"application/x-www-form-urlencoded", 0, true},
		{"text/plain", 0, true},
		{"application/vnd.kafka.binary.v2+json", 0, true},
	} {
		got, err := ParseContentType(tc.ct)
		if tc.bad {
			if !errors.Is(err, ErrContentType) {
				t.Errorf("%q: err %v, want ErrContentType", tc.ct, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.ct, got, err, tc.want)
		}
	}
}

func TestParseJSONValid(t *testing.T) {
	body := `{"records":[
		{"key":"k","value":"v","headers":{"h":"x","a":null,"h":"y"},"partition":2,"timestamp":1700000000000},
		{"value":"only"},
		{"key_b64":"AAEC","value_b64":"/w=="},
		{"key":null,"value":null},
		{"key":"","value":""},
		{"value":{"a":[1, 2]},"partition":null,"timestamp":0},
		{"value":"héllo ☃"},
		{ "key" :  "sp"  , "value" :
			"esc\"aped\u00e9" }
	]}`
	recs, err := Parse(FormatJSON, []byte(body), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 8 {
		t.Fatalf("%d records", len(recs))
	}
	r := recs[0]
	if string(r.Key) != "k" || string(r.Value) != "v" || !r.Explicit || r.Partition != 2 || r.Timestamp != 1700000000000 {
		t.Errorf("record 0: %+v", r)
	}
	wantH := []record.RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "a"}, {Key: "h", Value: []byte("y")}}
	if len(r.Headers) != len(wantH) {
		t.Fatalf("headers %+v", r.Headers)
	}
	for i, h := range wantH {
		if r.Headers[i].Key != h.Key || !bytes.Equal(r.Headers[i].Value, h.Value) || (h.Value == nil) != (r.Headers[i].Value == nil) {
			t.Errorf("header %d: %+v, want %+v", i, r.Headers[i], h)
		}
	}
	if recs[1].Key != nil || string(recs[1].Value) != "only" || recs[1].Explicit || recs[1].Timestamp != 0 {
		t.Errorf("record 1: %+v", recs[1])
	}
	if !bytes.Equal(recs[2].Key, []byte{0, 1, 2}) || !bytes.Equal(recs[2].Value, []byte{0xff}) {
		t.Errorf("record 2: %+v", recs[2])
	}
	if recs[3].Key != nil || recs[3].Value != nil {
		t.Errorf("record 3: nulls expected, got %+v", recs[3])
	}
	if recs[4].Key == nil || len(recs[4].Key) != 0 || recs[4].Value == nil || len(recs[4].Value) != 0 {
		t.Errorf("record 4: empty (not null) key and value expected, got %+v", recs[4])
	}
	if string(recs[5].Value) != `{"a":[1,2]}` || recs[5].Explicit {
		t.Errorf("record 5: %q explicit=%v", recs[5].Value, recs[5].Explicit)
	}
	if string(recs[6].Value) != "héllo ☃" {
		t.Errorf("record 6: %q", recs[6].Value)
	}
	if string(recs[7].Key) != "sp" || string(recs[7].Value) != `esc"apedé` {
		t.Errorf("record 7: %q %q", recs[7].Key, recs[7].Value)
	}
}

// malformedCases are bodies refused with ErrMalformed and the reason each must
// name.
var malformedCases = []struct {
	name, body, reason string
}{
	{"not json", `nope`, "invalid character"},
	{"empty body", ``, "EOF"},
	{"array body", `[]`, "must be an object"},
	{"no records", `{}`, `"records" is missing`},
	{"records null", `{"records":null}`, "must be an array"},
	{"records object", `{"records":{}}`, "must be an array"},
	{"empty records", `{"records":[]}`, "no records"},
	{"unknown top field", `{"records":[{"value":"v"}],"x":1}`, `unknown field "x"`},
	{"records twice", `{"records":[{"value":"v"}],"records":[]}`, "given twice"},
	{"trailing data", `{"records":[{"value":"v"}]} {}`, "after the body"},
	{"truncated", `{"records":[{"value":"v"}`, "EOF"},
	{"missing value", `{"records":[{"key":"k"}]}`, "record 0: value is missing"},
	{"second missing value", `{"records":[{"value":"a"},{"key":"k"}]}`, "record 1: value is missing"},
	{"both value fields", `{"records":[{"value":"a","value_b64":"YQ=="}]}`, "value and value_b64 are both given"},
	{"both key fields", `{"records":[{"key":"a","key_b64":"YQ==","value":"v"}]}`, "key and key_b64 are both given"},
	{"bad base64 value", `{"records":[{"value_b64":"!!!"}]}`, "value_b64 is not valid base64"},
	{"bad base64 key", `{"records":[{"key_b64":"YQ","value":"v"}]}`, "key_b64 is not valid base64"},
	{"base64 not string", `{"records":[{"value_b64":5}]}`, "value_b64 must be a base64 string"},
	{"unknown record field", `{"records":[{"value":"v","vlaue":"x"}]}`, `unknown field "vlaue"`},
	{"record not object", `{"records":["v"]}`, "record 0"},
	{"headers not object", `{"records":[{"value":"v","headers":["a"]}]}`, "headers must be an object"},
	{"header value number", `{"records":[{"value":"v","headers":{"a":1}}]}`, `header "a": value must be a string or null`},
	{"partition string", `{"records":[{"value":"v","partition":"1"}]}`, "partition must be an integer"},
	{"partition fraction", `{"records":[{"value":"v","partition":1.5}]}`, "partition 1.5 is not a 64-bit integer"},
	{"partition too big", `{"records":[{"value":"v","partition":4294967296}]}`, "out of range"},
	{"timestamp negative", `{"records":[{"value":"v","timestamp":-1}]}`, "timestamp -1 is negative"},
	{"timestamp string", `{"records":[{"value":"v","timestamp":"now"}]}`, "timestamp must be an integer"},
}

func TestParseJSONMalformed(t *testing.T) {
	for _, tc := range malformedCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(FormatJSON, []byte(tc.body), 100)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v, want ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("err %q does not say %q", err, tc.reason)
			}
		})
	}
}

func TestParseTooManyRecords(t *testing.T) {
	body := `{"records":[{"value":"a"},{"value":"b"},{"value":"c"}]}`
	if _, err := Parse(FormatJSON, []byte(body), 3); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if _, err := Parse(FormatJSON, []byte(body), 2); !errors.Is(err, ErrTooManyRecords) {
		t.Fatalf("json: %v, want ErrTooManyRecords", err)
	}
	mp := mustMsgpack(t, map[string]any{"records": []any{
		map[string]any{"value": "a"}, map[string]any{"value": "b"}, map[string]any{"value": "c"},
	}})
	if _, err := Parse(FormatMsgpack, mp, 2); !errors.Is(err, ErrTooManyRecords) {
		t.Fatalf("msgpack: %v, want ErrTooManyRecords", err)
	}
}

func mustMsgpack(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestParseMsgpackValid(t *testing.T) {
	// Headers go through an ordered encoding by hand: a Go map has no order.
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.EncodeMapLen(1))
	must(e.EncodeString("records"))
	must(e.EncodeArrayLen(3))
	// Record 0: bin key and value, ordered headers, partition, timestamp.
	must(e.EncodeMapLen(5))
	must(e.EncodeString("key"))
	must(e.EncodeBytes([]byte{0, 0xff}))
	must(e.EncodeString("value"))
	must(e.EncodeBytes([]byte("payload")))
	must(e.EncodeString("headers"))
	must(e.EncodeMapLen(2))
	must(e.EncodeString("z"))
	must(e.EncodeBytes([]byte{1}))
	must(e.EncodeString("a"))
	must(e.EncodeNil())
	must(e.EncodeString("partition"))
	must(e.EncodeInt(1))
	must(e.EncodeString("timestamp"))
	must(e.EncodeUint(1700000000000))
	// Record 1: str value, nil key.
	must(e.EncodeMapLen(2))
	must(e.EncodeString("key"))
	must(e.EncodeNil())
	must(e.EncodeString("value"))
	must(e.EncodeString("text"))
	// Record 2: value_b64 and an empty bin key.
	must(e.EncodeMapLen(2))
	must(e.EncodeString("value_b64"))
	must(e.EncodeString("AQI="))
	must(e.EncodeString("key"))
	must(e.EncodeBytes([]byte{}))

	recs, err := Parse(FormatMsgpack, buf.Bytes(), 100)
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	if !bytes.Equal(r.Key, []byte{0, 0xff}) || string(r.Value) != "payload" || !r.Explicit || r.Partition != 1 || r.Timestamp != 1700000000000 {
		t.Errorf("record 0: %+v", r)
	}
	if len(r.Headers) != 2 || r.Headers[0].Key != "z" || r.Headers[1].Key != "a" || r.Headers[1].Value != nil {
		t.Errorf("headers: %+v", r.Headers)
	}
	if recs[1].Key != nil || string(recs[1].Value) != "text" {
		t.Errorf("record 1: %+v", recs[1])
	}
	if !bytes.Equal(recs[2].Value, []byte{1, 2}) || recs[2].Key == nil || len(recs[2].Key) != 0 {
		t.Errorf("record 2: %+v", recs[2])
	}
}

func TestParseMsgpackMalformed(t *testing.T) {
	rec := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	body := func(recs ...any) map[string]any {
		if recs == nil {
			recs = []any{}
		}
		return map[string]any{"records": recs}
	}
	for _, tc := range []struct {
		name   string
		v      any
		raw    []byte
		reason string
	}{
		{name: "not a map", v: []any{1}, reason: "must be a map"},
		{name: "nil body", v: nil, reason: "must be a map"},
		{name: "no records", v: map[string]any{}, reason: `"records" is missing`},
		{name: "unknown field", v: map[string]any{"records": []any{}, "zzz": 1}, reason: `unknown field "zzz"`},
		{name: "records not array", v: map[string]any{"records": "x"}, reason: "must be an array"},
		{name: "empty records", v: body(), reason: "no records"},
		{name: "record not map", v: body("v"), reason: "record 0: must be a map"},
		{name: "missing value", v: body(rec("key", "k")), reason: "record 0: value is missing"},
		{name: "both values", v: body(rec("value", "a", "value_b64", "YQ==")), reason: "value and value_b64 are both given"},
		{name: "both keys", v: body(rec("value", "a", "key", "a", "key_b64", "YQ==")), reason: "key and key_b64 are both given"},
		{name: "bad base64", v: body(rec("value_b64", "%%%")), reason: "value_b64 is not valid base64"},
		{name: "value int", v: body(rec("value", 5)), reason: "value must be bin, str or nil"},
		{name: "unknown record field", v: body(rec("value", "a", "offset", 3)), reason: `unknown field "offset"`},
		{name: "headers not map", v: body(rec("value", "a", "headers", []any{"x"})), reason: "headers must be a map"},
		{name: "header value int", v: body(rec("value", "a", "headers", map[string]any{"h": 1})), reason: `header "h" must be bin, str or nil`},
		{name: "partition string", v: body(rec("value", "a", "partition", "1")), reason: "partition must be an integer"},
		{name: "partition float", v: body(rec("value", "a", "partition", 1.5)), reason: "partition must be an integer"},
		{name: "partition too big", v: body(rec("value", "a", "partition", int64(1)<<40)), reason: "out of range"},
		{name: "timestamp negative", v: body(rec("value", "a", "timestamp", -5)), reason: "timestamp -5 is negative"},
		{name: "timestamp too big", v: body(rec("value", "a", "timestamp", uint64(1)<<63)), reason: "out of range"},
		{name: "trailing bytes", raw: append(mustMsgpack(t, body(rec("value", "a"))), 0xc0), reason: "1 bytes after"},
		{name: "truncated", raw: mustMsgpack(t, body(rec("value", "abcdef")))[:12], reason: "record 0"},
		{name: "bin longer than body", raw: []byte{0x81, 0xa7, 'r', 'e', 'c', 'o', 'r', 'd', 's', 0x91, 0x81, 0xa5, 'v', 'a', 'l', 'u', 'e', 0xc6, 0x7f, 0xfe, 0xff, 0xff}, reason: "declares 2147418111 bytes, 0 left"},
		{name: "key name longer than body", raw: []byte{0x81, 0xdb, 0xff, 0xff, 0xff, 0xff, 'r'}, reason: "declares 4294967295 bytes"},
		{name: "huge declared array", raw: []byte{0x81, 0xa7, 'r', 'e', 'c', 'o', 'r', 'd', 's', 0xdd, 0, 0, 0, 50}, reason: "record 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw
			if raw == nil {
				raw = mustMsgpack(t, tc.v)
			}
			_, err := Parse(FormatMsgpack, raw, 100)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v, want ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("err %q does not say %q", err, tc.reason)
			}
		})
	}
}

// TestParseMsgpackDuplicateField: a field given twice is refused rather than
// silently taking the last value.
func TestParseMsgpackDuplicateField(t *testing.T) {
	raw := []byte{0x81, 0xa7, 'r', 'e', 'c', 'o', 'r', 'd', 's', 0x91, 0x82, 0xa5, 'v', 'a', 'l', 'u', 'e', 0xa1, 'a', 0xa5, 'v', 'a', 'l', 'u', 'e', 0xa1, 'b'}
	_, err := Parse(FormatMsgpack, raw, 100)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), `"value" given twice`) {
		t.Fatalf("err %v", err)
	}
}
