package server

import (
	"fmt"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/valkey"
)

// newLimiters builds the caller and site rate limiters where the routing
// state lives: in Valkey, beside it and on the same clock, when the store
// is Valkey, so that every replica charges one bucket per caller; in
// process otherwise. A disabled rate gives a nil limiter, which limits
// nothing.
func newLimiters(cfg config.Config, st store.RoutingStore) (caller, site ratelimit.Limiter, err error) {
	if caller, err = newLimiter(cfg.RateLimit, st); err != nil {
		return nil, nil, fmt.Errorf("rate limit: %w", err)
	}
	if site, err = newLimiter(cfg.SiteRateLimit, st); err != nil {
		return nil, nil, fmt.Errorf("site rate limit: %w", err)
	}
	return caller, site, nil
}

func newLimiter(rate ratelimit.Rate, st store.RoutingStore) (ratelimit.Limiter, error) {
	if !rate.Enabled() {
		return nil, nil
	}
	if vs, ok := st.(*valkey.Store); ok {
		l, err := ratelimit.NewValkey(vs.Client(), vs.Prefix(), rate)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	// Rate limiting needs only durations, so the system clock serves even
	// when the memory store's clock is shifted for a test.
	l, err := ratelimit.NewMemory(rate, clock.System{})
	if err != nil {
		return nil, err
	}
	return l, nil
}
