package raftgroup

import (
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// logMetrics counts the write-ahead log's work (its metrics.Collector):
// appends (one fdatasync each), entries and bytes written, segment
// rotations. Entries per append is how many decisions share an fsync.
type logMetrics struct {
	counters map[string]prometheus.Counter // by raft-wal's counter name; read-only after newLogMetrics
}

// walCounters are the raft-wal counters exported, with their help.
var walCounters = map[string]string{
	"log_appends":             "Appends to the Raft log: each is one write and one fdatasync, of one or more entries.",
	"log_entries_written":     "Entries appended to the Raft log.",
	"log_entry_bytes_written": "Bytes of entries appended to the Raft log (encoded, before framing).",
	"segment_rotations":       "Raft log segment files sealed and replaced by a new one.",
	"head_truncations":        "Entries removed from the head of the Raft log after a snapshot.",
	"tail_truncations":        "Entries removed from the tail of the Raft log (a follower dropping entries a new leader does not have).",
}

func newLogMetrics(service string) *logMetrics {
	m := &logMetrics{counters: map[string]prometheus.Counter{}}
	for name, help := range walCounters {
		m.counters[name] = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_" + service + "_raft_" + name + "_total", Help: help})
	}
	return m
}

// IncrementCounter counts delta events of a raft-wal counter; those not
// exported are dropped.
func (m *logMetrics) IncrementCounter(name string, delta uint64) {
	if c, ok := m.counters[name]; ok {
		c.Add(float64(delta))
	}
}

// SetGauge drops raft-wal's gauges (the age of the last sealed segment).
func (m *logMetrics) SetGauge(string, uint64) {}

// RegisterMetrics registers the raft gauges, read at scrape time and named
// after Config.Service: sluice_<service>_raft_state, _raft_is_leader,
// _raft_term, _raft_commit_index and _raft_applied_index (0 while the node
// is not running), and the log's counters (logMetrics). The FSM's own
// gauges are the service's.
func (n *Node) RegisterMetrics(reg prometheus.Registerer) error {
	fromRaft := func(get func(*raft.Raft) float64) func() float64 {
		return func() float64 {
			if r := n.raft.Load(); r != nil {
				return get(r)
			}
			return 0
		}
	}
	prefix := "sluice_" + n.cfg.Service + "_raft_"
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: prefix + "state",
			Help: "Raft state of this member: 0 follower, 1 candidate, 2 leader, 3 shutdown."},
			fromRaft(func(r *raft.Raft) float64 { return float64(r.State()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: prefix + "is_leader",
			Help: "1 when this member is the Raft leader."},
			fromRaft(func(r *raft.Raft) float64 {
				if r.State() == raft.Leader {
					return 1
				}
				return 0
			})),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: prefix + "term", Help: "Current Raft term."},
			fromRaft(func(r *raft.Raft) float64 { return float64(r.CurrentTerm()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: prefix + "commit_index", Help: "Raft commit index."},
			fromRaft(func(r *raft.Raft) float64 { return float64(r.CommitIndex()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: prefix + "applied_index", Help: "Last Raft index applied to the FSM."},
			fromRaft(func(r *raft.Raft) float64 { return float64(r.AppliedIndex()) })),
	}
	for _, c := range n.logMetrics.counters {
		gauges = append(gauges, c)
	}
	for _, g := range gauges {
		if err := reg.Register(g); err != nil {
			return err
		}
	}
	return nil
}
