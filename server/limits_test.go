package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
)

// The header limits are the configured ones, on the public listener.
func TestHeaderLimitsComeFromTheConfiguration(t *testing.T) {
	r := startWith(t, []string{"--max-header-bytes", "4096", "--read-header-timeout", "300ms"})

	req, err := http.NewRequest(http.MethodGet, r.public+"/relay/site/pending?siteId=site_example", nil)
	require.NoError(t, err)
	req.Header.Set("X-Padding", strings.Repeat("p", 16<<10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)

	// A client that starts its headers and never finishes them is cut off.
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.public, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprint(conn, "GET /relay/site/pending HTTP/1.1\r\nHost: relayd\r\nX-Slow: ")
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.ReadAll(bufio.NewReader(conn))
	require.NoError(t, err, "the server closes the connection")
	require.Less(t, time.Since(start), 3*time.Second, "within the read-header timeout, not the test's deadline")
}

// The memory store gets in-process limiters: the caller limit charges
// pairing by address, the site limit charges the signed site.
func TestRateLimitersAreWiredOnTheMemoryStore(t *testing.T) {
	r := startWith(t, []string{"--rate-limit", "1/h", "--rate-burst", "2", "--site-rate-limit", "1/h", "--site-rate-burst", "1"})
	requirePairLimitedAfter(t, []string{r.public}, 2)

	keys, err := peer.LoadDemoKeys("../deploy/demo-keys.json")
	require.NoError(t, err)
	site, err := peer.NewSite(peer.Config{BaseURLs: []string{r.public}}, keys.Site.Keys, keys.Site.SiteID)
	require.NoError(t, err)
	_, err = site.Pending(t.Context())
	require.NoError(t, err)
	_, err = site.Pending(t.Context())
	require.Equal(t, http.StatusTooManyRequests, peer.ErrorStatus(err), "%v", err)
}

// The Valkey store gets limiters in Valkey: two replicas sharing the
// server and prefix charge one bucket per caller between them.
func TestRateLimitersAreSharedByReplicasOnTheValkeyStore(t *testing.T) {
	srv := valkeytest.Shared(t)
	args := []string{"--store", "valkey", "--valkey-addr", srv.Addr, "--valkey-prefix", valkeytest.Prefix(t),
		"--rate-limit", "1/h", "--rate-burst", "3"}
	a, b := startWith(t, args), startWith(t, args)
	requirePairLimitedAfter(t, []string{a.public, b.public}, 3)
}

// requirePairLimitedAfter sends unsigned pair requests from this process's
// address, alternating between the replicas: the first n get the relay's
// answer for a bad body, the next is rate-limited.
func requirePairLimitedAfter(t *testing.T, replicas []string, n int) {
	t.Helper()
	post := func(i int) *http.Response {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, replicas[i%len(replicas)]+"/byollm/pair", strings.NewReader(`{}`))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i := range n {
		require.Equal(t, http.StatusBadRequest, post(i).StatusCode, "request %d", i)
	}
	resp := post(n)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "3600", resp.Header.Get("Retry-After"), "one token an hour, in whole seconds")
}

// Decision P2-D1, end to end: the issue's own reproduction. With one pairing a
// minute, the second unsigned pair is told to wait 60 seconds, in the body
// (WireError's retryAfter is seconds, and the published daemons multiply it
// by 1000) and in Retry-After alike.
func TestP2_D1_RetryAfterIsSecondsInTheBodyAndTheHeader(t *testing.T) {
	r := startWith(t, []string{"--rate-limit", "1/m", "--rate-burst", "1"})
	post := func() (*http.Response, string) {
		resp, err := http.Post(r.public+"/byollm/pair", "application/json", strings.NewReader(`{}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}
	first, _ := post()
	require.Equal(t, http.StatusBadRequest, first.StatusCode)
	resp, body := post()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "60", resp.Header.Get("Retry-After"))
	require.Equal(t, `{"error":"rate-limited","message":"too many requests from this caller; wait retryAfter seconds and try again","retryAfter":60}`, body)
}
