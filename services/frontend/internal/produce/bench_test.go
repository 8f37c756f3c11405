package produce

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/protocol"
)

// benchBody returns a body of n records of size-byte values with short keys.
func benchBody(b *testing.B, f Format, n, size int) []byte {
	val := strings.Repeat("v", size)
	if f == FormatJSON {
		var sb strings.Builder
		sb.WriteString(`{"records":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"key":"key-%d","value":%q}`, i, val)
		}
		sb.WriteString(`]}`)
		return []byte(sb.String())
	}
	recs := make([]any, n)
	for i := range recs {
		recs[i] = map[string]any{"key": []byte(fmt.Sprintf("key-%d", i)), "value": []byte(val)}
	}
	return mustMsgpack(b, map[string]any{"records": recs})
}

func benchmarkParse(b *testing.B, f Format) {
	body := benchBody(b, f, 1000, 100)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(f, body, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseJSON(b *testing.B)    { benchmarkParse(b, FormatJSON) }
func BenchmarkParseMsgpack(b *testing.B) { benchmarkParse(b, FormatMsgpack) }

// BenchmarkProduce measures partitioning and batch building for a request of
// 1000 keyed records over 4 partitions, with a sender that answers at once.
func BenchmarkProduce(b *testing.B) {
	meta := newFakeMeta()
	meta.set("t", "a:1", "a:1", "a:1", "a:1")
	p, err := NewProducer(DefaultConfig(), meta, discardSender{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	body := benchBody(b, FormatMsgpack, 1000, 100)
	recs, err := Parse(FormatMsgpack, body, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Produce(context.Background(), "t", protocol.AcksAll, recs); err != nil {
			b.Fatal(err)
		}
	}
}

// discardSender answers every request at once.
type discardSender struct{}

func (discardSender) Produce(_ context.Context, _ string, _ *protocol.ProduceRequest, batch []byte) (protocol.ProduceResponse, error) {
	if len(batch) == 0 {
		return protocol.ProduceResponse{}, protocol.InvalidRequest.Err("empty")
	}
	return protocol.ProduceResponse{}, nil
}
