package produce

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the frontend's produce metrics.
type Metrics struct {
	// Requests counts produce requests by HTTP status.
	Requests *prometheus.CounterVec
	// Records counts records by outcome: "ok" (acknowledged by the leader) or
	// "error".
	Records *prometheus.CounterVec
	// Bytes counts record batch bytes acknowledged by leaders.
	Bytes prometheus.Counter
	// Latency is the duration of produce requests, from the body read to the
	// answer.
	Latency prometheus.Histogram
	// Retries counts batch resends after retriable errors.
	Retries prometheus.Counter
	// InFlightBytes is the sum of the body sizes of the produce requests
	// being served (see Budget).
	InFlightBytes prometheus.Gauge
	// Throttled counts produce requests refused with 429 because the
	// in-flight budget was full.
	Throttled prometheus.Counter
	// QuotaThrottled counts requests refused with 429 because their client
	// was over its byte-rate quota, by kind (produce or fetch).
	QuotaThrottled *prometheus.CounterVec
	// BatchRecords is the number of records in each batch the frontend built
	// from record bodies and sent (its first attempt), lingered or not.
	BatchRecords prometheus.Histogram
}

// NewMetrics registers the metrics with reg; a nil reg leaves them
// unregistered (tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_frontend_produce_requests_total",
			Help: "Produce requests by HTTP status.",
		}, []string{"status"}),
		Records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_frontend_produce_records_total",
			Help: "Records in produce requests by outcome (ok or error).",
		}, []string{"result"}),
		Bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_frontend_produce_bytes_total",
			Help: "Record batch bytes acknowledged by partition leaders.",
		}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_frontend_produce_duration_seconds",
			Help:    "Duration of produce requests.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		Retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_frontend_produce_retries_total",
			Help: "Batches resent to a partition leader after a retriable error.",
		}),
		InFlightBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_frontend_inflight_bytes",
			Help: "Body bytes of the produce requests being served (bounded by -max-in-flight-bytes).",
		}),
		QuotaThrottled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_frontend_quota_throttled_total",
			Help: "Requests refused with 429 because their client id was over its byte-rate quota, by kind (produce or fetch).",
		}, []string{"kind"}),
		Throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_frontend_throttled_total",
			Help: "Produce requests refused with 429 because -max-in-flight-bytes was reached.",
		}),
		BatchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_frontend_batch_records",
			Help:    "Records per batch built by the frontend from JSON or msgpack record bodies and sent to a leader.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 15),
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.Records, m.Bytes, m.Latency, m.Retries, m.InFlightBytes, m.Throttled, m.QuotaThrottled, m.BatchRecords)
	}
	return m
}
