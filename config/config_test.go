package config_test

import (
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/config"
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
