package fetch

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// payload builds stamped batches, as a leader would send them.
func payload(t testing.TB, base int64, batches ...[]record.Record) []byte {
	t.Helper()
	var out []byte
	for _, recs := range batches {
		b := record.NewBuilder(record.CodecNone)
		for _, r := range recs {
			b.Append(r)
		}
		batch, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		record.SetBaseOffset(batch, base)
		base += int64(len(recs))
		out = append(out, batch...)
	}
	return out
}

var encodeCases = []record.Record{
	{Timestamp: 5, Key: []byte("k"), Value: []byte("plain \"quoted\" \\ \n\t\x01 é")},
	{Timestamp: 6, Key: nil, Value: nil},
	{Timestamp: 7, Key: []byte{}, Value: []byte{0xff, 0x00, 0xfe}},
	{Timestamp: 8, Value: []byte("v"), Headers: []record.RecordHeader{{Key: "a", Value: []byte("x")}, {Key: "a", Value: nil}, {Key: "b", Value: []byte("")}}},
	{Timestamp: 9, Value: []byte("v"), Headers: []record.RecordHeader{{Key: "bin", Value: []byte{0xc3}}, {Key: "t", Value: []byte("ok")}}},
}

func TestAppendJSON(t *testing.T) {
	r := &Result{Offset: 11, HighWatermark: 20, LastStableOffset: 18, Payload: payload(t, 10, encodeCases[:3], encodeCases[3:])}
	b, err := AppendJSON(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"records":[` +
		`{"offset":11,"timestamp":6,"key":null,"value":null},` +
		`{"offset":12,"timestamp":7,"key":"","value_b64":"/wD+"},` +
		`{"offset":13,"timestamp":8,"key":null,"value":"v","headers":{"a":"x","a":null,"b":""}},` +
		`{"offset":14,"timestamp":9,"key":null,"value":"v","headers_b64":{"bin":"ww==","t":"b2s="}}` +
		`],"next_offset":15,"high_watermark":20,"last_stable_offset":18}`
	if string(b) != want {
		t.Fatalf("got\n%s\nwant\n%s", b, want)
	}
	r.Offset = 10
	b, _ = AppendJSON(nil, r)
	var v struct {
		Records []struct {
			Value string `json:"value"`
		} `json:"records"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Records[0].Value != string(encodeCases[0].Value) {
		t.Fatalf("escaping: %s %v", b, err)
	}
	// Nothing fetched: next_offset stays where the fetch started.
	b, _ = AppendJSON(nil, &Result{Offset: 7, HighWatermark: 7, LastStableOffset: 7})
	if string(b) != `{"records":[],"next_offset":7,"high_watermark":7,"last_stable_offset":7}` {
		t.Fatalf("empty: %s", b)
	}
}

func TestAppendMsgpack(t *testing.T) {
	r := &Result{Offset: 0, HighWatermark: 5, LastStableOffset: 4, Payload: payload(t, 0, encodeCases)}
	b, err := AppendMsgpack(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Records []struct {
			Offset    int64             `msgpack:"offset"`
			Timestamp int64             `msgpack:"timestamp"`
			Key       []byte            `msgpack:"key"`
			Value     []byte            `msgpack:"value"`
			Headers   map[string][]byte `msgpack:"headers"`
		} `msgpack:"records"`
		NextOffset    int64 `msgpack:"next_offset"`
		HighWatermark int64 `msgpack:"high_watermark"`
		LastStable    int64 `msgpack:"last_stable_offset"`
	}
	if err := msgpack.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Records) != 5 || v.NextOffset != 5 || v.HighWatermark != 5 || v.LastStable != 4 {
		t.Fatalf("%+v", v)
	}
	got := v.Records[2]
	if got.Offset != 2 || got.Timestamp != 7 || got.Key == nil || len(got.Key) != 0 || !bytes.Equal(got.Value, []byte{0xff, 0, 0xfe}) {
		t.Fatalf("record 2: %+v", got)
	}
	if v.Records[1].Key != nil || v.Records[1].Value != nil || !bytes.Equal(v.Records[4].Headers["bin"], []byte{0xc3}) {
		t.Fatalf("nulls or headers: %+v %+v", v.Records[1], v.Records[4])
	}
}

func TestCorruptPayload(t *testing.T) {
	good := payload(t, 0, encodeCases[:2])
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xff // CRC mismatch
	if _, err := AppendJSON(nil, &Result{Payload: bad}); protocol.CodeOf(err) != protocol.StorageError {
		t.Fatalf("corrupt first batch: %v", err)
	}
	// After good records, a corrupt batch ends the answer; the next fetch
	// starts at it (and reports it then).
	both := append(append([]byte(nil), good...), payload(t, 2, encodeCases[2:3])...)
	both[len(both)-1] ^= 0xff
	b, err := AppendJSON(nil, &Result{Payload: both})
	if err != nil || !bytes.HasSuffix(b, []byte(`],"next_offset":2,"high_watermark":0,"last_stable_offset":0}`)) || bytes.Count(b, []byte(`"offset"`)) != 2 {
		t.Fatalf("%s %v", b, err)
	}
	b, err = AppendMsgpack(nil, &Result{Payload: both})
	var v struct {
		Records    []any `msgpack:"records"`
		NextOffset int64 `msgpack:"next_offset"`
	}
	if err != nil || msgpack.Unmarshal(b, &v) != nil || len(v.Records) != 2 || v.NextOffset != 2 {
		t.Fatalf("msgpack: %+v %v", v, err)
	}
}

// FuzzEncode feeds arbitrary leader payloads to both encoders: they must not
// panic, and what they produce must be valid JSON and msgpack. The seed
// corpus is in testdata/fuzz/FuzzEncode.
func FuzzEncode(f *testing.F) {
	f.Add(payload(f, 0, encodeCases))
	f.Add([]byte{})
	f.Add([]byte("not a batch at all, but long enough to hold a header of sixty-one bytes"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &Result{Payload: data}
		if b, err := AppendJSON(nil, r); err == nil && !json.Valid(b) {
			t.Fatalf("invalid JSON %q", b)
		}
		if b, err := AppendMsgpack(nil, r); err == nil {
			var v any
			if err := msgpack.Unmarshal(b, &v); err != nil {
				t.Fatalf("invalid msgpack: %v", err)
			}
		}
	})
}

// TestReadCommittedDropsAborted: a read_committed answer leaves out the
// records of the aborted transactions the leader listed; a
// read_uncommitted one shows them.
func TestReadCommittedDropsAborted(t *testing.T) {
	txn := func(pid int64, base int64, value string) []byte {
		b := record.NewBuilder(record.CodecNone)
		b.SetProducer(pid, 0, 0)
		b.SetTransactional(true)
		b.Append(record.Record{Value: []byte(value)})
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		out = bytes.Clone(out)
		record.SetBaseOffset(out, base)
		return out
	}
	abort, err := record.BuildMarker(2, 0, record.Marker{Type: record.ControlAbort}, 0)
	if err != nil {
		t.Fatal(err)
	}
	record.SetBaseOffset(abort, 2)
	data := slices.Concat(txn(1, 0, "kept"), txn(2, 1, "dropped"), abort, txn(2, 3, "later"))
	for isolation, want := range map[int8]string{
		protocol.ReadCommitted:   `{"records":[{"offset":0,"timestamp":0,"key":null,"value":"kept"},{"offset":3,"timestamp":0,"key":null,"value":"later"}],"next_offset":4,"high_watermark":4,"last_stable_offset":4}`,
		protocol.ReadUncommitted: `{"records":[{"offset":0,"timestamp":0,"key":null,"value":"kept"},{"offset":1,"timestamp":0,"key":null,"value":"dropped"},{"offset":3,"timestamp":0,"key":null,"value":"later"}],"next_offset":4,"high_watermark":4,"last_stable_offset":4}`,
	} {
		r := &Result{HighWatermark: 4, LastStableOffset: 4, Isolation: isolation, Payload: data,
			Aborted: []protocol.AbortedTxn{{ProducerID: 2, FirstOffset: 1}}}
		b, err := AppendJSON(nil, r)
		if err != nil || string(b) != want {
			t.Errorf("isolation %d: %s, %v\nwant %s", isolation, b, err, want)
		}
	}
}
