package replica

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Descriptions of the per-partition series the collector exports.
var (
	labels        = []string{"topic", "partition"}
	descSegments  = prometheus.NewDesc("sluice_storage_log_segments", "Segments of the partition's log on this node.", labels, nil)
	descSize      = prometheus.NewDesc("sluice_storage_log_size_bytes", "Bytes of the partition's log segments on this node.", labels, nil)
	descStart     = prometheus.NewDesc("sluice_storage_log_start_offset", "First offset the partition's log on this node holds.", labels, nil)
	descEnd       = prometheus.NewDesc("sluice_storage_log_end_offset", "Offset the next record appended to this node's log gets.", labels, nil)
	descHW        = prometheus.NewDesc("sluice_storage_high_watermark", "Offset below which records are committed, as this node knows it.", labels, nil)
	descLeader    = prometheus.NewDesc("sluice_storage_partition_leader", "1 when this node leads the partition, 0 when it follows.", labels, nil)
	descRetention = prometheus.NewDesc("sluice_storage_retention_deleted_segments_total", "Segments retention deleted on this node.", nil, nil)
)

// Collector exports the node's logs, read at scrape time: per partition its
// segments, size, start and end offsets, high watermark and role, and the
// segments retention deleted.
type Collector struct{ m *Manager }

// NewCollector returns the collector of m's logs.
func NewCollector(m *Manager) *Collector { return &Collector{m: m} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSegments, descSize, descStart, descEnd, descHW, descLeader, descRetention} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.m.Replicas() {
		lv := []string{r.Key.Topic, strconv.Itoa(int(r.Key.Partition))}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
		}
		leader := 0.0
		if r.State().Leader == c.m.self {
			leader = 1
		}
		gauge(descSegments, float64(r.Log.Segments()))
		gauge(descSize, float64(r.Log.Size()))
		gauge(descStart, float64(r.Log.StartOffset()))
		gauge(descEnd, float64(r.Log.EndOffset()))
		gauge(descHW, float64(r.HighWatermark()))
		gauge(descLeader, leader)
	}
	ch <- prometheus.MustNewConstMetric(descRetention, prometheus.CounterValue, float64(c.m.retentionDeleted.Load()))
}
