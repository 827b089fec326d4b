// Package config is relayd's configuration: every setting is a command-line
// flag with a RELAYD_* environment twin, and a flag given on the command line
// wins over its environment variable.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/byollm/relayd/pairing"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store/backend"
)

// Store kinds, as --store names them.
const (
	StoreMemory = backend.Memory
	StoreValkey = backend.Valkey
)

// Config is everything relayd can be told.
type Config struct {
	Listen          string
	AdminListen     string
	Fixture         string
	FixturePoll     time.Duration
	SiteID          string
	BasePath        string
	LeaseMs         int64
	Store           string
	SweepInterval   time.Duration
	PublicDebug     bool
	Pprof           bool
	MaxBodyBytes    int64
	ShutdownTimeout time.Duration
	LogLevel        string

	// StoreTimeout bounds every store call (and rate-limiter call) that a
	// request or the sweeper makes; /readyz gets half of it.
	StoreTimeout time.Duration
	// ResultsCacheBytes bounds this replica's cache of rendered results
	// listings on the Valkey store; zero caches nothing.
	ResultsCacheBytes int64

	// Limits on what one request may cost (docs/security.md).
	MaxHeaderBytes     int
	ReadHeaderTimeout  time.Duration
	MaxListItems       int
	MaxCiphertextBytes int
	// RateLimit applies to each runner and each pairing client address,
	// SiteRateLimit to each site; an Every of zero disables one.
	RateLimit         ratelimit.Rate
	SiteRateLimit     ratelimit.Rate
	TrustForwardedFor bool
	// AdminHosts are the Host names the admin listener answers for beyond
	// localhost and IP literals ("*": any), from --admin-hosts.
	AdminHosts []string

	// TestClockOffset moves this process's own clock (signature freshness,
	// serverTime, the memory store) by a fixed amount. It exists only so
	// that tests can run replicas with skewed clocks: Go reads the time
	// through the vDSO, so libfaketime cannot. It is hidden from --help,
	// has no environment twin and must never be set in production.
	TestClockOffset time.Duration

	Valkey Valkey

	// Protocols are the wire protocols served, from --protocols.
	Protocols Protocols
	// VerificationURL turns on device-code pairing (protocol "2"): where a
	// person approves a code. Empty answers a pairing start with 501.
	VerificationURL string
	// DaemonFloor and UpdateOffer are protocol "2"'s daemon versions: the
	// oldest a heartbeat accepts (426 below it) and the one offered as
	// updateTo. Empty for none.
	DaemonFloor string
	UpdateOffer string
	// PairingCapacity is how many device codes may be pending at once.
	PairingCapacity int
	// GrantKeyFiles turns on local grant authoring (protocol "2",
	// docs/grants.md): the paths of the PEM PKCS#8 Ed25519 grant keys,
	// the first current. Only the paths: the server loads the keys into
	// package admission, the one holder of key material. Empty is off.
	GrantKeyFiles []string
	// GrantAuthor is an external grant author (grantauthor.go), beside or
	// instead of the local keys.
	GrantAuthor GrantAuthor
	// GrantOwnDefault is G-R8's fallback for the owner's own unmapped
	// work, from --grant-own-default (on unless set false, DG3): an own
	// job with no mapping runs on the one service the claim offers for
	// its kind. Without GrantKeyFiles it does nothing.
	GrantOwnDefault bool
}

// Protocols says which wire protocols relayd serves.
type Protocols struct {
	V0, V2 bool
}

// DefaultProtocols is --protocols' default: both, so that the published
// "2" clients and the earlier "0" ones work out of the box.
const DefaultProtocols = "0,2"

// String lists the protocols as --protocols takes them.
func (p Protocols) String() string {
	var out []string
	if p.V0 {
		out = append(out, "0")
	}
	if p.V2 {
		out = append(out, "2")
	}
	return strings.Join(out, ",")
}

// protocolsFlag reads --protocols: "0", "2" or both, comma-separated.
type protocolsFlag struct{ p *Protocols }

func (f protocolsFlag) String() string {
	if f.p == nil {
		return DefaultProtocols
	}
	return f.p.String()
}

func (f protocolsFlag) Set(s string) error {
	var p Protocols
	for _, v := range strings.Split(s, ",") {
		switch strings.TrimSpace(v) {
		case "0":
			p.V0 = true
		case "2":
			p.V2 = true
		default:
			return fmt.Errorf("unknown protocol %q (want 0, 2 or 0,2)", strings.TrimSpace(v))
		}
	}
	*f.p = p
	return nil
}

// Valkey configures the Valkey store.
type Valkey = backend.ValkeyOptions

// StoreValkeyOptions is how this configuration opens the Valkey store:
// its connection settings with the store-wide deadline and cache bound.
func (c Config) StoreValkeyOptions() backend.ValkeyOptions {
	o := c.Valkey
	o.Timeout = c.StoreTimeout
	o.Proto0Site = c.SiteID
	o.ResultsCacheBytes = c.ResultsCacheBytes
	if o.ResultsCacheBytes == 0 {
		o.ResultsCacheBytes = -1 // the store reads zero as its default
	}
	return o
}

// Setting describes one flag and its environment twin.
type Setting struct {
	Flag  string
	Env   string
	Usage string
}

// EnvName is the environment twin of a flag: RELAYD_ and the flag name in
// upper case with dashes as underscores.
func EnvName(flagName string) string {
	return "RELAYD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// flagSet binds every setting to c, with defaults.
func flagSet(c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("relayd", flag.ContinueOnError)
	fs.StringVar(&c.Listen, "listen", ":8080", "public listen address (the protocol)")
	fs.StringVar(&c.AdminListen, "admin-listen", "127.0.0.1:9090", "admin listen address (/healthz, /readyz, /metrics, /debug); keep it private")
	fs.Func("admin-hosts", `Host names the admin listener (and --public-debug's page) answers for besides localhost and IP addresses, comma-separated, each name or name:port; "*" answers any, DNS-rebinding pages included`, func(s string) error {
		return addAdminHosts(&c.AdminHosts, s)
	})
	fs.StringVar(&c.Fixture, "fixture", "", "path of the projection fixture (JSON); required")
	fs.DurationVar(&c.FixturePoll, "fixture-poll", projection.DefaultPollInterval, "how often to re-read the fixture in case a file-system event was missed")
	fs.StringVar(&c.SiteID, "site-id", "", "the site this relay routes for; required")
	fs.StringVar(&c.BasePath, "base-path", protocol.DefaultBasePath, "path prefix of the daemon plane")
	fs.Int64Var(&c.LeaseMs, "lease-ms", protocol.DefaultLeaseMs, "lease length in milliseconds")
	fs.StringVar(&c.Store, "store", StoreMemory, "routing store: memory (single replica) or valkey (many replicas)")
	fs.DurationVar(&c.StoreTimeout, "store-timeout", 2*time.Second, "longest one store call may take before the request is answered 503 with Retry-After; /readyz gets half. Healthy calls take milliseconds, so 2s is slack for a busy Valkey yet keeps a frozen one from holding requests (valkey-go's own defaults: 10s)")
	fs.DurationVar(&c.SweepInterval, "sweep-interval", 5*time.Second, "how often this replica sweeps passed deadlines in the background (0 disables)")
	fs.BoolVar(&c.PublicDebug, "public-debug", false, "also serve the debug page on the public listener (never in production)")
	fs.BoolVar(&c.Pprof, "pprof", false, "serve Go's /debug/pprof/ profiles on the admin listener")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", protocol.DefaultMaxBodyBytes, "largest request body accepted; larger ones get 413")
	fs.IntVar(&c.MaxHeaderBytes, "max-header-bytes", 64<<10, "largest request header block accepted, on both listeners")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "how long a client may take to send its request headers, on both listeners")
	fs.IntVar(&c.MaxListItems, "max-list-items", protocol.DefaultMaxListItems, "most items in a request's capabilities, activeLeases or leases list; more get 400")
	fs.IntVar(&c.MaxCiphertextBytes, "max-ciphertext-bytes", protocol.DefaultMaxCiphertextBytes, "largest envelope ciphertext accepted, in bytes of its text; larger gets 400")
	c.RateLimit.Every, c.SiteRateLimit.Every = 20*time.Millisecond, 2*time.Millisecond
	fs.Var(everyFlag{&c.RateLimit.Every}, "rate-limit", "requests each runner, and each client address pairing, may make: 50/s, 600/m; 0 disables")
	fs.IntVar(&c.RateLimit.Burst, "rate-burst", 100, "requests a runner or pairing address idle for long enough may make at once")
	fs.Var(everyFlag{&c.SiteRateLimit.Every}, "site-rate-limit", "requests each site may make (all of a site's traffic, across replicas); 0 disables")
	fs.IntVar(&c.SiteRateLimit.Burst, "site-rate-burst", 1000, "requests a site idle for long enough may make at once")
	fs.BoolVar(&c.TrustForwardedFor, "trust-forwarded-for", false, "charge pairing to the last X-Forwarded-For address; only behind a load balancer that appends it")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "how long in-flight requests may take to finish on SIGTERM")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	c.Protocols = Protocols{V0: true, V2: true}
	fs.Var(protocolsFlag{&c.Protocols}, "protocols", `wire protocols served: "0", "2" or "0,2"; each request is served by the one it declares`)
	fs.StringVar(&c.VerificationURL, "verification-url", "", `protocol "2": the page where people approve a pairing code; without it device-code pairing answers 501`)
	fs.StringVar(&c.DaemonFloor, "daemon-floor", "", `protocol "2": the oldest daemon version served (heartbeats below it get 426); empty for none`)
	fs.StringVar(&c.UpdateOffer, "update-offer", "", `protocol "2": the daemon version offered to older daemons as updateTo; empty for none`)
	fs.IntVar(&c.PairingCapacity, "pairing-capacity", pairing.DefaultCapacity, `protocol "2": how many pairing codes may be pending at once, across replicas`)
	fs.Func("grant-key-file", `protocol "2": the grant signing keys, PEM PKCS#8 Ed25519 files (openssl genpkey -algorithm ed25519), comma-separated or repeated, the first current; empty (the default) authors no grants, and devices serve their owners only (P2-D4)`, func(s string) error {
		for _, path := range strings.Split(s, ",") {
			c.GrantKeyFiles = append(c.GrantKeyFiles, strings.TrimSpace(path))
		}
		return nil
	})
	grantAuthorFlags(fs, &c.GrantAuthor)
	fs.BoolVar(&c.GrantOwnDefault, "grant-own-default", true, `protocol "2", with --grant-key-file: grant the owner's own job that no mapping names onto the one service the claim offers for its kind (none when two or more offer it); false declines it unmapped, as the reference control plane does`)
	fs.DurationVar(&c.TestClockOffset, testClockOffsetFlag, 0, "TESTS ONLY: shift this process's own clock by this much")
	fs.Func("valkey-addr", "Valkey address host:port; repeat or comma-separate for cluster seeds or sentinels", func(s string) error {
		for _, a := range strings.Split(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.Valkey.Addrs = append(c.Valkey.Addrs, a)
			}
		}
		return nil
	})
	fs.StringVar(&c.Valkey.Username, "valkey-username", "", "Valkey ACL user name")
	fs.StringVar(&c.Valkey.Password, "valkey-password", "", "Valkey password (prefer the environment variable)")
	fs.BoolVar(&c.Valkey.TLS, "valkey-tls", false, "connect to Valkey over TLS")
	fs.StringVar(&c.Valkey.SentinelMaster, "valkey-sentinel-master", "", "Sentinel master set name; the addresses are then sentinels")
	fs.BoolVar(&c.Valkey.Cluster, "valkey-cluster", false, "the addresses are Valkey Cluster seed nodes")
	fs.Int64Var(&c.ResultsCacheBytes, "results-cache-bytes", backend.DefaultResultsCacheBytes, "bytes this replica may spend caching the sites' rendered results listings (valkey store), least recently polled first to go; 0 caches nothing")
	fs.StringVar(&c.Valkey.Prefix, "valkey-prefix", backend.DefaultValkeyPrefix, "key prefix for this relay's routing state; must hold a {hash tag}, and replicas sharing it share state")
	fs.StringVar(&c.Valkey.Layout, "valkey-layout", backend.LayoutOneSlot, "how the routing state is laid out over hash tags: one-slot (one primary carries it all) or sharded (sites spread over --valkey-buckets buckets, so a cluster's primaries share the work; a fresh --valkey-prefix, never converted, docs/sharding.md)")
	fs.IntVar(&c.Valkey.Buckets, "valkey-buckets", backend.DefaultBuckets, "buckets of the sharded layout, fixed when its keyspace is made; many times the cluster's primaries")
	fs.IntVar(&c.Valkey.WaitReplicas, "valkey-wait-replicas", 0, "make every write wait (WAIT) until this many Valkey replicas have it, so a failover loses no acknowledged claim, enqueue or result; 0 waits for none (asynchronous replication, as Valkey's default)")
	fs.DurationVar(&c.Valkey.WaitTimeout, "valkey-wait-timeout", backend.DefaultWaitTimeout, "longest a write waits for --valkey-wait-replicas; one not confirmed in time is retried within --store-timeout, then answered 503")
	return fs
}

// Settings lists every flag with its environment twin, for documentation
// and for checking deployment files against the real configuration.
func Settings() []Setting {
	var out []Setting
	flagSet(&Config{}).VisitAll(func(f *flag.Flag) {
		if hidden(f.Name) {
			return
		}
		out = append(out, Setting{Flag: f.Name, Env: EnvName(f.Name), Usage: f.Usage})
	})
	return out
}

// Load reads the configuration from args (without the program name) and
// from the environment through getenv.
func Load(args []string, getenv func(string) string) (Config, error) {
	var c Config
	fs := flagSet(&c)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("parse flags: %w", err)
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || hidden(f.Name) {
			return
		}
		if v := getenv(EnvName(f.Name)); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", EnvName(f.Name), err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

// Validate checks that the configuration can run.
func (c Config) Validate() error {
	var errs []error
	if c.Fixture == "" {
		errs = append(errs, errors.New("a fixture is required (--fixture or RELAYD_FIXTURE)"))
	}
	if c.SiteID == "" && c.Protocols.V0 {
		errs = append(errs, errors.New(`a site id is required to serve protocol "0" (--site-id or RELAYD_SITE_ID)`))
	}
	errs = append(errs, c.validateV2()...)
	for _, p := range []struct {
		flag     string
		positive bool
	}{
		{"lease-ms", c.LeaseMs > 0},
		{"store-timeout", c.StoreTimeout > 0},
		{"max-body-bytes", c.MaxBodyBytes > 0},
		{"max-header-bytes", c.MaxHeaderBytes > 0},
		{"read-header-timeout", c.ReadHeaderTimeout > 0},
		{"max-list-items", c.MaxListItems > 0},
		{"max-ciphertext-bytes", c.MaxCiphertextBytes > 0},
		{"pairing-capacity", c.PairingCapacity > 0},
	} {
		if !p.positive {
			errs = append(errs, fmt.Errorf("--%s must be positive", p.flag))
		}
	}
	if c.ResultsCacheBytes < 0 {
		errs = append(errs, errors.New("--results-cache-bytes must not be negative (0 caches nothing)"))
	}
	if err := c.RateLimit.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--rate-limit and --rate-burst: %w", err))
	}
	if err := c.SiteRateLimit.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--site-rate-limit and --site-rate-burst: %w", err))
	}
	switch c.Store {
	case StoreMemory:
	case StoreValkey:
		if len(c.Valkey.Addrs) == 0 {
			errs = append(errs, errors.New("--store valkey needs --valkey-addr"))
		}
		// The store's own rule, so the flag is refused here, at start, for
		// exactly what the store would refuse.
		if backend.ValidateValkeyPrefix(c.Valkey.Prefix) != nil {
			errs = append(errs, fmt.Errorf("--valkey-prefix %q needs a non-empty {hash tag}, as in the default %q", c.Valkey.Prefix, backend.DefaultValkeyPrefix))
		}
		if c.Valkey.Cluster && c.Valkey.SentinelMaster != "" {
			errs = append(errs, errors.New("--valkey-cluster and --valkey-sentinel-master cannot both be set"))
		}
		switch c.Valkey.Layout {
		case backend.LayoutOneSlot:
		case backend.LayoutSharded:
			if c.Valkey.Buckets < 1 || c.Valkey.Buckets > backend.MaxBuckets {
				errs = append(errs, fmt.Errorf("--valkey-buckets %d: want 1 to %d", c.Valkey.Buckets, backend.MaxBuckets))
			}
		default:
			errs = append(errs, fmt.Errorf("unknown --valkey-layout %q (want %s or %s)", c.Valkey.Layout, backend.LayoutOneSlot, backend.LayoutSharded))
		}
		if c.Valkey.WaitReplicas < 0 {
			errs = append(errs, fmt.Errorf("--valkey-wait-replicas %d: want 0 or more", c.Valkey.WaitReplicas))
		}
		if c.Valkey.WaitReplicas > 0 && (c.Valkey.WaitTimeout <= 0 || c.Valkey.WaitTimeout >= c.StoreTimeout) {
			errs = append(errs, fmt.Errorf("--valkey-wait-timeout %s: want more than 0 and less than --store-timeout (%s), so a retry fits", c.Valkey.WaitTimeout, c.StoreTimeout))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown --store %q (want memory or valkey)", c.Store))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("unknown --log-level %q", c.LogLevel))
	}
	return errors.Join(errs...)
}

// validateV2 checks protocol "2"'s settings: each is refused at start for
// what would otherwise fail quietly for every daemon.
func (c Config) validateV2() []error {
	var errs []error
	if !c.Protocols.V0 && !c.Protocols.V2 {
		errs = append(errs, errors.New("--protocols must name at least one protocol"))
	}
	if c.VerificationURL != "" {
		// The daemon refuses a start answer whose URL does not parse
		// (P2-S39), so every pairing would fail.
		if u, err := url.Parse(c.VerificationURL); err != nil || u.Scheme == "" {
			errs = append(errs, fmt.Errorf("--verification-url %q is not an absolute URL", c.VerificationURL))
		}
	}
	// An unparseable floor would refuse nobody, and an offer that is not an
	// exact version would never be made: both are mistakes to say at once.
	if c.DaemonFloor != "" {
		if _, ok := proto2.CompareVersions(c.DaemonFloor, c.DaemonFloor); !ok {
			errs = append(errs, fmt.Errorf("--daemon-floor %q is not a version like 0.1.1", c.DaemonFloor))
		}
	}
	if _, ok := proto2.CompareVersions(c.UpdateOffer, c.UpdateOffer); c.UpdateOffer != "" && !ok {
		errs = append(errs, fmt.Errorf("--update-offer %q is not a version like 0.1.2", c.UpdateOffer))
	}
	// Grants exist only on protocol "2" (G-R30); a key on a relay that
	// does not serve it would sign nothing, which is a mistake to say.
	if len(c.GrantKeyFiles) > 0 && !c.Protocols.V2 {
		errs = append(errs, errors.New(`--grant-key-file needs protocol "2" (--protocols 2 or 0,2)`))
	}
	if !c.GrantOwnDefault && !c.Protocols.V2 {
		errs = append(errs, errors.New(`--grant-own-default needs protocol "2" (--protocols 2 or 0,2)`))
	}
	if slices.Contains(c.GrantKeyFiles, "") {
		errs = append(errs, errors.New("--grant-key-file names an empty path"))
	}
	return append(errs, c.GrantAuthor.validate(c.Protocols.V2)...)
}

// Usage writes the flag list with environment twins to w.
func Usage(w io.Writer) {
	fmt.Fprintln(w, "usage: relayd [flags]\n\nEvery flag can also be set by its environment variable; a flag wins.")
	fs := flagSet(&Config{})
	fs.VisitAll(func(f *flag.Flag) {
		if hidden(f.Name) {
			return
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			def = " (default " + strconv.Quote(f.DefValue) + ")"
		}
		fmt.Fprintf(w, "  --%s, %s\n      %s%s\n", f.Name, EnvName(f.Name), f.Usage, def)
	})
}

// testClockOffsetFlag is the one hidden flag; see Config.TestClockOffset.
const testClockOffsetFlag = "test-clock-offset"

// hidden reports whether a flag is left out of --help, Settings and the
// environment: test-only switches an operator must not find.
func hidden(name string) bool { return name == testClockOffsetFlag }

// everyFlag is a rate flag ("50/s", "600/m", "0") stored as the time
// between two tokens.
type everyFlag struct{ every *time.Duration }

func (f everyFlag) String() string {
	if f.every == nil {
		return "0"
	}
	return ratelimit.FormatEvery(*f.every)
}

func (f everyFlag) Set(s string) error {
	every, err := ratelimit.ParseEvery(s)
	if err != nil {
		return err
	}
	*f.every = every
	return nil
}
