package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// metrics count the partition changes this member committed as the active
// controller; summed over the members they are the cluster's.
type metrics struct {
	elections prometheus.Counter
	offline   prometheus.Counter
	shrinks   prometheus.Counter
	expands   prometheus.Counter
}

func newMetrics() metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return metrics{
		elections: counter("sluice_metadata_leader_elections_total", "Partition leaders elected by this member as controller (failover, controlled shutdown, preferred leader)."),
		offline:   counter("sluice_metadata_partitions_offline_total", "Partitions this member as controller took offline: no live replica in the ISR."),
		shrinks:   counter("sluice_metadata_isr_shrinks_total", "ISR shrinks committed by this member as controller (its own decisions and partition leaders' requests)."),
		expands:   counter("sluice_metadata_isr_expands_total", "ISR expansions committed by this member as controller (partition leaders' requests)."),
	}
}

// countChange counts one committed partition change from the old leader and
// ISR size to the new.
func (m metrics) countChange(oldLeader, newLeader int32, oldISR, newISR int) {
	switch {
	case newLeader < 0 && oldLeader >= 0:
		m.offline.Inc()
	case newLeader >= 0 && newLeader != oldLeader:
		m.elections.Inc()
	}
	switch {
	case newISR < oldISR:
		m.shrinks.Inc()
	case newISR > oldISR:
		m.expands.Inc()
	}
}

// Collectors are the controller's counters and the gauges of partition and
// node health read from the FSM at scrape time.
func (c *Controller) Collectors() []prometheus.Collector {
	gauge := func(name, help string, pick func(fsm.HealthCounts) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			return float64(pick(c.fsm.Health()))
		})
	}
	return []prometheus.Collector{
		c.metrics.elections, c.metrics.offline, c.metrics.shrinks, c.metrics.expands,
		gauge("sluice_metadata_partitions", "Partitions of all topics.", func(h fsm.HealthCounts) int { return h.Partitions }),
		gauge("sluice_metadata_under_replicated_partitions", "Partitions with fewer in-sync replicas than they should have (replicas being added by a reassignment are not counted missing).",
			func(h fsm.HealthCounts) int { return h.UnderReplicated }),
		gauge("sluice_metadata_offline_partitions", "Partitions without a leader.", func(h fsm.HealthCounts) int { return h.Offline }),
		gauge("sluice_metadata_reassigning_partitions", "Partitions being moved to other replicas (partition reassign, node decommission).",
			func(h fsm.HealthCounts) int { return h.Reassigning }),
		gauge("sluice_metadata_alive_storage_nodes", "Registered storage nodes whose session is live.", func(h fsm.HealthCounts) int { return h.AliveNodes }),
	}
}
