package config_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/ratelimit"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

var required = []string{"--fixture", "f.json", "--site-id", "site_a"}

func TestDefaults(t *testing.T) {
	c, err := config.Load(required, env(nil))
	require.NoError(t, err)
	require.Equal(t, ":8080", c.Listen)
	require.Equal(t, "127.0.0.1:9090", c.AdminListen, "the admin listener is private by default")
	require.Equal(t, "/byollm", c.BasePath)
	require.Equal(t, int64(60_000), c.LeaseMs)
	require.Equal(t, config.StoreMemory, c.Store)
	require.False(t, c.PublicDebug, "the debug page is not public by default")
	require.Equal(t, int64(8<<20), c.MaxBodyBytes)
}

func TestEnvironmentTwins(t *testing.T) {
	c, err := config.Load(nil, env(map[string]string{
		"RELAYD_FIXTURE": "/etc/relayd/fixture.json", "RELAYD_SITE_ID": "site_b", "RELAYD_LEASE_MS": "30000",
		"RELAYD_STORE": "valkey", "RELAYD_VALKEY_ADDR": "a:6379, b:6379", "RELAYD_VALKEY_CLUSTER": "true",
		"RELAYD_SWEEP_INTERVAL": "2s", "RELAYD_PUBLIC_DEBUG": "true",
	}))
	require.NoError(t, err)
	require.Equal(t, "/etc/relayd/fixture.json", c.Fixture)
	require.Equal(t, "site_b", c.SiteID)
	require.Equal(t, int64(30_000), c.LeaseMs)
	require.Equal(t, []string{"a:6379", "b:6379"}, c.Valkey.Addrs)
	require.True(t, c.Valkey.Cluster)
	require.Equal(t, 2*time.Second, c.SweepInterval)
	require.True(t, c.PublicDebug)
}

func TestFlagWinsOverEnvironment(t *testing.T) {
	c, err := config.Load(append(required, "--lease-ms", "1000"), env(map[string]string{"RELAYD_LEASE_MS": "9999", "RELAYD_SITE_ID": "ignored"}))
	require.NoError(t, err)
	require.Equal(t, int64(1000), c.LeaseMs)
	require.Equal(t, "site_a", c.SiteID)
}

func TestRefusesWhatCannotRun(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"no fixture":          {args: []string{"--site-id", "s"}, want: "fixture is required"},
		"no site":             {args: []string{"--fixture", "f"}, want: "site id is required"},
		"valkey without addr": {args: append(required, "--store", "valkey"), want: "needs --valkey-addr"},
		"unknown store":       {args: append(required, "--store", "etcd"), want: `unknown --store "etcd"`},
		"bad lease":           {args: append(required, "--lease-ms", "0"), want: "lease-ms must be positive"},
		"bad env value":       {args: required, env: map[string]string{"RELAYD_LEASE_MS": "soon"}, want: "RELAYD_LEASE_MS"},
		"stray argument":      {args: append(required, "extra"), want: "unexpected arguments"},
		"untagged prefix": {args: append(required, "--store", "valkey", "--valkey-addr", "a:1", "--valkey-prefix", "relayd:"),
			want: "needs a non-empty {hash tag}"},
		"cluster and sentinel": {args: append(required, "--store", "valkey", "--valkey-addr", "a:1", "--valkey-cluster", "--valkey-sentinel-master", "m"),
			want: "cannot both be set"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(tc.args, env(tc.env))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSettingsNameEveryFlagAndItsTwin(t *testing.T) {
	names := map[string]bool{}
	for _, s := range config.Settings() {
		require.Regexp(t, regexp.MustCompile(`^RELAYD_[A_Z0-9_]+$|^RELAYD_[A-Z0-9_]+$`), s.Env)
		require.Equal(t, config.EnvName(s.Flag), s.Env)
		require.NotEmpty(t, s.Usage)
		require.False(t, names[s.Env], "duplicate %s", s.Env)
		names[s.Env] = true
	}
	for _, want := range []string{"RELAYD_LISTEN", "RELAYD_ADMIN_LISTEN", "RELAYD_FIXTURE", "RELAYD_SITE_ID", "RELAYD_BASE_PATH", "RELAYD_LEASE_MS", "RELAYD_STORE"} {
		require.True(t, names[want], want)
	}
}

// The README's configuration table is the operator's reference; it must
// name every setting relayd has.
func TestReadmeDocumentsEverySetting(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	for _, s := range config.Settings() {
		require.Contains(t, string(readme), "`--"+s.Flag+"` | `"+s.Env+"`", "README row for %s", s.Flag)
	}
}

// --test-clock-offset exists for the replica tests only: it works as a
// flag, but an operator can find it neither in --help, nor in Settings,
// nor through the environment.
func TestTestClockOffsetIsHidden(t *testing.T) {
	c, err := config.Load(append(required, "--test-clock-offset", "-60s"), env(nil))
	require.NoError(t, err)
	require.Equal(t, -60*time.Second, c.TestClockOffset)

	c, err = config.Load(required, env(map[string]string{"RELAYD_TEST_CLOCK_OFFSET": "60s"}))
	require.NoError(t, err)
	require.Zero(t, c.TestClockOffset, "no environment twin")

	for _, s := range config.Settings() {
		require.NotEqual(t, "test-clock-offset", s.Flag)
	}
	var help strings.Builder
	config.Usage(&help)
	require.NotContains(t, help.String(), "clock-offset")
}

func TestLimitsAndRateLimitDefaults(t *testing.T) {
	c, err := config.Load(required, env(nil))
	require.NoError(t, err)
	require.Equal(t, 64<<10, c.MaxHeaderBytes)
	require.Equal(t, 10*time.Second, c.ReadHeaderTimeout)
	require.Equal(t, 256, c.MaxListItems)
	require.Equal(t, 4<<20, c.MaxCiphertextBytes)
	require.Equal(t, ratelimit.Rate{Every: 20 * time.Millisecond, Burst: 100}, c.RateLimit, "50/s, burst 100")
	require.Equal(t, ratelimit.Rate{Every: 2 * time.Millisecond, Burst: 1000}, c.SiteRateLimit, "500/s, burst 1000")
	require.False(t, c.TrustForwardedFor, "X-Forwarded-For is the caller's to write unless a load balancer is in front")
}

func TestLimitsAndRateLimitsFromTheEnvironment(t *testing.T) {
	c, err := config.Load(required, env(map[string]string{
		"RELAYD_MAX_HEADER_BYTES": "8192", "RELAYD_READ_HEADER_TIMEOUT": "3s", "RELAYD_MAX_LIST_ITEMS": "64",
		"RELAYD_MAX_CIPHERTEXT_BYTES": "1024", "RELAYD_RATE_LIMIT": "600/m", "RELAYD_RATE_BURST": "5",
		"RELAYD_SITE_RATE_LIMIT": "0", "RELAYD_TRUST_FORWARDED_FOR": "true",
	}))
	require.NoError(t, err)
	require.Equal(t, 8192, c.MaxHeaderBytes)
	require.Equal(t, 3*time.Second, c.ReadHeaderTimeout)
	require.Equal(t, 64, c.MaxListItems)
	require.Equal(t, 1024, c.MaxCiphertextBytes)
	require.Equal(t, ratelimit.Rate{Every: 100 * time.Millisecond, Burst: 5}, c.RateLimit)
	require.False(t, c.SiteRateLimit.Enabled(), "0 disables")
	require.True(t, c.TrustForwardedFor)
}

func TestLimitsThatCannotRunAreRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no header room":      {[]string{"--max-header-bytes", "0"}, "--max-header-bytes must be positive"},
		"no header timeout":   {[]string{"--read-header-timeout", "0s"}, "--read-header-timeout must be positive"},
		"no list items":       {[]string{"--max-list-items", "0"}, "--max-list-items must be positive"},
		"no ciphertext":       {[]string{"--max-ciphertext-bytes", "-1"}, "--max-ciphertext-bytes must be positive"},
		"unreadable rate":     {[]string{"--rate-limit", "fast"}, "not a rate"},
		"zero burst":          {[]string{"--rate-burst", "0"}, "--rate-limit and --rate-burst"},
		"site rate too fine":  {[]string{"--site-rate-limit", "5000000/s"}, "more than a million a second"},
		"negative site burst": {[]string{"--site-rate-burst", "-1"}, "--site-rate-limit and --site-rate-burst"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(append(append([]string{}, required...), tc.args...), env(nil))
			require.ErrorContains(t, err, tc.want)
		})
	}
	// A disabled rate needs no burst.
	_, err := config.Load(append(append([]string{}, required...), "--rate-limit", "0", "--rate-burst", "0"), env(nil))
	require.NoError(t, err)
}

// --store-timeout bounds every store call: short by default, set by its
// environment twin, beaten by the flag, and never zero (no deadline).
func TestStoreTimeout(t *testing.T) {
	c, err := config.Load(required, env(nil))
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, c.StoreTimeout)

	c, err = config.Load(required, env(map[string]string{"RELAYD_STORE_TIMEOUT": "750ms"}))
	require.NoError(t, err)
	require.Equal(t, 750*time.Millisecond, c.StoreTimeout)

	c, err = config.Load(append(append([]string{}, required...), "--store-timeout", "3s"), env(map[string]string{"RELAYD_STORE_TIMEOUT": "750ms"}))
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, c.StoreTimeout, "the flag wins")

	for _, bad := range []string{"0", "-1s"} {
		_, err = config.Load(append(append([]string{}, required...), "--store-timeout", bad), env(nil))
		require.ErrorContains(t, err, "--store-timeout must be positive", bad)
	}
}

// --results-cache-bytes bounds each replica's cache of results listings:
// 64 MiB by default, set by its environment twin, beaten by the flag; 0
// reaches the store as "no cache" (the store itself reads 0 as its
// default), and a negative bound is refused.
func TestResultsCacheBytes(t *testing.T) {
	c, err := config.Load(required, env(nil))
	require.NoError(t, err)
	require.Equal(t, int64(64<<20), c.ResultsCacheBytes)
	require.Equal(t, int64(64<<20), c.StoreValkeyOptions().ResultsCacheBytes)

	c, err = config.Load(required, env(map[string]string{"RELAYD_RESULTS_CACHE_BYTES": "1048576"}))
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), c.StoreValkeyOptions().ResultsCacheBytes)

	c, err = config.Load(append(append([]string{}, required...), "--results-cache-bytes", "0"), env(map[string]string{"RELAYD_RESULTS_CACHE_BYTES": "1048576"}))
	require.NoError(t, err, "the flag wins")
	require.Negative(t, c.StoreValkeyOptions().ResultsCacheBytes, "zero must reach the store as no cache, not as its default")

	_, err = config.Load(append(append([]string{}, required...), "--results-cache-bytes", "-1"), env(nil))
	require.ErrorContains(t, err, "--results-cache-bytes must not be negative")
}

// The Valkey store is opened under the store-wide deadline.
func TestStoreValkeyOptionsCarryTheDeadline(t *testing.T) {
	c, err := config.Load(append(append([]string{}, required...), "--store-timeout", "3s"), env(nil))
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, c.StoreValkeyOptions().Timeout)
}
