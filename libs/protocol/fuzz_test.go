package protocol

import (
	"bytes"
	"testing"
)

// FuzzDecodeFrame feeds arbitrary bytes to the frame reader and the decoders: they
// must return errors, never panic, and never report a payload outside the frame.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(encodeRequest(f, RequestHeader{APIKey: APIProduce, CorrelationID: 1}, &ProduceRequest{Topic: "t", Acks: -1}, []byte("payload")))
	f.Add(encodeRequest(f, RequestHeader{APIKey: APIFetch, CorrelationID: 2}, &FetchRequest{Topic: "t", MaxBytes: 100}, nil))
	f.Add(encodeRequest(f, RequestHeader{APIKey: APIListOffsets, CorrelationID: 3}, &ListOffsetsRequest{Topic: "t", Timestamp: -2}, nil))
	f.Add(encodeRequest(f, RequestHeader{APIKey: APIDescribeReplicas, CorrelationID: 4}, &DescribeReplicasRequest{Topic: "t"}, nil))
	f.Add(encodeRequest(f, RequestHeader{APIKey: APIWriteTxnMarker, CorrelationID: 5}, &WriteTxnMarkerRequest{Topic: "t", ProducerID: 3, Commit: true}, nil))
	f.Add(encodeRequest(f, RequestHeader{APIKey: APIWriteTxnMarkers, CorrelationID: 6}, &WriteTxnMarkersRequest{
		Markers: []TxnMarker{{Topic: "t", ProducerID: 3, Commit: true}, {Topic: "u", Partition: 2, ProducerID: 4, ProducerEpoch: 1}}, TimeoutMs: 5}, nil))
	f.Add([]byte{0, 0, 0, 1, 0xc0})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := NewFrameReader(bytes.NewReader(data), 1<<20)
		d := NewDecoder()
		for {
			frame, err := fr.Next()
			if err != nil {
				return
			}
			var h RequestHeader
			if err := d.Request(frame, &h); err != nil {
				continue
			}
			var body Body
			switch h.APIKey {
			case APIProduce:
				body = &ProduceRequest{}
			case APIFetch:
				body = &FetchRequest{}
			case APIDescribeReplicas:
				body = &DescribeReplicasRequest{}
			case APIDeleteRecords:
				body = &DeleteRecordsRequest{}
			case APIWriteTxnMarker:
				body = &WriteTxnMarkerRequest{}
			case APIWriteTxnMarkers:
				body = &WriteTxnMarkersRequest{}
			case APIDescribeProducers:
				body = &DescribeProducersRequest{}
			default:
				body = &ListOffsetsRequest{}
			}
			if err := d.Body(body); err == nil && len(d.Payload()) != int(h.PayloadLen) {
				t.Fatalf("payload %d bytes, header says %d", len(d.Payload()), h.PayloadLen)
			}
			var rh ResponseHeader
			if d.Response(frame, &rh) == nil {
				_ = d.Body(&FetchResponse{})
				_ = d.Body(&DescribeReplicasResponse{})
				_ = d.Body(&WriteTxnMarkerResponse{})
				_ = d.Body(&WriteTxnMarkersResponse{})
				_ = d.Body(&DescribeProducersResponse{})
			}
		}
	})
}
