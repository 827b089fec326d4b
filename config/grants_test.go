package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/config"
)

// Grant authoring is off unless a key file is named (decision DG1).
func TestGrantKeyFileIsOffByDefault(t *testing.T) {
	c, err := config.Load(required, env(nil))
	require.NoError(t, err)
	require.Empty(t, c.GrantKeyFiles)
}

func TestGrantKeyFileFromTheFlagOrTheEnvironment(t *testing.T) {
	c, err := config.Load(append(append([]string{}, required...), "--grant-key-file", "/run/keys/current.pem, /run/keys/older.pem"), env(nil))
	require.NoError(t, err)
	require.Equal(t, []string{"/run/keys/current.pem", "/run/keys/older.pem"}, c.GrantKeyFiles, "the first is current")

	c, err = config.Load(append(append([]string{}, required...), "--grant-key-file", "/a.pem", "--grant-key-file", "/b.pem"), env(nil))
	require.NoError(t, err)
	require.Equal(t, []string{"/a.pem", "/b.pem"}, c.GrantKeyFiles, "repeated, in order")

	c, err = config.Load(required, env(map[string]string{"RELAYD_GRANT_KEY_FILE": "/run/keys/k.pem"}))
	require.NoError(t, err)
	require.Equal(t, []string{"/run/keys/k.pem"}, c.GrantKeyFiles)

	c, err = config.Load(append(append([]string{}, required...), "--grant-key-file", "/flag.pem"), env(map[string]string{"RELAYD_GRANT_KEY_FILE": "/env.pem"}))
	require.NoError(t, err)
	require.Equal(t, []string{"/flag.pem"}, c.GrantKeyFiles, "the flag wins")
}

func TestGrantKeyFileRefusals(t *testing.T) {
	_, err := config.Load(append(append([]string{}, required...), "--protocols", "0", "--grant-key-file", "/k.pem"), env(nil))
	require.ErrorContains(t, err, `--grant-key-file needs protocol "2"`)
	_, err = config.Load(append(append([]string{}, required...), "--grant-key-file", "/k.pem,"), env(nil))
	require.ErrorContains(t, err, "--grant-key-file names an empty path")
}

// The owner's default (G-R8) is on unless set false, by the flag or its
// twin (decision DG3).
func TestGrantOwnDefaultIsOnUnlessSetFalse(t *testing.T) {
	c, err := config.Load(required, env(nil))
	require.NoError(t, err)
	require.True(t, c.GrantOwnDefault, "on by default")

	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want bool
	}{
		"the flag false":            {args: []string{"--grant-own-default=false"}, want: false},
		"the flag true":             {args: []string{"--grant-own-default=true"}, want: true},
		"the twin false":            {env: map[string]string{"RELAYD_GRANT_OWN_DEFAULT": "false"}, want: false},
		"the flag wins over a twin": {args: []string{"--grant-own-default"}, env: map[string]string{"RELAYD_GRANT_OWN_DEFAULT": "false"}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := config.Load(append(append([]string{}, required...), tc.args...), env(tc.env))
			require.NoError(t, err)
			require.Equal(t, tc.want, c.GrantOwnDefault)
		})
	}

	_, err = config.Load(required, env(map[string]string{"RELAYD_GRANT_OWN_DEFAULT": "maybe"}))
	require.ErrorContains(t, err, "RELAYD_GRANT_OWN_DEFAULT")
}

// Setting a grant flag on a relay that does not serve "2" is a mistake to
// say at start (G-R30), the owner's default included.
func TestGrantOwnDefaultNeedsProtocolTwo(t *testing.T) {
	_, err := config.Load(append(append([]string{}, required...), "--protocols", "0", "--grant-own-default=false"), env(nil))
	require.ErrorContains(t, err, `--grant-own-default needs protocol "2"`)
	_, err = config.Load(append(append([]string{}, required...), "--protocols", "0"), env(nil))
	require.NoError(t, err, "left at its default it asks nothing of the protocols")
}
