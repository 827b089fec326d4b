package valkey

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/store"
)

// Timeout reaches valkey-go as the connection's reply timeout and, unless
// DialTimeout says otherwise, as the connect timeout: without them a
// frozen server holds callers for valkey-go's 10 s and 5 s defaults.
func TestTimeoutBoundsEveryConnection(t *testing.T) {
	o, err := Options{Addrs: []string{"a:1"}, Timeout: 1500 * time.Millisecond}.clientOption()
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, o.ConnWriteTimeout)
	require.Equal(t, 1500*time.Millisecond, o.Dialer.Timeout)

	o, err = Options{Addrs: []string{"a:1"}, Timeout: 1500 * time.Millisecond, DialTimeout: time.Second}.clientOption()
	require.NoError(t, err)
	require.Equal(t, time.Second, o.Dialer.Timeout, "an explicit dial timeout wins")

	o, err = Options{Addrs: []string{"a:1"}}.clientOption()
	require.NoError(t, err)
	require.Zero(t, o.ConnWriteTimeout, "zero keeps valkey-go's defaults")
	require.Zero(t, o.Dialer.Timeout)
}

// quietClient is a client on one connection without keep-alive PINGs, so
// that the server's command counts show only what a test sent.
func quietClient(t *testing.T, addr string) valkey.Client {
	t.Helper()
	c, err := valkey.NewClient(valkey.ClientOption{
		InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true,
		PipelineMultiplex: -1, Dialer: net.Dialer{KeepAlive: -1},
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.Do(t.Context(), c.B().Ping().Build()).Error(), "connected before counting")
	return c
}

// commandCounts reads INFO commandstats: calls per command, leaving out
// the INFO and CONFIG the test itself sends.
func commandCounts(t *testing.T, c valkey.Client) map[string]int {
	t.Helper()
	info, err := c.Do(t.Context(), c.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	counts := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		if name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		n, err := strconv.Atoi(calls)
		require.NoError(t, err, line)
		counts[name] = n
	}
	return counts
}

// Issue 12 finding 8: a readiness probe loaded all the scripts on every
// node each time. Ping now sends exactly one PING; the scripts are loaded
// once, by New (or LoadScripts), and again only when a function is missing.
func TestReadinessPingSendsOneCommand(t *testing.T) {
	srv := valkeytest.Start(t)
	s, err := NewFromClient(quietClient(t, srv.Addr), valkeytest.Prefix(t))
	require.NoError(t, err)
	require.NoError(t, s.LoadScripts(t.Context()))
	observer := quietClient(t, srv.Addr)
	require.NoError(t, observer.Do(t.Context(), observer.B().ConfigResetstat().Build()).Error())

	const probes = 5
	for range probes {
		require.NoError(t, s.Ping(t.Context()))
	}
	require.Equal(t, map[string]int{"ping": probes}, commandCounts(t, observer), "one PING per probe, nothing else")

	require.NoError(t, observer.Do(t.Context(), observer.B().ConfigResetstat().Build()).Error())
	require.NoError(t, s.LoadScripts(t.Context()))
	require.Equal(t, map[string]int{"function|load": 1}, commandCounts(t, observer), "what a probe used to cost, and now only the start does")
}

// With the server frozen, concurrent callers each get an error (never a
// refusal) once their deadline passes, including those queued behind a
// reconnect, which valkey-go bounds by the dial timeout alone; when the
// server resumes, the same store answers again.
func TestFrozenServerFailsEachCallAtItsDeadline(t *testing.T) {
	srv := valkeytest.Start(t)
	if !srv.CanRestart() {
		t.Skip("the server did not come from a binary this test can freeze")
	}
	const timeout = 300 * time.Millisecond
	s, err := New(t.Context(), Options{Addrs: srv.Addrs, KeyPrefix: valkeytest.Prefix(t), Timeout: timeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Now(t.Context())
	require.NoError(t, err)

	srv.Freeze(t)
	const callers = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		slowest time.Duration
		errs    = make([]error, callers)
	)
	for i := range callers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			start := time.Now()
			_, errs[i] = s.Now(ctx)
			mu.Lock()
			slowest = max(slowest, time.Since(start))
			mu.Unlock()
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.Error(t, err, "caller %d", i)
		require.Empty(t, store.RefusalOf(err), "a frozen server is a failure, not a refusal: %v", err)
	}
	t.Logf("frozen server, %d concurrent calls under a %v deadline: the slowest returned after %v", callers, timeout, slowest.Round(time.Millisecond))

	srv.Thaw(t)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		_, err := s.Now(ctx)
		return err == nil
	}, time.Minute, 20*time.Millisecond, "the store answers again without being reopened")
}
