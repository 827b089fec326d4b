package metrics

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/byollm/relayd/store"
)

// InstrumentPairings wraps p as InstrumentStore wraps a routing store:
// each operation's latency is observed under its store.Op and failures
// (not refusals) are counted. Starts are counted too, by outcome, so that
// an operator sees the capacity being exhausted (docs/security.md).
func (m *Metrics) InstrumentPairings(p store.Pairings) store.Pairings {
	return &instrumentedPairings{
		next: p,
		obs:  &instrumented{m: m},
		started: m.register(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relayd_pairing_starts_total",
			Help: "Device-code pairing starts, by outcome: stored, or at-capacity (refused with 429).",
		}, []string{"outcome"})).(*prometheus.CounterVec),
	}
}

// register registers c, or returns the collector already registered under
// its name, so that wrapping twice shares one series.
func (m *Metrics) register(c prometheus.Collector) prometheus.Collector {
	var taken prometheus.AlreadyRegisteredError
	if err := m.registry.Register(c); errors.As(err, &taken) {
		return taken.ExistingCollector
	}
	return c
}

type instrumentedPairings struct {
	next store.Pairings
	// obs observes each call as the routing store's decorator does; its
	// own next is unused.
	obs     *instrumented
	started *prometheus.CounterVec
}

func (p *instrumentedPairings) StartPairing(ctx context.Context, in store.StartPairingInput) (int64, error) {
	expiresAt, err := timed(p.obs, store.OpStartPairing, func() (int64, error) { return p.next.StartPairing(ctx, in) })
	switch {
	case err == nil:
		p.started.WithLabelValues("stored").Inc()
	case store.RefusalOf(err) == store.RefusedAtCapacity:
		p.started.WithLabelValues(string(store.RefusedAtCapacity)).Inc()
	}
	return expiresAt, err
}

func (p *instrumentedPairings) PairingByDeviceCode(ctx context.Context, deviceCode string) (store.PendingPairing, bool, error) {
	return lookup(p.obs, store.OpPairingByDeviceCode, func() (store.PendingPairing, bool, error) {
		return p.next.PairingByDeviceCode(ctx, deviceCode)
	})
}

func (p *instrumentedPairings) PairingByUserCode(ctx context.Context, userCode string) (store.PendingPairing, bool, error) {
	return lookup(p.obs, store.OpPairingByUserCode, func() (store.PendingPairing, bool, error) {
		return p.next.PairingByUserCode(ctx, userCode)
	})
}

func (p *instrumentedPairings) ApprovePairing(ctx context.Context, userCode, identity string) (store.PendingPairing, bool, error) {
	return lookup(p.obs, store.OpApprovePairing, func() (store.PendingPairing, bool, error) {
		return p.next.ApprovePairing(ctx, userCode, identity)
	})
}

func (p *instrumentedPairings) DropPairing(ctx context.Context, deviceCode string) error {
	_, err := timed(p.obs, store.OpDropPairing, func() (struct{}, error) { return struct{}{}, p.next.DropPairing(ctx, deviceCode) })
	return err
}
