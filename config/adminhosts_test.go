package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/config"
)

func TestAdminHostsDefaultToNone(t *testing.T) {
	c, err := config.Load(required, env(nil))
	require.NoError(t, err)
	require.Empty(t, c.AdminHosts)
	require.Empty(t, c.AdminHostNames(), "127.0.0.1:9090 listens on an address, which is always answered")
}

func TestAdminHostsFromTheFlagAndItsTwin(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want []string
	}{
		"flag":              {args: []string{"--admin-hosts", "relayd, Admin.Example:8443"}, want: []string{"relayd", "admin.example:8443"}},
		"repeated flag":     {args: []string{"--admin-hosts", "a", "--admin-hosts", "b:1"}, want: []string{"a", "b:1"}},
		"environment":       {env: map[string]string{"RELAYD_ADMIN_HOSTS": "relayd,,[::1]:9090"}, want: []string{"relayd", "[::1]:9090"}},
		"flag wins":         {args: []string{"--admin-hosts", "from-flag"}, env: map[string]string{"RELAYD_ADMIN_HOSTS": "from-env"}, want: []string{"from-flag"}},
		"star":              {args: []string{"--admin-hosts", "*"}, want: []string{"*"}},
		"ip and underscore": {args: []string{"--admin-hosts", "10.0.0.7,relayd_admin.internal"}, want: []string{"10.0.0.7", "relayd_admin.internal"}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := config.Load(append(append([]string{}, required...), tc.args...), env(tc.env))
			require.NoError(t, err)
			require.Equal(t, tc.want, c.AdminHosts)
		})
	}
}

func TestAdminHostsRefusesWhatCouldMatchNothing(t *testing.T) {
	for _, entry := range []string{"http://relayd", "relayd/metrics", "relayd:0", "relayd:http", "relayd:70000", "two words", "relayd.", ".relayd", "user@relayd"} {
		t.Run(entry, func(t *testing.T) {
			_, err := config.Load(append(append([]string{}, required...), "--admin-hosts", entry), env(nil))
			require.ErrorContains(t, err, "admin host")
			_, err = config.Load(required, env(map[string]string{"RELAYD_ADMIN_HOSTS": entry}))
			require.ErrorContains(t, err, "RELAYD_ADMIN_HOSTS")
		})
	}
}

// A listener bound to a name is reached by that name.
func TestAdminHostNamesAddTheAdminListenName(t *testing.T) {
	for listen, want := range map[string][]string{
		"127.0.0.1:9090":          {"extra"},
		":9090":                   {"extra"},
		"[::]:9090":               {"extra"},
		"Relayd-Admin.local:9090": {"extra", "relayd-admin.local"},
	} {
		c, err := config.Load(append(append([]string{}, required...), "--admin-listen", listen, "--admin-hosts", "extra"), env(nil))
		require.NoError(t, err)
		require.Equal(t, want, c.AdminHostNames(), "--admin-listen %s", listen)
	}
}
