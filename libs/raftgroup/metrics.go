package raftgroup

import (
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// RegisterMetrics registers the raft gauges, read at scrape time and named
// after Config.Service: sluice_<service>_raft_state, _raft_is_leader,
// _raft_term, _raft_commit_index and _raft_applied_index. They read 0 while
// the node is not running. The FSM's own gauges are the service's.
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
	for _, g := range gauges {
		if err := reg.Register(g); err != nil {
			return err
		}
	}
	return nil
}
