package raftnode

import (
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// RegisterMetrics registers gauges read at scrape time: raft state, term,
// commit and applied index, FSM version, topic and storage node counts.
func (n *Node) RegisterMetrics(reg prometheus.Registerer) error {
	fromRaft := func(get func(*raft.Raft) float64) func() float64 {
		return func() float64 {
			if r := n.raft.Load(); r != nil {
				return get(r)
			}
			return 0
		}
	}
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_metadata_raft_state",
			Help: "Raft state of this member: 0 follower, 1 candidate, 2 leader, 3 shutdown."},
			fromRaft(func(r *raft.Raft) float64 { return float64(r.State()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_metadata_raft_is_leader",
			Help: "1 when this member is the Raft leader."},
			fromRaft(func(r *raft.Raft) float64 {
				if r.State() == raft.Leader {
					return 1
				}
				return 0
			})),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_metadata_raft_term", Help: "Current Raft term."},
			fromRaft(func(r *raft.Raft) float64 { return float64(r.CurrentTerm()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_metadata_raft_commit_index", Help: "Raft commit index."},
			fromRaft(func(r *raft.Raft) float64 { return float64(r.CommitIndex()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_metadata_raft_applied_index", Help: "Last Raft index applied to the FSM."},
			fromRaft(func(r *raft.Raft) float64 { return float64(r.AppliedIndex()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_metadata_fsm_version", Help: "Raft index of the last change of the cluster model."},
			func() float64 { return float64(n.fsm.Version()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_metadata_topics", Help: "Number of topics."},
			func() float64 { _, t := n.fsm.Counts(); return float64(t) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_metadata_storage_nodes", Help: "Number of registered storage nodes."},
			func() float64 { nodes, _ := n.fsm.Counts(); return float64(nodes) }),
	}
	for _, g := range gauges {
		if err := reg.Register(g); err != nil {
			return err
		}
	}
	return nil
}
