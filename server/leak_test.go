package server_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/demo"
	"github.com/byollm/relayd/internal/leaktest"
	"github.com/byollm/relayd/internal/valkeytest"
)

// Every loop Run starts ends with it: both listeners, the fixture watcher
// with its poll ticker, the reload loop, the sweeper (sweeping a real
// Valkey every 10 ms here) and the Valkey client behind the store. The
// check runs while Valkey still answers, so a client Run left open would
// still hold its goroutines and fail it.
func TestRunStopsEveryLoopItStarted(t *testing.T) {
	srv := valkeytest.Start(t)
	leaktest.Check(t)
	r := startWith(t, []string{"--store", "valkey", "--valkey-addr", srv.Addr, "--valkey-prefix", valkeytest.Prefix(t),
		"--sweep-interval", "10ms", "--fixture-poll", "10ms"})
	var out bytes.Buffer
	require.NoError(t, demo.Run(t.Context(), demo.Options{RelayURL: r.public, KeysPath: "../deploy/demo-keys.json", Prompt: "hello relay"}, &out))
	require.Contains(t, out.String(), "echo: hello relay")
	r.reload <- struct{}{}
	status, _ := readyz(t, r)
	require.Equal(t, http.StatusOK, status)
}
