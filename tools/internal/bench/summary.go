package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Summary is what a run reports: with --json, exactly this object on one
// line. The top-level figures are the mode's main ones: produce's for
// produce, consume's for consume and e2e (where latency is end to end);
// Produce and Consume hold each direction in full.
type Summary struct {
	Mode              string  `json:"mode"`
	Protocol          string  `json:"protocol"`
	Topic             string  `json:"topic"`
	Partitions        int     `json:"partitions"`
	ReplicationFactor int     `json:"replication_factor"`
	Body              string  `json:"body,omitempty"`
	RecordSize        int     `json:"record_size,omitempty"`
	Acks              string  `json:"acks,omitempty"`
	Compression       string  `json:"compression,omitempty"`
	Keys              string  `json:"keys,omitempty"`
	Producers         int     `json:"producers,omitempty"`
	Consumers         int     `json:"consumers,omitempty"`
	Group             string  `json:"group,omitempty"`
	Rate              float64 `json:"rate"` // records/s asked for; 0: unthrottled

	Interrupted bool    `json:"interrupted"`
	ElapsedSec  float64 `json:"elapsed_sec"` // from the start (after set-up: topic, e2e's group join) until producers and consumers stopped
	WarmupSec   float64 `json:"warmup_sec"`

	Records       int64           `json:"records"`
	Bytes         int64           `json:"bytes"`
	RecordsPerSec float64         `json:"records_per_sec"`
	MBPerSec      float64         `json:"mb_per_sec"` // record values only, MB = 10^6 bytes
	Latency       *LatencySummary `json:"latency_ms,omitempty"`

	Produce *SideSummary `json:"produce,omitempty"`
	Consume *SideSummary `json:"consume,omitempty"`
	// Transactions: with --txn-records, the transactions committed (warm-up
	// included) and their CommitTxn latency.
	Transactions *TxnSummary `json:"transactions,omitempty"`

	// Failed counts failed records: produce errors, and in e2e records
	// acknowledged but not consumed within --grace. Errors holds the first
	// distinct messages. Error is what stopped the run early, if anything.
	Failed int64        `json:"failed"`
	Errors []ErrorCount `json:"errors"`
	Error  string       `json:"error,omitempty"`
}

// TxnSummary describes the transactions of a --txn-records run.
type TxnSummary struct {
	RecordsPerTxn int             `json:"records_per_txn"`
	Committed     int64           `json:"committed"`
	CommitLatency *LatencySummary `json:"commit_latency_ms,omitempty"`
}

// setMain copies the mode's main figures to the top level.
func (s *Summary) setMain() {
	main := s.Produce
	if s.Mode != ModeProduce {
		main = s.Consume
	}
	if main == nil {
		return
	}
	s.Records, s.Bytes, s.RecordsPerSec, s.MBPerSec, s.Latency = main.Records, main.Bytes, main.RecordsPerSec, main.MBPerSec, main.Latency
}

// ExitCode is the run's exit status: 130 interrupted, 1 when anything
// failed, else 0.
func (s *Summary) ExitCode() int {
	switch {
	case s.Interrupted:
		return 130
	case s.Failed > 0 || s.Error != "":
		return 1
	}
	return 0
}

// WriteJSON writes s as one JSON object on one line.
func (s *Summary) WriteJSON(w io.Writer) error {
	if s.Errors == nil {
		s.Errors = []ErrorCount{}
	}
	return json.NewEncoder(w).Encode(s)
}

// WriteHuman writes the summary for people.
func (s *Summary) WriteHuman(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "sluice-bench %s: topic %s (%d partitions, replication factor %d)", s.Mode, s.Topic, s.Partitions, s.ReplicationFactor)
	if s.Protocol == ProtocolKafka {
		b.WriteString(", Kafka protocol (franz-go)")
	}
	if producesIn(s.Mode) {
		fmt.Fprintf(&b, ", %d-byte values", s.RecordSize)
		if s.Body != "" {
			fmt.Fprintf(&b, ", %s body", s.Body)
		}
		fmt.Fprintf(&b, ", acks=%s, compression %s, keys %s, %d producer(s)", s.Acks, s.Compression, s.Keys, s.Producers)
		if s.Rate > 0 {
			fmt.Fprintf(&b, ", rate %s rec/s", count(int64(s.Rate)))
		}
	}
	if s.Mode != ModeProduce {
		fmt.Fprintf(&b, ", %d consumer(s)", s.Consumers)
		if s.Group != "" {
			fmt.Fprintf(&b, " in group %s", s.Group)
		}
	}
	b.WriteString("\n")
	if s.Interrupted {
		b.WriteString("  INTERRUPTED: the figures cover what was done before the interrupt\n")
	}
	if p := s.Produce; p != nil {
		fmt.Fprintf(&b, "  produce   %s records in %.2f s: %s rec/s, %.2f MB/s of values (1 MB = 10^6 bytes)",
			count(p.Records), p.Seconds, count(int64(p.RecordsPerSec)), p.MBPerSec)
		if s.WarmupSec > 0 {
			fmt.Fprintf(&b, "; %s more in the %.1f s warm-up, not counted", count(p.WarmupRecords), s.WarmupSec)
		}
		b.WriteString("\n")
		writeLatency(&b, "send→ack", p.Latency)
	}
	if t := s.Transactions; t != nil {
		fmt.Fprintf(&b, "  txns      %s committed, %d records each\n", count(t.Committed), t.RecordsPerTxn)
		if l := t.CommitLatency; l != nil {
			fmt.Fprintf(&b, "  latency   commit ms: p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (mean %.3f)\n",
				l.P50, l.P95, l.P99, l.P999, l.Max, l.Mean)
		}
	}
	if c := s.Consume; c != nil {
		label := "consume   %s records"
		if s.Mode == ModeShare {
			label = "share     %s records accepted"
		}
		fmt.Fprintf(&b, "  "+label+" in %.2f s: %s rec/s, %.2f MB/s of values",
			count(c.Records), c.Seconds, count(int64(c.RecordsPerSec)), c.MBPerSec)
		if drains(s.Mode) {
			fmt.Fprintf(&b, " from the first record; counting the %.2f s join: %s rec/s, %.2f MB/s",
				c.JoinSec, count(int64(c.RecordsPerSecWithJoin)), c.MBPerSecWithJoin)
		} else {
			fmt.Fprintf(&b, " (the group owned every partition after %.2f s)", c.JoinSec)
		}
		b.WriteString("\n")
		writeLatency(&b, "end-to-end", c.Latency)
	}
	fmt.Fprintf(&b, "  failures  %s", count(s.Failed))
	for _, e := range s.Errors {
		fmt.Fprintf(&b, "\n    %s × %s", count(e.Count), e.Error)
	}
	b.WriteString("\n")
	if s.Error != "" {
		fmt.Fprintf(&b, "  stopped early: %s\n", s.Error)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeLatency(b *strings.Builder, what string, l *LatencySummary) {
	if l == nil {
		return
	}
	fmt.Fprintf(b, "  latency   %s ms: p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (mean %.3f, %s records)\n",
		what, l.P50, l.P95, l.P99, l.P999, l.Max, l.Mean, count(l.Count))
}

// count formats n with thousands separators.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
