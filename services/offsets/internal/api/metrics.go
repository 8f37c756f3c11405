package api

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// lagScrapeTimeout bounds the log-offset look-ups of one scrape.
const lagScrapeTimeout = 5 * time.Second

var (
	lagLabels     = []string{"group", "topic", "partition"}
	descLag       = prometheus.NewDesc("sluice_offsets_group_lag", "Records a consumer group still has to read of a partition: log end (the last stable offset for a read_committed group) minus the committed offset (or the log start when retention passed it or nothing is committed).", lagLabels, nil)
	descCommitted = prometheus.NewDesc("sluice_offsets_group_committed_offset", "A consumer group's committed offset of a partition.", lagLabels, nil)
	descGroups    = prometheus.NewDesc("sluice_offsets_groups", "Consumer groups with members or committed offsets.", nil, nil)
)

// LagCollector exports every group's lag per partition at scrape time, on
// the Raft leader only (the other replicas would export the same series).
type LagCollector struct {
	s        *Server
	isLeader func() bool
}

// NewLagCollector returns the collector of s's groups; isLeader tells
// whether this replica leads the offsets Raft group.
func NewLagCollector(s *Server, isLeader func() bool) *LagCollector {
	return &LagCollector{s: s, isLeader: isLeader}
}

// Describe implements prometheus.Collector.
func (c *LagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLag
	ch <- descCommitted
	ch <- descGroups
}

// Collect implements prometheus.Collector.
func (c *LagCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.isLeader() {
		return
	}
	ctx, cancel := context.WithTimeout(c.s.base, lagScrapeTimeout)
	defer cancel()
	names := c.s.fsm.GroupNames()
	ch <- prometheus.MustNewConstMetric(descGroups, prometheus.GaugeValue, float64(len(names)))
	for _, name := range names {
		g, ok := c.s.fsm.Group(name)
		if !ok {
			g = &fsm.Group{Name: name} // committed offsets only
		}
		committed, err := c.s.fsm.Offsets(name, "")
		if err != nil {
			continue
		}
		for _, p := range c.s.lags(ctx, g, committed, false) {
			lv := []string{name, p.Topic, strconv.Itoa(int(p.Partition))}
			if p.Lag >= 0 {
				ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(p.Lag), lv...)
			}
			if p.Committed >= 0 {
				ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.GaugeValue, float64(p.Committed), lv...)
			}
		}
	}
}

var (
	descTxns           = prometheus.NewDesc("sluice_offsets_transactions", "Transactional ids by the state of their transaction.", []string{"state"}, nil)
	descTxnsCommitted  = prometheus.NewDesc("sluice_offsets_transactions_committed_total", "Transactions this replica completed as leader with a commit.", nil, nil)
	descTxnsAborted    = prometheus.NewDesc("sluice_offsets_transactions_aborted_total", "Transactions this replica completed as leader with an abort (timeouts and fenced sessions included).", nil, nil)
	descTxnsTimedOut   = prometheus.NewDesc("sluice_offsets_transactions_timed_out_total", "Transactions this replica aborted as leader because they outlived their timeout.", nil, nil)
	descMarkerFailures = prometheus.NewDesc("sluice_offsets_transaction_marker_failures_total", "Transaction marker writes that failed and were retried.", nil, nil)
)

// TxnCollector exports the transaction coordinator's state on the Raft
// leader: transactional ids by state, and the leader's counters.
type TxnCollector struct {
	s        *Server
	isLeader func() bool
}

// NewTxnCollector returns the collector of s's transactions.
func NewTxnCollector(s *Server, isLeader func() bool) *TxnCollector {
	return &TxnCollector{s: s, isLeader: isLeader}
}

// Describe implements prometheus.Collector.
func (c *TxnCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTxns, descTxnsCommitted, descTxnsAborted, descTxnsTimedOut, descMarkerFailures} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *TxnCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.isLeader() || c.s.txns == nil {
		return
	}
	all, err := c.s.fsm.Txns()
	if err != nil {
		return
	}
	byState := map[string]int{fsm.TxnEmpty: 0, fsm.TxnOngoing: 0, fsm.TxnPrepareCommit: 0, fsm.TxnPrepareAbort: 0, fsm.TxnCompleteCommit: 0, fsm.TxnCompleteAbort: 0}
	for _, t := range all {
		byState[t.State]++
	}
	for state, n := range byState {
		ch <- prometheus.MustNewConstMetric(descTxns, prometheus.GaugeValue, float64(n), state)
	}
	n := c.s.txns.Counts()
	for d, v := range map[*prometheus.Desc]int64{descTxnsCommitted: n.Committed.Load(), descTxnsAborted: n.Aborted.Load(),
		descTxnsTimedOut: n.TimedOut.Load(), descMarkerFailures: n.MarkerFailures.Load()} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
}
