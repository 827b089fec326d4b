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
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/demo"
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
func start(t *testing.T) *running {
	t.Helper()
	dir := t.TempDir()
	fixture := filepath.Join(dir, "fixture.json")
	example, err := os.ReadFile("../deploy/fixture.example.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(fixture, example, 0o600))
	cfg, err := config.Load([]string{"--fixture", fixture, "--site-id", "site_example", "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--fixture-poll", "-1s"}, func(string) string { return "" })
	require.NoError(t, err)

	ctx, stop := context.WithCancel(t.Context())
	r := &running{reload: make(chan struct{}, 1), fixture: fixture, done: make(chan error, 1), stop: stop}
	bound := make(chan struct{})
	go func() {
		r.done <- server.Run(ctx, cfg, slog.New(slog.DiscardHandler), server.Hooks{
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
