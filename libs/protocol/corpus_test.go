package protocol

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFuzzCorpus regenerates the committed seed corpus of FuzzDecodeFrame
// when SLUICE_WRITE_FUZZ_CORPUS=1; otherwise it checks the corpus is there.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeFrame")
	if os.Getenv("SLUICE_WRITE_FUZZ_CORPUS") != "1" {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) == 0 {
			t.Fatalf("seed corpus missing in %s (regenerate with SLUICE_WRITE_FUZZ_CORPUS=1): %v", dir, err)
		}
		return
	}
	seeds := map[string][]byte{
		"produce":      encodeRequest(t, RequestHeader{APIKey: APIProduce, CorrelationID: 1, ClientID: "c"}, &ProduceRequest{Topic: "t", Acks: -1, TimeoutMs: 100}, []byte("payload")),
		"fetch":        encodeRequest(t, RequestHeader{APIKey: APIFetch, CorrelationID: 2}, &FetchRequest{Topic: "t", MaxBytes: 1 << 20, ReplicaID: -1}, nil),
		"list-offsets": encodeRequest(t, RequestHeader{APIKey: APIListOffsets, CorrelationID: 3}, &ListOffsetsRequest{Topic: "t", Timestamp: -2}, nil),
		"nil-body":     {0, 0, 0, 7, 0x95, 0, 0, 1, 0xa0, 0, 0xc0},
		"two-frames":   append(encodeRequest(t, RequestHeader{APIKey: APIFetch}, &FetchRequest{Topic: "a"}, nil), encodeRequest(t, RequestHeader{APIKey: APIFetch}, &FetchRequest{Topic: "b"}, nil)...),
		"short-payload": func() []byte {
			b, _ := NewEncoder().Request(&RequestHeader{APIKey: APIProduce}, &ProduceRequest{Topic: "t"}, 50)
			return append([]byte(nil), b...)
		}(),
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
