package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"slices"
	"testing"
)

func encodeRequest(t testing.TB, h RequestHeader, body Body, payload []byte) []byte {
	t.Helper()
	prefix, err := NewEncoder().Request(&h, body, len(payload))
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte(nil), prefix...), payload...)
}

func TestRequestRoundTrip(t *testing.T) {
	cases := []struct {
		key     APIKey
		body    Body
		empty   Body
		payload []byte
	}{
		{APIProduce, &ProduceRequest{Topic: "orders", Partition: 3, Acks: AcksAll, TimeoutMs: 5000}, &ProduceRequest{}, []byte("batch-bytes")},
		{APIFetch, &FetchRequest{Topic: "t", Partition: 0, Offset: 1 << 40, MaxBytes: 1 << 20, MaxWaitMs: 500, MinBytes: 1, ReplicaID: -1}, &FetchRequest{}, nil},
		{APIListOffsets, &ListOffsetsRequest{Topic: "t", Partition: 7, Timestamp: TimestampEarliest, CurrentLeaderEpoch: 3}, &ListOffsetsRequest{}, nil},
		{APIDeleteRecords, &DeleteRecordsRequest{Topic: "t", Partition: 2, Offset: 77}, &DeleteRecordsRequest{}, nil},
		{APIWriteTxnMarker, &WriteTxnMarkerRequest{Topic: "t", Partition: 3, ProducerID: 1 << 40, ProducerEpoch: 7, Commit: true,
			CoordinatorEpoch: 12, TimeoutMs: 5000}, &WriteTxnMarkerRequest{}, nil},
		{APIFetch, &FetchRequest{Topic: "t", Offset: 9, MaxBytes: 10, ReplicaID: 2, CurrentLeaderEpoch: 4, FlushedOffset: 7}, &FetchRequest{}, nil},
		{APIOffsetForLeaderEpoch, &OffsetForLeaderEpochRequest{Topic: "t", Partition: 1, CurrentLeaderEpoch: 5, LeaderEpoch: 3}, &OffsetForLeaderEpochRequest{}, nil},
		{APIWriteTxnMarkers, &WriteTxnMarkersRequest{Markers: []TxnMarker{{Topic: "t", Partition: 3, ProducerID: 1 << 40, ProducerEpoch: 7, Commit: true, CoordinatorEpoch: 2},
			{Topic: "u", ProducerID: 9}}, TimeoutMs: 5000}, &WriteTxnMarkersRequest{}, nil},
		{APIDescribeProducers, &DescribeProducersRequest{Topic: "t", Partition: 5}, &DescribeProducersRequest{}, nil},
	}
	for _, c := range cases {
		t.Run(c.key.String(), func(t *testing.T) {
			frame := encodeRequest(t, RequestHeader{APIKey: c.key, Version: 1, CorrelationID: 99, ClientID: "cli"}, c.body, c.payload)
			fr := NewFrameReader(bytes.NewReader(frame), 0)
			got, err := fr.Next()
			if err != nil {
				t.Fatal(err)
			}
			d := NewDecoder()
			var h RequestHeader
			if err := d.Request(got, &h); err != nil {
				t.Fatal(err)
			}
			if h.APIKey != c.key || h.Version != 1 || h.CorrelationID != 99 || h.ClientID != "cli" || int(h.PayloadLen) != len(c.payload) {
				t.Fatalf("header %+v", h)
			}
			if err := d.Body(c.empty); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.body, c.empty) {
				t.Fatalf("body %+v, want %+v", c.empty, c.body)
			}
			if !bytes.Equal(d.Payload(), c.payload) && len(c.payload) > 0 {
				t.Fatalf("payload %q", d.Payload())
			}
		})
	}
}

func TestResponseRoundTripWithError(t *testing.T) {
	h := ResponseHeader{CorrelationID: 5, ErrorCode: NotLeaderOrFollower, ErrorMessage: "leader is node 2"}
	var body FetchResponse
	got := responseRoundTrip(t, h, nil, &body)
	if !errors.Is(got.Err(), &Error{Code: NotLeaderOrFollower}) || got.CorrelationID != 5 {
		t.Fatalf("got %+v", got)
	}
}

func TestDecoderSkipsUnknownTrailingFields(t *testing.T) {
	// A newer peer appends a field to the fetch response body.
	h := ResponseHeader{CorrelationID: 1}
	enc := NewEncoder()
	prefix, err := enc.Response(&h, extraField{&FetchResponse{HighWatermark: 10, LogStartOffset: 2, LogEndOffset: 12}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	frame := append(append([]byte(nil), prefix[LengthSize:]...), 'a', 'b', 'c')
	d := NewDecoder()
	var got ResponseHeader
	if err := d.Response(frame, &got); err != nil {
		t.Fatal(err)
	}
	var body FetchResponse
	if err := d.Body(&body); err != nil {
		t.Fatal(err)
	}
	if body.HighWatermark != 10 || body.LogEndOffset != 12 || string(d.Payload()) != "abc" {
		t.Fatalf("body %+v payload %q", body, d.Payload())
	}
}

func TestFetchResponseThrottleIsOptional(t *testing.T) {
	for _, tc := range []struct {
		name string
		body Body
		want int32
	}{
		{"current", &FetchResponse{HighWatermark: 7, ThrottleMs: 250}, 250},
		{"from before quotas", oldFetchResponse{&FetchResponse{HighWatermark: 7, ThrottleMs: 250}}, 0},
	} {
		prefix, err := NewEncoder().Response(&ResponseHeader{CorrelationID: 1}, tc.body, 0)
		if err != nil {
			t.Fatal(err)
		}
		d := NewDecoder()
		var h ResponseHeader
		var got FetchResponse
		if err := d.Response(prefix[LengthSize:], &h); err != nil {
			t.Fatal(err)
		}
		if err := d.Body(&got); err != nil || got.HighWatermark != 7 || got.ThrottleMs != tc.want {
			t.Fatalf("%s: %+v, %v; want throttle %d", tc.name, got, err, tc.want)
		}
	}
}

// TestFetchTransactionFields: isolation, last stable offset and aborted
// transactions round-trip; an answer without them (a node from before
// transactions) reads as LSO = high watermark, none aborted; a request
// without isolation reads as read_uncommitted, and an unknown level is
// refused.
func TestFetchTransactionFields(t *testing.T) {
	roundTrip := func(body Body, out Body) error {
		prefix, err := NewEncoder().Response(&ResponseHeader{CorrelationID: 1}, body, 0)
		if err != nil {
			t.Fatal(err)
		}
		d := NewDecoder()
		var h ResponseHeader
		if err := d.Response(prefix[LengthSize:], &h); err != nil {
			t.Fatal(err)
		}
		return d.Body(out)
	}
	want := FetchResponse{HighWatermark: 9, LastStableOffset: 4, Aborted: []AbortedTxn{{ProducerID: 7, FirstOffset: 1}, {ProducerID: 8, FirstOffset: 3}}}
	var got FetchResponse
	if err := roundTrip(&want, &got); err != nil || got.LastStableOffset != 4 || !slices.Equal(got.Aborted, want.Aborted) {
		t.Fatalf("round trip %+v, %v", got, err)
	}
	got = FetchResponse{}
	if err := roundTrip(oldFetchResponse{&FetchResponse{HighWatermark: 7}}, &got); err != nil || got.LastStableOffset != 7 || got.Aborted != nil {
		t.Fatalf("old answer %+v, %v", got, err)
	}
	var req FetchRequest
	if err := roundTrip(&FetchRequest{Topic: "t", Isolation: ReadCommitted}, &req); err != nil || req.Isolation != ReadCommitted {
		t.Fatalf("request %+v, %v", req, err)
	}
	req = FetchRequest{}
	if err := roundTrip(oldFetch{}, &req); err != nil || req.Isolation != ReadUncommitted {
		t.Fatalf("old request %+v, %v", req, err)
	}
	if err := roundTrip(&FetchRequest{Topic: "t", Isolation: 2}, &req); err == nil {
		t.Fatal("isolation level 2 accepted")
	}
	var lreq ListOffsetsRequest
	if err := roundTrip(&ListOffsetsRequest{Topic: "t", Isolation: ReadCommitted}, &lreq); err != nil || lreq.Isolation != ReadCommitted {
		t.Fatalf("list offsets request %+v, %v", lreq, err)
	}
	if err := roundTrip(&ListOffsetsRequest{Topic: "t", Isolation: 3}, &lreq); err == nil {
		t.Fatal("list offsets isolation level 3 accepted")
	}
	odd := FetchResponse{Aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 1}}}
	if err := roundTrip(oddAborted{&odd}, &got); err == nil {
		t.Fatal("an odd aborted array was accepted")
	}
}

func TestMalformedFrames(t *testing.T) {
	good := encodeRequest(t, RequestHeader{APIKey: APIFetch, CorrelationID: 1}, &FetchRequest{Topic: "t"}, nil)[LengthSize:]
	cases := map[string][]byte{
		"empty":            {},
		"not an array":     {0x01},
		"truncated header": good[:3],
		"truncated body":   good[:len(good)-2],
		"payload too long": func() []byte {
			b, _ := NewEncoder().Request(&RequestHeader{APIKey: APIFetch}, &FetchRequest{}, 100)
			return b[LengthSize:]
		}(),
		"garbage":        bytes.Repeat([]byte{0xff}, 40),
		"trailing bytes": append(append([]byte(nil), good...), 1, 2, 3),
	}
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			d := NewDecoder()
			var h RequestHeader
			err := d.Request(frame, &h)
			if err == nil {
				err = d.Body(&FetchRequest{})
			}
			if !errors.Is(err, ErrMalformedFrame) {
				t.Fatalf("err = %v, want ErrMalformedFrame", err)
			}
		})
	}
}

func TestFrameReaderLimits(t *testing.T) {
	var b bytes.Buffer
	var lb [4]byte
	binary.BigEndian.PutUint32(lb[:], 1000)
	b.Write(lb[:])
	if _, err := NewFrameReader(&b, 100).Next(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v", err)
	}
	binary.BigEndian.PutUint32(lb[:], 10)
	b.Reset()
	b.Write(lb[:])
	b.Write([]byte("short"))
	if _, err := NewFrameReader(&b, 0).Next(); err == nil {
		t.Fatal("truncated frame accepted")
	}
}

func TestErrorTable(t *testing.T) {
	seen := map[string]bool{}
	for _, i := range Codes() {
		if i.Name == "" || i.Description == "" || seen[i.Name] {
			t.Fatalf("bad or duplicate entry %+v", i)
		}
		seen[i.Name] = true
	}
	if !NotLeaderOrFollower.Retriable() || InvalidRequest.Retriable() {
		t.Fatal("retriable flags wrong")
	}
	if CodeOf(nil) != None || CodeOf(errors.New("x")) != UnknownServerError || CodeOf(OffsetOutOfRange.Err("x")) != OffsetOutOfRange {
		t.Fatal("CodeOf wrong")
	}
}

func BenchmarkEncodeFetchResponse(b *testing.B) {
	enc := NewEncoder()
	body := &FetchResponse{HighWatermark: 1 << 30, LogStartOffset: 5, LogEndOffset: 1 << 30}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		h := ResponseHeader{CorrelationID: uint32(i)}
		if _, err := enc.Response(&h, body, 65536); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeProduceRequest(b *testing.B) {
	frame := encodeRequest(b, RequestHeader{APIKey: APIProduce, CorrelationID: 1, ClientID: "frontend-1"}, &ProduceRequest{Topic: "bench", Partition: 1, Acks: AcksAll, TimeoutMs: 3000}, make([]byte, 1024))[LengthSize:]
	d := NewDecoder()
	var req ProduceRequest
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var h RequestHeader
		if err := d.Request(frame, &h); err != nil {
			b.Fatal(err)
		}
		if err := d.Body(&req); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDeeplyNestedUnknownFieldsAreRefusedWithoutRecursion(t *testing.T) {
	// A request header with one extra field: 1M nested one-element arrays.
	// msgpack's own Skip would recurse a million levels deep.
	var b bytes.Buffer
	b.Write([]byte{0x96, 0x00, 0x00, 0x01, 0xa0, 0x00})
	b.Write(bytes.Repeat([]byte{0x91}, 1<<20))
	b.WriteByte(0xc0)
	d := NewDecoder()
	var h RequestHeader
	if err := d.Request(b.Bytes(), &h); !errors.Is(err, ErrMalformedFrame) {
		t.Fatalf("err = %v, want ErrMalformedFrame", err)
	}
	// A few nested unknown fields are fine and skipped.
	var ok bytes.Buffer
	ok.Write([]byte{0x96, 0x00, 0x00, 0x01, 0xa0, 0x00, 0x92, 0x91, 0x01, 0x81, 0xa1, 'k', 0x02, 0xc0})
	if err := d.Request(ok.Bytes(), &h); err != nil {
		t.Fatalf("nested extra field: %v", err)
	}
}

func TestOlderFetchRequestDefaultsNewFields(t *testing.T) {
	// Seven fields, as a fetcher written before CurrentLeaderEpoch sends.
	frame := encodeRequest(t, RequestHeader{APIKey: APIFetch}, oldFetch{}, nil)
	d := NewDecoder()
	var h RequestHeader
	if err := d.Request(frame[LengthSize:], &h); err != nil {
		t.Fatal(err)
	}
	var r FetchRequest
	if err := d.Body(&r); err != nil {
		t.Fatal(err)
	}
	if r.CurrentLeaderEpoch != -1 || r.FlushedOffset != -1 || r.Topic != "t" || r.ReplicaID != -1 {
		t.Fatalf("%+v", r)
	}
}

// TestWriteTxnMarkersResultsRoundTrip: each marker's outcome survives the
// wire, a refusal with its code and message.
func TestWriteTxnMarkersResultsRoundTrip(t *testing.T) {
	h := ResponseHeader{CorrelationID: 5}
	in := &WriteTxnMarkersResponse{Results: []TxnMarkerResult{{Offset: 41}, {Offset: -1, Err: NotLeaderOrFollower.Err("u-0 is led by node 2")}, {Offset: 7}}}
	var out WriteTxnMarkersResponse
	responseRoundTrip(t, h, in, &out)
	if len(out.Results) != 3 || out.Results[0].Offset != 41 || out.Results[0].Err != nil || out.Results[2].Offset != 7 ||
		!errors.Is(out.Results[1].Err, &Error{Code: NotLeaderOrFollower}) || out.Results[1].Err.Error() != in.Results[1].Err.Error() {
		t.Fatalf("results %+v", out.Results)
	}
}

// responseRoundTrip encodes a response of header h and body in, decodes it
// into out and returns the decoded header.
func responseRoundTrip(t *testing.T, h ResponseHeader, in, out Body) ResponseHeader {
	t.Helper()
	prefix, err := NewEncoder().Response(&h, in, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder()
	var got ResponseHeader
	if err := d.Response(prefix[LengthSize:], &got); err != nil {
		t.Fatal(err)
	}
	if err := d.Body(out); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestDescribeProducersRoundTrip: every producer's fields survive the wire.
func TestDescribeProducersRoundTrip(t *testing.T) {
	in := &DescribeProducersResponse{Producers: []ProducerInfo{
		{ProducerID: 1 << 40, Epoch: 7, LastSequence: 99, CurrentTxnStartOffset: 1234},
		{ProducerID: 3, Epoch: 0, LastSequence: -1, CurrentTxnStartOffset: -1},
	}}
	var out DescribeProducersResponse
	responseRoundTrip(t, ResponseHeader{CorrelationID: 9}, in, &out)
	if !reflect.DeepEqual(in, &out) {
		t.Fatalf("producers %+v, want %+v", out, in)
	}
}
