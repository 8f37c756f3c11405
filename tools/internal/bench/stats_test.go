package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*want }

func TestLatencyPercentiles(t *testing.T) {
	l := NewLatencies()
	if l.Summary() != nil {
		t.Fatal("empty histogram has a summary")
	}
	for i := 1; i <= 10_000; i++ { // 0.1ms ... 1000ms, uniform
		l.Record(time.Duration(i) * 100 * time.Microsecond)
	}
	s := l.Summary()
	if s.Count != 10_000 {
		t.Fatalf("count %d", s.Count)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", s.P50, 500}, {"p95", s.P95, 950}, {"p99", s.P99, 990}, {"p999", s.P999, 999}, {"max", s.Max, 1000}, {"mean", s.Mean, 500.05}} {
		if !near(c.got, c.want, 0.002) {
			t.Errorf("%s = %v ms, want %v ± 0.2%%", c.name, c.got, c.want)
		}
	}
	if !(s.P50 <= s.P95 && s.P95 <= s.P99 && s.P99 <= s.P999 && s.P999 <= s.Max) {
		t.Fatalf("percentiles out of order: %+v", s)
	}
}

func TestLatencyRecordNMergeAndClamps(t *testing.T) {
	a, b := NewLatencies(), NewLatencies()
	a.RecordN(2*time.Millisecond, 99)
	b.Record(-time.Second)   // a clock step: 0
	b.Record(24 * time.Hour) // beyond the range: the highest value
	a.Merge(b)
	s := a.Summary()
	if s.Count != 101 || s.P50 != 2 || s.Max < 599_000 || s.Max > 601_000 {
		t.Fatalf("%+v", s)
	}
}

func TestFailuresKeepFirstDistinct(t *testing.T) {
	var f Failures
	for i := 0; i < 8; i++ {
		f.Add(errors.New("e"+string(rune('0'+i))), 2)
	}
	f.Add(errors.New("e1"), 10)
	f.Add(errors.New("e7"), 10)
	if f.Count() != 36 {
		t.Fatalf("count %d", f.Count())
	}
	errs := f.Errors()
	if len(errs) != maxDistinctErrors || errs[0].Error != "e0" || errs[1].Count != 12 || errs[4].Error != "e4" {
		t.Fatalf("errors %+v", errs)
	}
}

func TestRatesAndSeconds(t *testing.T) {
	if r, mb := rates(1000, 100_000, 2); r != 500 || mb != 0.05 {
		t.Fatalf("rates %v %v", r, mb)
	}
	if r, mb := rates(1000, 100_000, 0); r != 0 || mb != 0 {
		t.Fatalf("empty period: %v %v", r, mb)
	}
	if seconds(t0, t0.Add(1500*time.Millisecond)) != 1.5 || seconds(time.Time{}, t0) != 0 || seconds(t0.Add(time.Second), t0) != 0 {
		t.Fatal("seconds")
	}
	var s side
	s.count(2, 200, t0.Add(time.Second))
	s.count(1, 100, t0) // out of order: first stays, last stays the latest
	s.count(1, 100, t0.Add(3*time.Second))
	if s.counted.Load() != 4 || s.bytes.Load() != 400 || !s.first().Equal(t0.Add(time.Second)) || !s.last().Equal(t0.Add(3*time.Second)) {
		t.Fatalf("side: %d %d %v %v", s.counted.Load(), s.bytes.Load(), s.first(), s.last())
	}
}

func TestSummaryJSONShape(t *testing.T) {
	lat := NewLatencies()
	lat.Record(3 * time.Millisecond)
	s := &Summary{Mode: ModeProduce, Topic: "t", Partitions: 3, ReplicationFactor: 1, Body: BodySDK, RecordSize: 100,
		Produce: newSideSummary(1000, 100_000, 10, 0.5, lat)}
	s.setMain()
	var buf bytes.Buffer
	if err := s.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Count(strings.TrimSpace(buf.String()), "\n") != 0 {
		t.Fatalf("not one line: %q", buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["records_per_sec"] != 2000.0 || m["mb_per_sec"] != 0.2 || m["records"] != 1000.0 || m["failed"] != 0.0 || m["interrupted"] != false {
		t.Fatalf("top level: %v", m)
	}
	if errs, ok := m["errors"].([]any); !ok || len(errs) != 0 {
		t.Fatalf("errors must be an empty array: %v", m["errors"])
	}
	l, ok := m["latency_ms"].(map[string]any)
	if !ok {
		t.Fatalf("latency_ms: %v", m["latency_ms"])
	}
	for _, k := range []string{"p50", "p95", "p99", "p999", "max"} {
		if v, ok := l[k].(float64); !ok || !near(v, 3, 0.002) {
			t.Errorf("latency_ms.%s = %v", k, l[k])
		}
	}
	if p, ok := m["produce"].(map[string]any); !ok || p["warmup_records"] != 10.0 || m["consume"] != nil {
		t.Fatalf("sides: produce %v consume %v", m["produce"], m["consume"])
	}

	// consume: the consume side at the top, no latency.
	c := &Summary{Mode: ModeConsume, Consume: newSideSummary(10, 1000, 0, 1, nil)}
	c.setMain()
	buf.Reset()
	_ = c.WriteJSON(&buf)
	m = nil
	_ = json.Unmarshal(buf.Bytes(), &m)
	if m["records"] != 10.0 || m["latency_ms"] != nil || m["produce"] != nil {
		t.Fatalf("consume: %v", m)
	}
}

func TestSummaryExitCodeAndHuman(t *testing.T) {
	for _, tc := range []struct {
		s    Summary
		want int
	}{
		{Summary{}, 0},
		{Summary{Failed: 1}, 1},
		{Summary{Error: "stopped"}, 1},
		{Summary{Interrupted: true, Failed: 3}, 130},
	} {
		if got := tc.s.ExitCode(); got != tc.want {
			t.Errorf("%+v: exit %d, want %d", tc.s, got, tc.want)
		}
	}
	lat := NewLatencies()
	lat.Record(time.Millisecond)
	s := &Summary{Mode: ModeE2E, Topic: "t", Produce: newSideSummary(5, 500, 0, 1, lat), Consume: newSideSummary(4, 400, 0, 1, lat),
		Failed: 1, Errors: []ErrorCount{{Error: "boom", Count: 1}}}
	s.setMain()
	var buf bytes.Buffer
	_ = s.WriteHuman(&buf)
	out := buf.String()
	for _, want := range []string{"MB/s of values", "send→ack", "end-to-end", "p99.9", "failures  1", "boom"} {
		if !strings.Contains(out, want) {
			t.Errorf("human summary misses %q:\n%s", want, out)
		}
	}
	if s.Records != 4 {
		t.Fatalf("e2e's main figures are the consume side's: %d", s.Records)
	}
	// A Kafka run names its protocol and its consumers' group, and no
	// frontend body.
	s.Protocol, s.Body, s.Group, s.Consumers = ProtocolKafka, "", "kafka-readers", 1
	buf.Reset()
	_ = s.WriteHuman(&buf)
	head, _, _ := strings.Cut(buf.String(), "\n")
	if !strings.Contains(head, "Kafka protocol (franz-go)") || strings.Contains(head, "body") || !strings.Contains(head, "kafka-readers") {
		t.Errorf("Kafka run's headline: %s", head)
	}
	if count(1234567) != "1,234,567" || count(-1000) != "-1,000" || count(999) != "999" {
		t.Fatal("count formatting")
	}
}
