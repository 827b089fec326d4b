package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/metrics"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
)

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	return string(body)
}

// Each Pairings operation gets one latency series under its store.Op, and
// starts are counted by outcome.
func TestEveryPairingOperationIsLabelledWithItsOp(t *testing.T) {
	m := metrics.New()
	p := m.InstrumentPairings(memory.NewPairings(clock.NewManual(time.Now())))
	ctx := context.Background()
	in := store.StartPairingInput{Pending: store.PendingPairing{DeviceCode: "d", UserCode: "u"}, TTLMs: 1000, Capacity: 1}
	_, err := p.StartPairing(ctx, in)
	require.NoError(t, err)
	_, _, _ = p.PairingByDeviceCode(ctx, "d")
	_, _, _ = p.PairingByUserCode(ctx, "u")
	_, _, _ = p.ApprovePairing(ctx, "u", "")
	require.NoError(t, p.DropPairing(ctx, "d"))

	body := scrape(t, m)
	for _, op := range store.PairingOps() {
		require.Contains(t, body, `relayd_store_operation_duration_seconds_count{op="`+string(op)+`"} 1`)
	}
	require.Contains(t, body, `relayd_pairing_starts_total{outcome="stored"} 1`)

	in.Capacity = 0
	_, err = p.StartPairing(ctx, in)
	require.Equal(t, store.RefusedAtCapacity, store.RefusalOf(err))
	// Wrapping again shares the series rather than failing to register.
	again := m.InstrumentPairings(memory.NewPairings(clock.NewManual(time.Now())))
	_, err = again.StartPairing(ctx, in)
	require.Error(t, err)
	body = scrape(t, m)
	require.Contains(t, body, `relayd_pairing_starts_total{outcome="at-capacity"} 2`)
	require.NotContains(t, body, `relayd_store_errors_total{op="startPairing"}`, "a refusal is no failure")
}

type failingPairings struct{ store.Pairings }

func (failingPairings) DropPairing(context.Context, string) error { return errors.New("down") }

func TestPairingFailuresAreCounted(t *testing.T) {
	m := metrics.New()
	p := m.InstrumentPairings(failingPairings{})
	require.Error(t, p.DropPairing(context.Background(), "d"))
	require.True(t, strings.Contains(scrape(t, m), `relayd_store_errors_total{op="dropPairing"} 1`))
}
