// Package metrics exposes relayd's Prometheus metrics on a registry of its
// own (no global state): HTTP requests, store operations, grants, leases,
// sweeps and projection reloads.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds every relayd series.
type Metrics struct {
	registry *prometheus.Registry

	requests        *prometheus.CounterVec
	inFlight        prometheus.Gauge
	requestDuration *prometheus.HistogramVec
	storeDuration   *prometheus.HistogramVec
	storeErrors     *prometheus.CounterVec
	storeRetries    *prometheus.CounterVec
	claimsGranted   prometheus.Counter
	leasesRenewed   prometheus.Counter
	leasesLost      prometheus.Counter
	sweepRequeued   prometheus.Counter
	sweepExpired    prometheus.Counter
	sweepLapsed     prometheus.Counter
	grants          grantSeries
}

// New registers relayd's series, plus the Go runtime and process
// collectors, on a fresh registry.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relayd_http_requests_total", Help: "Requests answered, by route and status.",
		}, []string{"route", "status"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relayd_http_requests_in_flight", Help: "Protocol requests being answered now; a draining replica shows them finish.",
		}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "relayd_http_request_duration_seconds", Help: "Time to answer a request, by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"route"}),
		storeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "relayd_store_operation_duration_seconds", Help: "Time of one routing-store operation, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"op"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relayd_store_errors_total", Help: "Store operations that failed (not refusals), by operation.",
		}, []string{"op"}),
		storeRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relayd_store_retries_total",
			Help: "Store calls sent again through a short Valkey outage (restart, failover, load), by operation and cause.",
		}, []string{"op", "cause"}),
		claimsGranted: prometheus.NewCounter(prometheus.CounterOpts{Name: "relayd_claims_granted_total", Help: "Jobs granted to daemons."}),
		leasesRenewed: prometheus.NewCounter(prometheus.CounterOpts{Name: "relayd_leases_renewed_total", Help: "Leases renewed by heartbeats."}),
		leasesLost:    prometheus.NewCounter(prometheus.CounterOpts{Name: "relayd_leases_lost_total", Help: "Leases a heartbeat named that the runner no longer held."}),
		sweepRequeued: prometheus.NewCounter(prometheus.CounterOpts{Name: "relayd_sweep_requeued_total", Help: "Jobs a sweep returned to the queue."}),
		sweepExpired:  prometheus.NewCounter(prometheus.CounterOpts{Name: "relayd_sweep_expired_total", Help: "Jobs a sweep dropped at their deadline."}),
		sweepLapsed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "relayd_sweep_sealing_lapsed_total", Help: "Protocol \"2\" jobs whose sealing window a sweep saw lapse (requeued or evicted).",
		}),
	}
	m.grants = newGrantSeries()
	m.registry.MustRegister(m.grants.collectors()...)
	m.registry.MustRegister(
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.inFlight, m.requestDuration, m.storeDuration, m.storeErrors, m.storeRetries,
		m.claimsGranted, m.leasesRenewed, m.leasesLost, m.sweepRequeued, m.sweepExpired, m.sweepLapsed,
	)
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// RequestStarted counts a request in flight until ObserveRequest answers it.
func (m *Metrics) RequestStarted() { m.inFlight.Inc() }

// ObserveRequest records one answered request. route must come from a
// small fixed set, never from the raw path.
func (m *Metrics) ObserveRequest(route string, status int, took time.Duration) {
	m.inFlight.Dec()
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.requestDuration.WithLabelValues(route).Observe(took.Seconds())
}

// WatchProjection exports the projection source's reload counters.
func (m *Metrics) WatchProjection(counts func() (reloads, failures uint64)) {
	m.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "relayd_projection_reloads_total", Help: "Fixture reloads that took effect."},
			func() float64 { r, _ := counts(); return float64(r) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "relayd_projection_reload_failures_total", Help: "Fixture reloads refused because the file did not validate."},
			func() float64 { _, f := counts(); return float64(f) }),
	)
}

// ResultsCache is what a replica's results-listing cache reports (the
// Valkey store's; the memory store keeps none).
type ResultsCache struct {
	BytesUsed      int64
	OverLimit      uint64
	OverLimitBytes uint64
	Partial        uint64
}

// WatchResultsCache exports the results cache's counters: a site whose
// listing is larger than --results-cache-bytes shows in
// relayd_results_cache_over_limit_total, and polls that kept what they
// read when they ran out of time in relayd_results_partial_reads_total.
func (m *Metrics) WatchResultsCache(read func() ResultsCache) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "relayd_results_cache_bytes", Help: "Bytes the cached results listings account for."},
			func() float64 { return float64(read().BytesUsed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "relayd_results_cache_over_limit_total",
			Help: "Results listings larger than --results-cache-bytes, kept only in part: their site's next poll reads the rest again."},
			func() float64 { return float64(read().OverLimit) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "relayd_results_cache_over_limit_bytes_total",
			Help: "Bytes of those listings the cache could not keep."},
			func() float64 { return float64(read().OverLimitBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "relayd_results_partial_reads_total",
			Help: "Results polls that failed or ran out of time while reading, keeping what they read for the next poll."},
			func() float64 { return float64(read().Partial) }),
	)
}
