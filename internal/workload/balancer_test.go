package workload

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The balancer sends a try that got a 503 or no answer at all to the next
// replica, body intact, and counts what it saw.
func TestBalancer_RetriesOnTheNextReplica(t *testing.T) {
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":"server-error","message":"down"}`)
	}))
	defer unavailable.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadURL := "http://" + dead.Addr().String()
	dead.Close() // nothing listens there: connection refused
	var got string
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = string(b)
		_, _ = io.WriteString(w, `{}`)
	}))
	defer healthy.Close()

	var mu sync.Mutex
	var seen []attempt
	b, err := newBalancer([]string{unavailable.URL, deadURL, healthy.URL}, 4, 5*time.Second, func(a attempt) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, a)
	})
	require.NoError(t, err)
	c := &http.Client{Transport: b}
	ctx, ci := withCallInfo(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, unavailable.URL+"/byollm/claim", strings.NewReader(`{"max":1}`))
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()

	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `{"max":1}`, got, "the body reaches the replica that answers")
	require.Equal(t, 2, ci.retries)
	require.Len(t, seen, 3)
	require.Equal(t, attempt{endpoint: "claim", host: hostOf(unavailable.URL), status: 503, code: "server-error", retryAfter: "1"}, seen[0])
	require.Error(t, seen[1].err)
	require.Equal(t, "connection refused", transportKind(seen[1].err))
	require.Equal(t, 200, seen[2].status)
}

// Tries are bounded: with every replica down the caller gets the last 503.
func TestBalancer_GivesUpAfterItsAttempts(t *testing.T) {
	calls := 0
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	b, err := newBalancer([]string{down.URL}, 3, time.Second, nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: b}).Get(down.URL + "/relay/site/pending")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, 3, calls)
}

func hostOf(u string) string { return strings.TrimPrefix(u, "http://") }
