package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/pairing"
)

// Protocol "2"'s settings: both protocols by default, so the published
// clients work out of the box; device-code pairing off until a
// verification URL is given; no floor and no offer.
func TestV2Defaults(t *testing.T) {
	c, err := config.Load(required, env(nil))
	require.NoError(t, err)
	require.Equal(t, config.Protocols{V0: true, V2: true}, c.Protocols)
	require.Equal(t, config.DefaultProtocols, c.Protocols.String())
	require.Empty(t, c.VerificationURL)
	require.Empty(t, c.DaemonFloor)
	require.Empty(t, c.UpdateOffer)
	require.Equal(t, pairing.DefaultCapacity, c.PairingCapacity)
	require.Equal(t, 500, c.PairingCapacity)
	// The default body cap admits a 6 MiB envelope and its request (P2-D2).
	require.Greater(t, c.MaxBodyBytes, int64(6<<20)+64<<10)
}

func TestV2Settings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want config.Protocols
	}{
		{[]string{"--protocols", "0"}, nil, config.Protocols{V0: true}},
		{[]string{"--protocols", "2"}, nil, config.Protocols{V2: true}},
		{[]string{"--protocols", "2, 0"}, nil, config.Protocols{V0: true, V2: true}},
		{nil, map[string]string{"RELAYD_PROTOCOLS": "0"}, config.Protocols{V0: true}},
	} {
		c, err := config.Load(append(append([]string{}, required...), tc.args...), env(tc.env))
		require.NoError(t, err, "%v %v", tc.args, tc.env)
		require.Equal(t, tc.want, c.Protocols, "%v %v", tc.args, tc.env)
	}
	c, err := config.Load(append(append([]string{}, required...), "--verification-url", "https://relay.example/pair", "--daemon-floor", "0.1.1",
		"--update-offer", "0.1.2", "--pairing-capacity", "7"), env(nil))
	require.NoError(t, err)
	require.Equal(t, "https://relay.example/pair", c.VerificationURL)
	require.Equal(t, "0.1.1", c.DaemonFloor)
	require.Equal(t, "0.1.2", c.UpdateOffer)
	require.Equal(t, 7, c.PairingCapacity)
	c, err = config.Load(nil, env(map[string]string{"RELAYD_FIXTURE": "f.json", "RELAYD_SITE_ID": "s", "RELAYD_VERIFICATION_URL": "mailto:pair@relay.example",
		"RELAYD_DAEMON_FLOOR": "0.1.0-alpha.83", "RELAYD_UPDATE_OFFER": "1.0.0+build", "RELAYD_PAIRING_CAPACITY": "3"}))
	require.NoError(t, err)
	require.Equal(t, "mailto:pair@relay.example", c.VerificationURL, "anything WHATWG URL parsing accepts")
	require.Equal(t, 3, c.PairingCapacity)
	// Protocol "2" alone routes for every site, so it needs no --site-id.
	_, err = config.Load([]string{"--fixture", "f.json", "--protocols", "2"}, env(nil))
	require.NoError(t, err)
}

func TestV2RefusesWhatWouldFailQuietly(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--protocols", "1"}, `unknown protocol "1"`},
		{[]string{"--protocols", ""}, `unknown protocol ""`},
		{[]string{"--verification-url", "not a url"}, `--verification-url "not a url" is not an absolute URL`},
		{[]string{"--verification-url", "/pair"}, `--verification-url "/pair" is not an absolute URL`},
		{[]string{"--daemon-floor", "one"}, `--daemon-floor "one" is not a version`},
		{[]string{"--update-offer", "latest"}, `--update-offer "latest" is not a version`},
		{[]string{"--pairing-capacity", "0"}, "--pairing-capacity must be positive"},
	} {
		_, err := config.Load(append(append([]string{}, required...), tc.args...), env(nil))
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	_, err := config.Load([]string{"--fixture", "f.json", "--protocols", "0,2"}, env(nil))
	require.ErrorContains(t, err, `a site id is required to serve protocol "0"`)
}
