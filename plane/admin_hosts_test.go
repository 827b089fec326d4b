package plane_test

// The admin listener against DNS rebinding: a page under a name its author
// controls, rebound to a private address, makes the operator's browser send
// that name as Host. The admin listener, and the public debug page, answer
// only Hosts nobody can rebind and the names the operator listed.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/plane"
)

// hostAnswer is one answer to a request sent with a chosen Host header.
type hostAnswer struct {
	status      int
	contentType string
	body        string
}

// getAs sends GET base+path over a real socket with Host set to host.
func getAs(t *testing.T, base, path, host string) hostAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return hostAnswer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: string(body)}
}

// requireMisdirected checks the refusal of a Host the listener does not
// answer for: 421 with relayd's JSON error naming the host and the flag.
func requireMisdirected(t *testing.T, got hostAnswer, host string) {
	t.Helper()
	require.Equal(t, http.StatusMisdirectedRequest, got.status, "Host %q: %s", host, got.body)
	require.Equal(t, "application/json", got.contentType)
	var body map[string]string
	require.NoError(t, json.Unmarshal([]byte(got.body), &body), got.body)
	require.Equal(t, map[string]string{
		"error":   "bad-request",
		"message": fmt.Sprintf("this listener does not answer for host %q; add the name to --admin-hosts", host),
	}, body)
}

// foreignHosts are Hosts a rebinding page could make a browser send: names
// the operator did not list, names that merely contain a listed one or an
// address, and a listed name on a port it was not listed for.
var foreignHosts = []string{
	"evil.example", "evil.example:9090", "EVIL.example", "relayd.evil.example", "localhost.evil.example",
	"127.0.0.1.nip.io:9090", "admin.example", "admin.example:9090",
}

// ownHosts are Hosts the listener answers: localhost and IP literals with
// and without a port (the kubelet's probes and Prometheus name a pod by its
// IP), and the listed names.
var ownHosts = []string{
	"localhost", "localhost:9090", "127.0.0.1", "127.0.0.1:9090", "[::1]", "[::1]:9090",
	"10.1.2.3:9090", "[fd00::7]:9090", "relayd", "RELAYD:9090", "admin.example:8443",
}

var listedHosts = []string{"relayd", "admin.example:8443"}

func TestAdminListenerRefusesAHostItDoesNotAnswerFor(t *testing.T) {
	eachStore(t, &setupOpts{AdminHosts: listedHosts}, func(t *testing.T, b *bundle) {
		var metricsServed atomic.Int64
		b.admin.Mount("/metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			metricsServed.Add(1)
			_, _ = io.WriteString(w, "relayd_up 1\n")
		}))
		paths := []string{"/debug", "/byollm/debug", "/metrics", "/readyz", "/healthz", "/pairings/ABCD-EF12", "/no-such-path"}
		for _, host := range foreignHosts {
			for _, path := range paths {
				requireMisdirected(t, getAs(t, b.adminURL, path, host), host)
			}
		}
		require.Zero(t, metricsServed.Load(), "a refused request never reaches the handler")

		for _, host := range ownHosts {
			require.Equal(t, http.StatusOK, getAs(t, b.adminURL, "/healthz", host).status, "Host %q", host)
			require.Equal(t, http.StatusOK, getAs(t, b.adminURL, "/readyz", host).status, "Host %q", host)
			require.Equal(t, http.StatusOK, getAs(t, b.adminURL, "/metrics", host).status, "Host %q", host)
			require.Contains(t, getAs(t, b.adminURL, "/debug", host).body, "<title>byollm relay — debug</title>", "Host %q", host)
			require.Equal(t, http.StatusNotFound, getAs(t, b.adminURL, "/pairings/ABCD-EF12", host).status, "Host %q", host)
		}
	})
}

// The public listener is reached by any name and serves the protocol to
// every Host; only its debug page, with --public-debug, is as private as
// the admin listener's.
func TestPublicDebugPageRefusesAHostTheAdminListenerWouldRefuse(t *testing.T) {
	eachStore(t, &setupOpts{PublicDebug: true, AdminHosts: listedHosts}, func(t *testing.T, b *bundle) {
		for _, host := range foreignHosts {
			requireMisdirected(t, getAs(t, b.url, "/debug", host), host)
			requireMisdirected(t, getAs(t, b.url, "/byollm/debug", host), host)
			got := getAs(t, b.url, "/no-such-path", host)
			require.Equal(t, hostAnswer{http.StatusNotFound, "application/json", bodyNotFoundPath}, got, "Host %q", host)
		}
		for _, host := range ownHosts {
			require.Contains(t, getAs(t, b.url, "/debug", host).body, "<title>byollm relay — debug</title>", "Host %q", host)
		}
	})
}

func TestAdminHostsStarAnswersEveryHost(t *testing.T) {
	eachStore(t, &setupOpts{PublicDebug: true, AdminHosts: []string{plane.AnyHost}}, func(t *testing.T, b *bundle) {
		for _, host := range foreignHosts {
			require.Contains(t, getAs(t, b.adminURL, "/debug", host).body, "<title>byollm relay — debug</title>", "Host %q", host)
			require.Contains(t, getAs(t, b.url, "/debug", host).body, "<title>byollm relay — debug</title>", "Host %q", host)
		}
	})
}

// TestAdminHostsAllow pins the matching rules the socket tests rest on.
func TestAdminHostsAllow(t *testing.T) {
	hosts := plane.NewAdminHosts([]string{" Relayd ", "admin.example:8443"})
	for host, want := range map[string]bool{
		"":                      true, // HTTP/1.0 without Host: no browser sends that
		"relayd":                true,
		"relayd:1":              true,
		"admin.example:8443":    true,
		"admin.example":         false,
		"admin.example:443":     false,
		"[fe80::1%25eth0]:9090": true,
		"::1":                   true,
		"localhost.":            false,
		"relayd.":               false,
		"evil.example":          false,
	} {
		require.Equal(t, want, hosts.Allow(host), "Host %q", host)
	}
	require.True(t, plane.NewAdminHosts(nil).Allow("127.0.0.1:9090"))
	require.False(t, plane.NewAdminHosts(nil).Allow("relayd"))
}
