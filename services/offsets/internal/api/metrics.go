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

var (
	descShareLag       = prometheus.NewDesc("sluice_offsets_share_group_lag", "Records of a partition a share group has not acknowledged or archived yet: those in flight and those past its end offset up to the high watermark.", lagLabels, nil)
	descShareAcquired  = prometheus.NewDesc("sluice_offsets_share_group_acquired", "Records of a partition held by a share group's consumers under a live lock.", lagLabels, nil)
	descShareAvailable = prometheus.NewDesc("sluice_offsets_share_group_available", "Records of a partition released (or whose lock expired) that wait for a share group's consumers.", lagLabels, nil)
	descShareDelayed   = prometheus.NewDesc("sluice_offsets_share_group_delayed", "Records of a partition a share group holds back until their delivery time.", lagLabels, nil)
	descShareDLT       = prometheus.NewDesc("sluice_offsets_share_group_dead_letter_pending", "Archived records of a partition waiting to be written to the share group's dead-letter topic.", lagLabels, nil)
	descShareAccepted  = prometheus.NewDesc("sluice_offsets_share_group_accepted_total", "Records of a partition a share group's consumers accepted.", lagLabels, nil)
	descShareArchived  = prometheus.NewDesc("sluice_offsets_share_group_archived_total", "Records of a partition a share group archived (rejected or past the delivery limit).", lagLabels, nil)
	descShareDelivered = prometheus.NewDesc("sluice_offsets_share_group_deliveries_total", "Deliveries of records of a partition to a share group's consumers, redeliveries included.", lagLabels, nil)
)

// ShareCollector exports every share group's state per partition on the
// Raft leader (describe's figures).
type ShareCollector struct {
	s        *Server
	isLeader func() bool
}

// NewShareCollector returns the collector of s's share groups.
func NewShareCollector(s *Server, isLeader func() bool) *ShareCollector {
	return &ShareCollector{s: s, isLeader: isLeader}
}

// Describe implements prometheus.Collector.
func (c *ShareCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descShareLag, descShareAcquired, descShareAvailable, descShareDelayed, descShareDLT,
		descShareAccepted, descShareArchived, descShareDelivered} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ShareCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.isLeader() {
		return
	}
	ctx, cancel := context.WithTimeout(c.s.base, lagScrapeTimeout)
	defer cancel()
	for _, name := range c.s.fsm.ShareNames() {
		d, err := c.s.shares.Describe(ctx, name)
		if err != nil {
			continue
		}
		for _, p := range d.Partitions {
			lv := []string{name, p.Topic, strconv.Itoa(int(p.Partition))}
			if p.HighWatermark >= 0 {
				ch <- prometheus.MustNewConstMetric(descShareLag, prometheus.GaugeValue, float64(p.Lag), lv...)
			}
			for desc, v := range map[*prometheus.Desc]int64{descShareAcquired: p.Acquired, descShareAvailable: p.Available,
				descShareDelayed: p.Delayed, descShareDLT: p.DeadLetterPending} {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(v), lv...)
			}
			for desc, v := range map[*prometheus.Desc]int64{descShareAccepted: p.Accepted, descShareArchived: p.Archived, descShareDelivered: p.Deliveries} {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), lv...)
			}
		}
	}
}
