package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// grantSeries are the series of relayd as its own grant author (spec
// grants.md G-R51). The word is "signed grant": relayd_claims_granted_total
// already counts leases.
type grantSeries struct {
	decided      *prometheus.CounterVec
	skipped      *prometheus.CounterVec
	settleFailed prometheus.Counter
	authorTook   *prometheus.HistogramVec
}

func newGrantSeries() grantSeries {
	return grantSeries{
		decided: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relayd_signed_grants_total",
			Help: "Claimed jobs of enrolled devices the grant author decided, by outcome (granted, declined), reason and permanence.",
		}, []string{"outcome", "reason", "permanent"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relayd_grant_claims_skipped_total",
			Help: "Claims of enrolled devices answered empty by a guard, by cause (key-unavailable, device-clock).",
		}, []string{"cause"}),
		settleFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "relayd_grant_settle_failed_total",
			Help: "Authored claims whose settle failed twice; their held jobs return to the queue at their window.",
		}),
		authorTook: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "relayd_grant_author_duration_seconds",
			Help: "How long authoring one claimed job took, by mode (local, external).",
			// From a local signature (tens of microseconds) to the external
			// author's 5 s bound.
			Buckets: prometheus.ExponentialBuckets(0.00005, 2.5, 14),
		}, []string{"mode"}),
	}
}

func (g grantSeries) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.decided, g.skipped, g.settleFailed, g.authorTook}
}

// SignedGrantDecided counts one decision of the grant author: outcome
// "granted" or "declined", the decline's reason ("" when granted; the
// caller folds a reason outside grants.md G-R12's closed set into "other",
// so that no label carries free text) and whether it is permanent.
func (m *Metrics) SignedGrantDecided(outcome, reason string, permanent bool) {
	m.grants.decided.WithLabelValues(outcome, reason, strconv.FormatBool(permanent)).Inc()
}

// GrantClaimSkipped counts a claim a guard answered empty.
func (m *Metrics) GrantClaimSkipped(cause string) { m.grants.skipped.WithLabelValues(cause).Inc() }

// GrantSettleFailed counts a claim whose settle failed twice.
func (m *Metrics) GrantSettleFailed() { m.grants.settleFailed.Inc() }

// GrantAuthored observes how long one authoring took, by mode ("local",
// "external").
func (m *Metrics) GrantAuthored(mode string, took time.Duration) {
	m.grants.authorTook.WithLabelValues(mode).Observe(took.Seconds())
}
