package replica

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicemq/sluice/libs/protocol"
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
	descLSOLag    = prometheus.NewDesc("sluice_storage_lso_lag_offsets", "Offsets between the partition's last stable offset and its high watermark: what open transactions hold back from read_committed readers.", labels, nil)
	descOpenTxns  = prometheus.NewDesc("sluice_storage_open_transactions", "Transactions open in the partition's log (transactional records without their marker yet).", labels, nil)
	descRetention = prometheus.NewDesc("sluice_storage_retention_deleted_segments_total", "Segments retention deleted on this node.", nil, nil)

	descDirtyRatio = prometheus.NewDesc("sluice_storage_cleaner_dirty_ratio", "Share of a compacted partition's closed bytes not yet cleaned.", labels, nil)
	descCleanable  = prometheus.NewDesc("sluice_storage_cleaner_cleanable_bytes", "Bytes of a compacted partition's closed segments not yet cleaned.", labels, nil)
	descCleanerLag = prometheus.NewDesc("sluice_storage_cleaner_lag_offsets", "Offsets of a compacted partition between its first dirty offset and its high watermark.", labels, nil)
	descPasses     = prometheus.NewDesc("sluice_storage_cleaner_passes_total", "Cleaning passes completed on this node.", nil, nil)
	descFailures   = prometheus.NewDesc("sluice_storage_cleaner_failures_total", "Cleaning passes that failed or aborted on this node.", nil, nil)
	descCleanRead  = prometheus.NewDesc("sluice_storage_cleaner_read_bytes_total", "Segment bytes the cleaner read.", nil, nil)
	descCleanWrite = prometheus.NewDesc("sluice_storage_cleaner_written_bytes_total", "Bytes of cleaned segments the cleaner wrote.", nil, nil)
	descCleanRecs  = prometheus.NewDesc("sluice_storage_cleaner_removed_records_total", "Records the cleaner removed.", nil, nil)
	descCleanRolls = prometheus.NewDesc("sluice_storage_cleaner_rolled_segments_total", "Quiet active segments of compacted partitions the cleaner rolled at segment.ms.", nil, nil)
)

// Collector exports the node's logs, read at scrape time: per partition its
// segments, size, start and end offsets, high watermark and role, open
// transactions and how far they hold the last stable offset back, and the
// segments retention deleted; for compacted partitions the cleaner's dirty
// ratio, cleanable bytes and lag, and the cleaner's counters.
type Collector struct{ m *Manager }

// NewCollector returns the collector of m's logs.
func NewCollector(m *Manager) *Collector { return &Collector{m: m} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSegments, descSize, descStart, descEnd, descHW, descLeader, descLSOLag, descOpenTxns, descRetention,
		descDirtyRatio, descCleanable, descCleanerLag, descPasses, descFailures, descCleanRead, descCleanWrite, descCleanRecs, descCleanRolls} {
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
		view := r.ConsumerView(protocol.ReadCommitted)
		gauge(descLSOLag, float64(view.HighWatermark-view.LastStableOffset))
		gauge(descOpenTxns, float64(len(r.Log.OpenTxns())))
		if r.State().Config.Compact {
			closed, dirty, _ := r.Log.DirtyBytes()
			ratio := 0.0
			if closed > 0 {
				ratio = float64(dirty) / float64(closed)
			}
			gauge(descDirtyRatio, ratio)
			gauge(descCleanable, float64(dirty))
			gauge(descCleanerLag, float64(max(r.HighWatermark()-r.Log.FirstDirtyOffset(), 0)))
		}
	}
	counter := func(d *prometheus.Desc, v *atomic.Int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v.Load()))
	}
	counter(descRetention, &c.m.retentionDeleted)
	cs := &c.m.cleaner
	counter(descPasses, &cs.passes)
	counter(descFailures, &cs.failures)
	counter(descCleanRead, &cs.bytesRead)
	counter(descCleanWrite, &cs.bytesWritten)
	counter(descCleanRecs, &cs.recordsRemoved)
	counter(descCleanRolls, &cs.rolls)
}
