package config_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/protocol"
)

var (
	authorKeyA = protocol.EncodeKey(bytes.Repeat([]byte{0x0a}, 32))
	authorKeyB = protocol.EncodeKey(bytes.Repeat([]byte{0x0b}, 32))
)

func withArgs(args ...string) []string { return append(append([]string{}, required...), args...) }

func TestGrantAuthorIsOffByDefault(t *testing.T) {
	c, err := config.Load(required, env(nil))
	require.NoError(t, err)
	require.False(t, c.GrantAuthor.Enabled())
	require.Equal(t, config.GrantAuthor{Timeout: 2 * time.Second}, c.GrantAuthor)
}

func TestGrantAuthorFromTheFlagsOrTheEnvironment(t *testing.T) {
	c, err := config.Load(withArgs("--grant-author-url", "https://author.example/grant", "--grant-author-key", authorKeyA+", "+authorKeyB,
		"--grant-author-timeout", "5s", "--grant-author-token-file", "/run/secrets/token"), env(nil))
	require.NoError(t, err)
	require.Equal(t, config.GrantAuthor{URL: "https://author.example/grant", Keys: []string{authorKeyA, authorKeyB}, Timeout: 5 * time.Second,
		TokenFile: "/run/secrets/token"}, c.GrantAuthor)
	require.True(t, c.GrantAuthor.Enabled())

	c, err = config.Load(required, env(map[string]string{
		"RELAYD_GRANT_AUTHOR_URL": "http://127.0.0.1:7070/grant", "RELAYD_GRANT_AUTHOR_KEY": authorKeyB,
		"RELAYD_GRANT_AUTHOR_TIMEOUT": "1500ms", "RELAYD_GRANT_AUTHOR_TOKEN_FILE": "/t",
	}))
	require.NoError(t, err)
	require.Equal(t, config.GrantAuthor{URL: "http://127.0.0.1:7070/grant", Keys: []string{authorKeyB}, Timeout: 1500 * time.Millisecond, TokenFile: "/t"}, c.GrantAuthor)

	c, err = config.Load(withArgs("--grant-author-url", "http://localhost/g", "--grant-author-key", authorKeyA),
		env(map[string]string{"RELAYD_GRANT_AUTHOR_KEY": authorKeyB}))
	require.NoError(t, err)
	require.Equal(t, []string{authorKeyA}, c.GrantAuthor.Keys, "the flag wins")
}

func TestGrantAuthorRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--grant-author-url", "https://a.example/g"}, "--grant-author-url needs --grant-author-key"},
		{[]string{"--grant-author-key", authorKeyA}, "--grant-author-key needs --grant-author-url"},
		{[]string{"--grant-author-token-file", "/t"}, "--grant-author-token-file needs --grant-author-url"},
		{[]string{"--grant-author-url", "http://author.example/g", "--grant-author-key", authorKeyA}, "plain http is accepted only to a loopback host"},
		{[]string{"--grant-author-url", "http://10.0.0.1/g", "--grant-author-key", authorKeyA}, "plain http is accepted only to a loopback host"},
		{[]string{"--grant-author-url", "ftp://a.example/g", "--grant-author-key", authorKeyA}, `scheme "ftp"`},
		{[]string{"--grant-author-url", "/grant", "--grant-author-key", authorKeyA}, "not an absolute URL"},
		{[]string{"--grant-author-url", "https://u:p@a.example/g", "--grant-author-key", authorKeyA}, "must not carry credentials"},
		{[]string{"--grant-author-url", "https://a.example/g", "--grant-author-key", "nope"}, "--grant-author-key 1: must be the unpadded base64url"},
		{[]string{"--grant-author-url", "https://a.example/g", "--grant-author-key", authorKeyA + "," + authorKeyA}, "--grant-author-key 2 is listed twice"},
		{[]string{"--grant-author-url", "https://a.example/g", "--grant-author-key", authorKeyA, "--grant-author-timeout", "6s"}, "--grant-author-timeout must be positive and at most 5s"},
		{[]string{"--grant-author-url", "https://a.example/g", "--grant-author-key", authorKeyA, "--grant-author-timeout", "0s"}, "--grant-author-timeout must be positive"},
		{[]string{"--protocols", "0", "--grant-author-url", "https://a.example/g", "--grant-author-key", authorKeyA}, `--grant-author-url needs protocol "2"`},
	} {
		_, err := config.Load(withArgs(tc.args...), env(nil))
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	for _, ok := range []string{"http://[::1]:8/g", "http://127.0.0.2/g", "http://LOCALHOST:9/g", "https://author.example:8443/g"} {
		_, err := config.Load(withArgs("--grant-author-url", ok, "--grant-author-key", authorKeyA), env(nil))
		require.NoError(t, err, ok)
	}
}
