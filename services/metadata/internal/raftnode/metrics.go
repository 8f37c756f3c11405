package raftnode

import (
	"github.com/prometheus/client_golang/prometheus"
)

// RegisterMetrics registers raftgroup's raft gauges (sluice_metadata_raft_*)
// and the metadata FSM's, all read at scrape time: FSM version, topic and
// storage node counts.
func (n *Node) RegisterMetrics(reg prometheus.Registerer) error {
	if err := n.Node.RegisterMetrics(reg); err != nil {
		return err
	}
	gauges := []prometheus.Collector{
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
