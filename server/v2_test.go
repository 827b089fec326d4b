package server_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/plane"
)

// Decision P2-D5: a relay serving protocol "2" says at boot, and on /readyz,
// that no enqueue policy is configured; one serving "0" alone does not.
func TestP2_D5_BootLogAndReadyzSayNoEnqueuePolicyIsConfigured(t *testing.T) {
	var logs lockedBuffer
	r := start(t, slog.New(slog.NewJSONHandler(&logs, nil)))
	require.Contains(t, logs.String(), `"msg":"`+jsonText(plane.NoEnqueuePolicy)+`"`)
	require.Contains(t, logs.String(), `"protocols":"0,2"`)
	status, body := readyz(t, r)
	require.Equal(t, 200, status)
	require.Equal(t, plane.NoEnqueuePolicy, body["enqueuePolicy"])

	var only0 lockedBuffer
	r = startWith(t, []string{"--protocols", "0"}, slog.New(slog.NewJSONHandler(&only0, nil)))
	require.NotContains(t, only0.String(), "enqueue policy")
	_, body = readyz(t, r)
	require.NotContains(t, body, "enqueuePolicy")
}

// jsonText is s as slog's JSON handler writes it inside quotes.
func jsonText(s string) string { return strings.ReplaceAll(s, `"`, `\"`) }
