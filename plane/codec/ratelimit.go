package codec

import (
	"context"
	"log/slog"
	"time"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// RunnerKey is the rate-limit key of a runner.
func RunnerKey(runnerID string) string { return "runner:" + runnerID }

// SiteKey is the rate-limit key of a site.
func SiteKey(siteID string) string { return "site:" + siteID }

// Charge charges one request to key under limit now, returning the 429
// refusal when the caller is over its rate and nil otherwise. A limit
// that limits nothing charges nothing.
//
// A limiter that cannot answer (its Valkey is unreachable) lets the
// request through: fail open. Every request the limiter guards goes on to
// the routing store, which shares that Valkey and answers 503 while it is
// down, so failing closed would add no protection during an outage and
// would turn a limiter hiccup alone into refused traffic.
func (e *Env) Charge(ctx context.Context, limit ratelimit.Limit, key string) *protocol.Refusal {
	d, err := limit.Allow(ctx, key)
	if err != nil {
		if e.Logger != nil {
			e.Logger.LogAttrs(ctx, slog.LevelWarn, "rate limiter unavailable; request let through",
				slog.String("request_id", RequestID(ctx)), slog.String("error", err.Error()))
		}
		return nil
	}
	if d.Allowed {
		return nil
	}
	return RateLimited(d.RetryAfter)
}

// StoreCharge is the charge a store operation takes for key under limit
// (store.Admission's Charge): the bucket the limit's limiter keeps under
// key, when the store keeps it; nil for a limit that limits nothing or is
// charged apart.
func StoreCharge(limit ratelimit.Limit, key string) *store.Charge {
	rate, stored := limit.Stored()
	if !stored {
		return nil
	}
	return &store.Charge{Key: key, Every: rate.Every, Burst: rate.Burst}
}

// RateLimited is the 429 of a caller who must wait that long: the wait in
// whole seconds, rounded up, whichever protocol the caller speaks.
func RateLimited(wait time.Duration) *protocol.Refusal {
	return protocol.RateLimited(int64((wait + time.Second - 1) / time.Second))
}
