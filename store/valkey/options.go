package valkey

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"
)

// DefaultPrefix is the key prefix when Options.KeyPrefix is empty.
const DefaultPrefix = "relayd:{relayd}:"

// Options says how to reach Valkey. Standalone, Sentinel and Cluster
// deployments all work because every call's keys share one hash slot.
type Options struct {
	// Addrs are the server addresses (host:port): the server, the Sentinels
	// when SentinelMasterSet is set, or cluster seed nodes when Cluster is.
	Addrs []string
	// Username and Password authenticate to the server (ACL or legacy AUTH).
	Username string
	Password string
	// TLS, when set, is used for every connection.
	TLS *tls.Config
	// SentinelMasterSet names the Sentinel master set; Addrs are then
	// Sentinels. SentinelUsername and SentinelPassword authenticate to them.
	SentinelMasterSet string
	SentinelUsername  string
	SentinelPassword  string
	// Cluster connects as a Valkey Cluster client. On the one-slot layout
	// (New) all of one relay's routing keys share one hash tag, so a
	// cluster gives compatibility and failover, not sharding of that
	// state; the sharded layout (NewSharded) spreads it.
	Cluster bool
	// KeyPrefix starts every key; it must contain a non-empty hash tag
	// ("{...}"). Relays sharing a prefix share routing state. Empty means
	// DefaultPrefix.
	KeyPrefix string
	// MaxRetries is how often valkey-go re-sends a retryable command that
	// failed on the connection, at once, before the store's own retry
	// through an outage takes over (outage.go) (0 means 3; negative means
	// never).
	MaxRetries int
	// DialTimeout bounds connecting, the handshake included (0 means
	// Timeout, or valkey-go's 5 s when that is zero too).
	DialTimeout time.Duration
	// Timeout is how long a connection may wait for a reply before
	// valkey-go declares it dead and reconnects (its ConnWriteTimeout,
	// which also bounds the keep-alive PING). A caller's context deadline
	// ends its own wait sooner, but callers queued behind a reconnect wait
	// for the dial timeout, not for their context; valkey-go's defaults
	// (10 s and 5 s) let a frozen server hold them that long. 0 keeps
	// those defaults.
	Timeout time.Duration
	// ResultsCacheBytes bounds the memory this replica spends caching the
	// sites' results listings, least recently polled first to go (0 means
	// DefaultResultsCacheBytes; negative caches nothing).
	ResultsCacheBytes int64
	// OnRetry, when set, is told of every retry of a store call through
	// a short outage (outage.go), for a metric.
	OnRetry RetryObserver
	// Logger, when set, hears when a site's results listing is larger
	// than the cache (once per site until it fits again).
	Logger *slog.Logger
	// WaitReplicas, when positive, makes every write wait until that many
	// replicas confirmed it (WAIT), so that a failover cannot lose an
	// acknowledged write (replication.go). WaitTimeout bounds the wait
	// (0 means DefaultWaitTimeout); a write confirmed by fewer is an
	// outage the caller may retry.
	WaitReplicas int
	WaitTimeout  time.Duration
}

// DefaultWaitTimeout bounds a write's wait for its replicas when
// Options.WaitTimeout is zero: well inside the default store timeout.
const DefaultWaitTimeout = 500 * time.Millisecond

// ValidatePrefix checks that a key prefix carries a hash tag, so that all
// keys of one call land in one slot.
func ValidatePrefix(prefix string) error {
	open := strings.IndexByte(prefix, '{')
	if open < 0 {
		return fmt.Errorf("valkey store: key prefix %q has no hash tag: put one in braces, e.g. %q", prefix, DefaultPrefix)
	}
	end := strings.IndexByte(prefix[open+1:], '}')
	if end <= 0 {
		return fmt.Errorf("valkey store: key prefix %q has no non-empty hash tag: put one in braces, e.g. %q", prefix, DefaultPrefix)
	}
	return nil
}

// clientOption maps Options onto valkey-go's client options.
func (o Options) clientOption() (valkey.ClientOption, error) {
	if len(o.Addrs) == 0 {
		return valkey.ClientOption{}, errors.New("valkey store: no server address")
	}
	retries := o.MaxRetries
	if retries == 0 {
		retries = 3
	}
	opt := valkey.ClientOption{
		InitAddress: append([]string(nil), o.Addrs...),
		Username:    o.Username,
		Password:    o.Password,
		TLSConfig:   o.TLS,
		// The store never uses client-side caching.
		DisableCache: true,
		ClientName:   "relayd",
		// Bounded retries: a relay answers 503 rather than hang when the
		// server is gone; each script is safe to re-run.
		RetryDelay: func(attempts int, _ valkey.Completed, _ error) time.Duration {
			if attempts > retries {
				return -1
			}
			return time.Duration(attempts) * 20 * time.Millisecond
		},
	}
	if retries < 0 {
		opt.DisableRetry = true
	}
	opt.Dialer.Timeout = o.DialTimeout
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = o.Timeout
	}
	opt.ConnWriteTimeout = o.Timeout
	switch {
	case o.SentinelMasterSet != "":
		if o.Cluster {
			return valkey.ClientOption{}, errors.New("valkey store: Sentinel and Cluster are exclusive")
		}
		opt.Sentinel = valkey.SentinelOption{
			MasterSet: o.SentinelMasterSet,
			Username:  o.SentinelUsername,
			Password:  o.SentinelPassword,
			TLSConfig: o.TLS,
		}
	case !o.Cluster:
		opt.ForceSingleClient = true
	}
	return opt, nil
}

// New connects to Valkey, loads the scripts and returns the store, which
// owns the connection and closes it on Close.
func New(ctx context.Context, o Options) (*Store, error) {
	prefix := o.KeyPrefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	client, err := o.dial()
	if err != nil {
		return nil, err
	}
	s, err := NewFromClient(client, prefix)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.owned = true
	s.onRetry = o.OnRetry
	if o.WaitReplicas > 0 {
		s.replication = replication{replicas: int64(o.WaitReplicas), timeout: cmp.Or(o.WaitTimeout, DefaultWaitTimeout)}
	}
	if o.ResultsCacheBytes != 0 {
		s.results = newResultsCache(max(o.ResultsCacheBytes, 0))
	}
	if o.Logger != nil {
		s.results.logger = o.Logger
	}
	if err := s.open(ctx); err != nil {
		client.Close()
		return nil, err
	}
	return s, nil
}

// dial makes the client o describes.
func (o Options) dial() (valkey.Client, error) {
	opt, err := o.clientOption()
	if err != nil {
		return nil, err
	}
	client, err := valkey.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("valkey store: connecting to %v: %w", o.Addrs, err)
	}
	return client, nil
}

// open readies a new store for its first call: the server answers, the
// library of scripts is on every node, and the prefix's record-format
// marker names a format this relay reads.
func (s *Store) open(ctx context.Context) error {
	if err := s.Ping(ctx); err != nil {
		return err
	}
	if err := s.LoadScripts(ctx); err != nil {
		return err
	}
	return s.CheckFormat(ctx)
}

// NewSharing opens one store per prefix, all on one client made from o:
// key groups under different hash tags, as a layout sharded by bucket
// would hold them (docs/sharding.md). Each store checks its prefix's
// record-format marker, as New does. Of o it uses only how to reach the
// servers (addresses, credentials, TLS, Sentinel or Cluster, timeouts):
// its KeyPrefix, WaitReplicas, ResultsCacheBytes, OnRetry and Logger are
// not applied. closeAll closes the client, which the stores share.
func NewSharing(ctx context.Context, o Options, prefixes []string) (stores []*Store, closeAll func(), err error) {
	client, err := o.dial()
	if err != nil {
		return nil, nil, err
	}
	scripts, err := loadScripts()
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	for i, prefix := range prefixes {
		err := ValidatePrefix(prefix)
		s := onScripts(client, prefix, scripts, false)
		switch {
		case err != nil:
		case i == 0:
			err = s.open(ctx)
		default: // the same server and the same library: only the marker differs
			err = s.CheckFormat(ctx)
		}
		if err != nil {
			client.Close()
			return nil, nil, fmt.Errorf("valkey store: opening prefix %q: %w", prefix, err)
		}
		stores = append(stores, s)
	}
	return stores, client.Close, nil
}
