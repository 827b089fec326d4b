package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/internal/demo"
	"github.com/byollm/relayd/internal/leaktest"
	"github.com/byollm/relayd/server"
)

type running struct {
	public, admin string
	reload        chan struct{}
	fixture       string
	done          chan error
	stop          context.CancelFunc
}

// start runs relayd in this process on free loopback ports with a copy of
// the example fixture, and stops it at the end of the test.
func start(t *testing.T, logger ...*slog.Logger) *running {
	t.Helper()
	return startWith(t, nil, logger...)
}

// startWith is start with more flags.
func startWith(t *testing.T, extra []string, logger ...*slog.Logger) *running {
	t.Helper()
	dir := t.TempDir()
	fixture := filepath.Join(dir, "fixture.json")
	example, err := os.ReadFile("../deploy/fixture.example.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(fixture, example, 0o600))
	args := []string{"--fixture", fixture, "--site-id", "site_example", "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--fixture-poll", "-1s"}
	cfg, err := config.Load(append(args, extra...), func(string) string { return "" })
	require.NoError(t, err)

	log := slog.New(slog.DiscardHandler)
	if len(logger) > 0 {
		log = logger[0]
	}
	ctx, stop := context.WithCancel(t.Context())
	r := &running{reload: make(chan struct{}, 1), fixture: fixture, done: make(chan error, 1), stop: stop}
	bound := make(chan struct{})
	go func() {
		r.done <- server.Run(ctx, cfg, log, server.Hooks{
			Reload: r.reload,
			Listening: func(public, admin net.Addr) {
				r.public, r.admin = "http://"+public.String(), "http://"+admin.String()
				close(bound)
			},
		})
	}()
	select {
	case <-bound:
	case err := <-r.done:
		t.Fatalf("relayd stopped before listening: %v", err)
	}
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-r.done)
	})
	return r
}

func readyz(t *testing.T, r *running) (int, map[string]string) {
	resp, err := http.Get(r.admin + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body
}

func TestServesTheDemoRoundTrip(t *testing.T) {
	leaktest.Check(t) // Run stops its sweeper, fixture watcher, reload loop and listeners
	r := start(t)
	var out bytes.Buffer
	require.NoError(t, demo.Run(t.Context(), demo.Options{RelayURL: r.public, KeysPath: "../deploy/demo-keys.json", Prompt: "hello relay"}, &out))
	require.Contains(t, out.String(), `echo: hello relay`)

	status, body := readyz(t, r)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, body["projection"], 64)

	resp, err := http.Get(r.public + "/debug")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the debug page is not public by default")
	resp, err = http.Get(r.admin + "/debug")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), "runner_alice_laptop")
	require.NotContains(t, string(page), "hello relay", "the relay never holds the prompt")
}

func TestReloadsTheFixtureOnRequestAndKeepsItOnARefusal(t *testing.T) {
	leaktest.Check(t)
	r := start(t)
	_, before := readyz(t, r)

	fixture, err := os.ReadFile(r.fixture)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(fixture, &doc))
	doc["rosters"] = []any{}
	changed, err := json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(r.fixture, changed, 0o600))
	r.reload <- struct{}{}
	require.Eventually(t, func() bool {
		_, now := readyz(t, r)
		return now["projection"] != before["projection"]
	}, 10*time.Second, 20*time.Millisecond)
	_, after := readyz(t, r)

	require.NoError(t, os.WriteFile(r.fixture, []byte(`{"sites": []}`), 0o600)) // no consents: invalid
	// The reload channel holds one request and the server handles them in
	// order, so the third send returns only once the first was fully handled.
	for range 3 {
		r.reload <- struct{}{}
	}
	status, now := readyz(t, r)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, after["projection"], now["projection"], "a refused fixture leaves the previous projection in force")
}

func TestMetricsMoveWithARoundTrip(t *testing.T) {
	r := start(t)
	scrape := func() string {
		resp, err := http.Get(r.admin + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	before := scrape()
	require.NotContains(t, before, `relayd_claims_granted_total 1`)
	require.NoError(t, demo.Run(t.Context(), demo.Options{RelayURL: r.public, KeysPath: "../deploy/demo-keys.json", Prompt: "count me"}, io.Discard))
	after := scrape()
	for _, series := range []string{
		`relayd_claims_granted_total 1`,
		`relayd_http_requests_total{route="claim",status="200"} 1`,
		`relayd_http_requests_total{route="site/enqueue",status="200"} 1`,
		`relayd_http_requests_total{route="result",status="200"} 1`,
		`relayd_store_operation_duration_seconds_count{op="claim"} 1`,
		`relayd_store_operation_duration_seconds_count{op="payload"} 1`,
		`relayd_http_requests_in_flight 0`,
		`relayd_projection_reloads_total 0`,
		`relayd_projection_reload_failures_total 0`,
	} {
		require.Contains(t, after, series)
	}
	resp, err := http.Get(r.public + "/no/such/thing")
	require.NoError(t, err)
	resp.Body.Close()
	require.Contains(t, scrape(), `relayd_http_requests_total{route="unmatched",status="404"} 1`, "strangers' paths share one label")
	resp, err = http.Get(r.public + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "metrics are served on the admin listener only")
}

// lockedBuffer is a log sink safe for the server's concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// longBase64 matches what signatures (86 characters) and ciphertexts look
// like; ids and hashes in logs are shorter or hexadecimal with dashes.
var longBase64 = regexp.MustCompile(`[A-Za-z0-9_-]{80,}`)

func TestLogsCarryNoPayloadsEnvelopesOrSignatures(t *testing.T) {
	var logs lockedBuffer
	r := start(t, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	const prompt = "a secret prompt nobody may log"
	require.NoError(t, demo.Run(t.Context(), demo.Options{RelayURL: r.public, KeysPath: "../deploy/demo-keys.json", Prompt: prompt}, io.Discard))
	out := logs.String()
	require.Contains(t, out, `"msg":"request"`, "requests are logged")
	require.Contains(t, out, `"path":"/byollm/fetch"`)
	require.NotContains(t, out, prompt)
	require.NotContains(t, out, "echo: "+prompt)
	require.Empty(t, longBase64.FindAllString(out, 3), "no signature or ciphertext in the logs")
	for _, word := range []string{"ciphertext", "x-byollm-signature", "X-Byollm-Signature", "encryptionSig"} {
		require.NotContains(t, out, word)
	}
}
