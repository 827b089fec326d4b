package plane

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// rateLimit charges one request to key and returns the 429 refusal when
// the caller is over its rate. A nil limiter limits nothing.
//
// A limiter that cannot answer (its Valkey is unreachable) lets the
// request through: fail open. Every request the limiter guards goes on to
// the routing store, which shares that Valkey and answers 503 while it is
// down, so failing closed would add no protection during an outage and
// would turn a limiter hiccup alone into refused traffic.
func (r *Relay) rateLimit(ctx context.Context, limiter ratelimit.Limiter, key string) *protocol.Refusal {
	if limiter == nil {
		return nil
	}
	d, err := limiter.Allow(ctx, key)
	if err != nil {
		r.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "rate limiter unavailable; request let through",
			slog.String("request_id", requestIDOf(ctx)), slog.String("error", err.Error()))
		return nil
	}
	if d.Allowed {
		return nil
	}
	return codec.RateLimited(d.RetryAfter)
}

// charge is rateLimit against limiter, for a codec to call once it knows
// who the caller is.
func (r *Relay) charge(limiter ratelimit.Limiter) codec.Charge {
	return func(ctx context.Context, key string) *protocol.Refusal { return r.rateLimit(ctx, limiter, key) }
}

// storeCharge is a codec's RunnerCharge or SiteCharge: the store bucket
// of a caller (under key) when the store keeps limiter's buckets at rate,
// none when there is no limiter, and nil (no charge in the store) when
// the limiter's buckets are somewhere else.
func storeCharge(rate ratelimit.Rate, limiter ratelimit.Limiter, key func(string) string) func(id string) *store.Charge {
	switch {
	case rate.Enabled():
		return func(id string) *store.Charge {
			return &store.Charge{Key: key(id), Every: rate.Every, Burst: rate.Burst}
		}
	case limiter == nil:
		return func(string) *store.Charge { return nil }
	}
	return nil
}

// clientAddr names the client a pairing is charged to: the connection's
// address, or with TrustForwardedFor the last X-Forwarded-For entry (the
// one the load balancer in front appended; earlier ones are whatever the
// client sent). IPv6 clients are charged per /64, the block one
// subscriber usually holds, so that hopping addresses within it does not
// buy more requests.
func (r *Relay) clientAddr(req *http.Request) string {
	if r.cfg.TrustForwardedFor {
		if vals := req.Header.Values("X-Forwarded-For"); len(vals) > 0 {
			last := vals[len(vals)-1]
			last = strings.TrimSpace(last[strings.LastIndexByte(last, ',')+1:])
			if a, err := netip.ParseAddr(last); err == nil {
				return addrKey(a)
			}
			// Some balancers write the client's port too.
			if ap, err := netip.ParseAddrPort(last); err == nil {
				return addrKey(ap.Addr())
			}
		}
	}
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		host = req.RemoteAddr
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return addrKey(a)
	}
	return host
}

func addrKey(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
