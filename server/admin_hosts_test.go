package server_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// getWithHost sends GET url over a real socket with Host set to host.
func getWithHost(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestAdminHostsFlagReachesBothListeners: relayd as an operator runs it,
// --admin-hosts from the command line, against DNS rebinding. A name it was
// not given gets 421 from everything the admin listener mounts (metrics and
// profiles included) and from the public debug page, while the protocol's
// listener answers that name as it answers any.
func TestAdminHostsFlagReachesBothListeners(t *testing.T) {
	r := startWith(t, []string{"--admin-hosts", "relayd", "--pprof", "--public-debug"})
	for _, path := range []string{"/metrics", "/debug", "/readyz", "/healthz", "/pairings/ABCD-EF12", "/debug/pprof/"} {
		status, body := getWithHost(t, r.admin+path, "evil.example:9090")
		require.Equal(t, http.StatusMisdirectedRequest, status, "%s: %s", path, body)
		require.JSONEq(t, `{"error":"bad-request","message":"this listener does not answer for host \"evil.example:9090\"; add the name to --admin-hosts"}`, body)
	}
	status, _ := getWithHost(t, r.public+"/debug", "evil.example")
	require.Equal(t, http.StatusMisdirectedRequest, status)
	status, body := getWithHost(t, r.public+"/no-such-path", "evil.example")
	require.Equal(t, http.StatusNotFound, status, body)

	for _, host := range []string{"relayd:9090", "localhost:9090", "127.0.0.1"} {
		status, body := getWithHost(t, r.admin+"/metrics", host)
		require.Equal(t, http.StatusOK, status, "Host %q: %s", host, body)
		require.Contains(t, body, "relayd_")
		status, _ = getWithHost(t, r.public+"/debug", host)
		require.Equal(t, http.StatusOK, status, "Host %q", host)
	}
}
