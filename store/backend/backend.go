// Package backend opens the backend relayd is configured with: the routing
// store and the rate limiters that keep their buckets beside it. The choice
// of store is made here and nowhere else, so no caller asks which store it
// was given, and no package but this one opens the Valkey store.
package backend

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
	"github.com/byollm/relayd/store/valkey"
)

// Store kinds.
const (
	// Memory keeps all routing state in this process: one replica.
	Memory = "memory"
	// Valkey keeps it in Valkey, shared by every replica on one prefix.
	Valkey = "valkey"
)

// DefaultValkeyPrefix is the Valkey key prefix when none is configured.
const DefaultValkeyPrefix = valkey.DefaultPrefix

// ValidateValkeyPrefix applies the Valkey store's own rule for a key
// prefix (it must carry a hash tag), so configuration can refuse at start
// exactly what the store would refuse.
func ValidateValkeyPrefix(prefix string) error { return valkey.ValidatePrefix(prefix) }

// ValkeyOptions says how to reach Valkey.
type ValkeyOptions struct {
	Addrs          []string
	Username       string
	Password       string
	TLS            bool
	SentinelMaster string
	Cluster        bool
	Prefix         string
	// Timeout bounds a connection's wait for a reply and a (re)connect;
	// see valkey.Options.Timeout. Zero keeps valkey-go's defaults.
	Timeout time.Duration
	// ResultsCacheBytes bounds this replica's cache of results listings;
	// see valkey.Options.ResultsCacheBytes (zero: the default, negative:
	// no cache).
	ResultsCacheBytes int64
	// WaitReplicas and WaitTimeout make every write wait for that many
	// replicas; see valkey.Options.WaitReplicas. Zero waits for none.
	WaitReplicas int
	WaitTimeout  time.Duration
	// Layout is LayoutOneSlot (the default when empty) or LayoutSharded
	// (docs/sharding.md): a site's jobs in one of Buckets buckets (0 means
	// DefaultBuckets), protocol "0" whole in the bucket of Proto0Site.
	Layout     string
	Buckets    int
	Proto0Site string
}

// The Valkey key layouts.
const (
	// LayoutOneSlot keeps every key under the prefix's one hash tag: one
	// primary carries the keyspace.
	LayoutOneSlot = "one-slot"
	// LayoutSharded spreads sites over buckets of their own hash tags,
	// so that a cluster's primaries share the work.
	LayoutSharded = "sharded"
)

// DefaultBuckets is the sharded layout's number of buckets.
const DefaultBuckets = valkey.DefaultBuckets

// MaxBuckets bounds the sharded layout's number of buckets.
const MaxBuckets = valkey.MaxBuckets

// DefaultWaitTimeout is the Valkey store's bound on a write's wait for its
// replicas.
const DefaultWaitTimeout = valkey.DefaultWaitTimeout

// DefaultResultsCacheBytes is the results cache a Valkey store gets when
// nothing says otherwise.
const DefaultResultsCacheBytes = valkey.DefaultResultsCacheBytes

// Options chooses and configures the backend.
type Options struct {
	// Kind is Memory or Valkey.
	Kind   string
	Valkey ValkeyOptions
	// Clock is the memory store's clock (and its limiters'); Valkey's
	// clock is TIME.
	Clock clock.Clock
	// RateLimit and SiteRateLimit shape the two limiters; a disabled rate
	// gives no limiter.
	RateLimit     ratelimit.Rate
	SiteRateLimit ratelimit.Rate
	Logger        *slog.Logger
	// OnStoreRetry, when set, is told of every retry of a Valkey store
	// call through a short outage (valkey.Options.OnRetry), for a metric.
	OnStoreRetry func(op store.Op, cause string)
}

// Backend is an open store with its limiters. Closing the store releases
// everything, the limiters' connections included.
type Backend struct {
	Store store.RoutingStore
	// Pairings are the pending device codes, kept where Store keeps its
	// state and judged on its clock, so every replica sees the same codes.
	Pairings store.Pairings
	// RateLimit and SiteRateLimit are nil when their rate is disabled, and
	// then limit nothing.
	RateLimit     ratelimit.Limiter
	SiteRateLimit ratelimit.Limiter
	// ResultsCache reads the replica's results-listing cache, for its
	// metrics; nil for a store that keeps none (the memory store).
	ResultsCache func() ResultsCache
}

// ResultsCache is what a replica's cache of results listings holds and
// could not hold (the Valkey store's; docs/operations.md sizes it).
type ResultsCache = valkey.ResultsCacheCounts

// Open opens the configured store, with its pending device codes, and
// builds its limiters where it keeps its state: in process for the memory
// store; in Valkey, on its clock, for the Valkey store, so that every
// replica charges one bucket per caller and sees every pending code.
func Open(ctx context.Context, o Options) (Backend, error) {
	switch o.Kind {
	case Memory:
		st := memory.New(o.Clock)
		return withLimiters(st, st.Pairings(), st.Limiter, o)
	case Valkey:
		st, err := openValkey(ctx, o.Valkey, o.Logger, o.OnStoreRetry)
		if err != nil {
			return Backend{}, err
		}
		b, err := withLimiters(st, st.Pairings(), st.Limiter, o)
		if err != nil {
			_ = st.Close()
		}
		b.ResultsCache = st.ResultsCacheCounts
		return b, err
	}
	return Backend{}, fmt.Errorf("unknown store %q", o.Kind)
}

// withLimiters completes a backend on st and its pairings with limiters
// from build.
func withLimiters(st store.RoutingStore, pairings store.Pairings, build func(ratelimit.Rate) (ratelimit.Limiter, error), o Options) (Backend, error) {
	b := Backend{Store: st, Pairings: pairings}
	var err error
	if b.RateLimit, err = limiter(o.RateLimit, build); err != nil {
		return Backend{}, fmt.Errorf("rate limit: %w", err)
	}
	if b.SiteRateLimit, err = limiter(o.SiteRateLimit, build); err != nil {
		return Backend{}, fmt.Errorf("site rate limit: %w", err)
	}
	return b, nil
}

// limiter builds a limiter of rate, or none when the rate is disabled.
func limiter(rate ratelimit.Rate, build func(ratelimit.Rate) (ratelimit.Limiter, error)) (ratelimit.Limiter, error) {
	if !rate.Enabled() {
		return nil, nil
	}
	return build(rate)
}

// valkeyStore is what both Valkey layouts give the backend.
type valkeyStore interface {
	store.RoutingStore
	Pairings() store.Pairings
	Limiter(ratelimit.Rate) (ratelimit.Limiter, error)
	ResultsCacheCounts() valkey.ResultsCacheCounts
}

// openValkey connects to Valkey and loads the scripts. A Valkey that does
// not answer at start fails the start with a clear error, which a process
// supervisor retries; an outage after start is answered with 503s and the
// relay recovers by itself when the server returns.

func openValkey(ctx context.Context, c ValkeyOptions, logger *slog.Logger, onRetry func(store.Op, string)) (valkeyStore, error) {
	opts := c.reach()
	opts.KeyPrefix, opts.ResultsCacheBytes, opts.OnRetry, opts.Logger = c.Prefix, c.ResultsCacheBytes, onRetry, logger
	opts.WaitReplicas, opts.WaitTimeout = c.WaitReplicas, c.WaitTimeout
	var (
		st  valkeyStore
		err error
	)
	switch c.Layout {
	case "", LayoutOneSlot:
		st, err = valkey.New(ctx, opts)
	case LayoutSharded:
		st, err = valkey.NewSharded(ctx, opts, valkey.Sharding{Buckets: c.Buckets, Proto0Site: c.Proto0Site})
	default:
		err = fmt.Errorf("unknown layout %q (want %s or %s)", c.Layout, LayoutOneSlot, LayoutSharded)
	}
	if err != nil {
		return nil, fmt.Errorf("open valkey store: %w", err)
	}
	if logger != nil {
		logger.Info("valkey store", slog.Any("addrs", c.Addrs), slog.Bool("cluster", c.Cluster),
			slog.String("sentinel_master", c.SentinelMaster), slog.String("prefix", c.Prefix),
			slog.String("layout", cmp.Or(c.Layout, LayoutOneSlot)), slog.Int("buckets", c.Buckets))
	}
	return st, nil
}

// OpenValkeySharing opens one Valkey store per prefix on one client: the
// capacity scenario's bound of a layout sharded by bucket
// (docs/sharding.md). Of c it uses how to reach the servers; its Prefix,
// WaitReplicas and ResultsCacheBytes are not applied. closeAll closes them
// all.
func OpenValkeySharing(ctx context.Context, c ValkeyOptions, prefixes []string) (stores []store.RoutingStore, closeAll func(), err error) {
	opened, closeAll, err := valkey.NewSharing(ctx, c.reach(), prefixes)
	if err != nil {
		return nil, nil, fmt.Errorf("open valkey stores: %w", err)
	}
	for _, s := range opened {
		stores = append(stores, s)
	}
	return stores, closeAll, nil
}

// reach is how c says to reach the servers, as the Valkey store's options.
func (c ValkeyOptions) reach() valkey.Options {
	o := valkey.Options{Addrs: c.Addrs, Username: c.Username, Password: c.Password,
		SentinelMasterSet: c.SentinelMaster, Cluster: c.Cluster, Timeout: c.Timeout}
	if c.TLS {
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o
}
