package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/internal/workload"
)

// TestSaturateRoutesEveryJobThroughTheStore runs the store-only scenario
// briefly: every counted job went through the whole per-job mix (a claim
// that granted anything but the worker's own job fails the run), and the
// server's CPU and the trivial-script limit were read.
func TestSaturateRoutesEveryJobThroughTheStore(t *testing.T) {
	srv := valkeytest.Start(t)
	s, err := Saturate(t.Context(), srv.Addrs[0], 4, 300*time.Millisecond)
	require.NoError(t, err)
	require.Positive(t, s.Jobs)
	require.Equal(t, s.Jobs*perJobOps, s.Ops)
	require.Positive(t, s.OpsPerSecond)
	require.Positive(t, s.ValkeyCPUPerOp)
	require.Positive(t, s.TrivialPerSecond)

	_, err = Saturate(t.Context(), srv.Addrs[0], 0, time.Millisecond)
	require.Error(t, err)
}

// TestScrapeRelaysSumsOperationsAndCPUOverReplicas reads two replicas'
// metrics pages, served over real sockets.
func TestScrapeRelaysSumsOperationsAndCPUOverReplicas(t *testing.T) {
	page := func(claims, cpu float64) string {
		return fmt.Sprintf(`# HELP relayd_store_operation_duration_seconds store operation latency
relayd_store_operation_duration_seconds_bucket{op="claim",le="0.001"} 1
relayd_store_operation_duration_seconds_count{op="claim"} %v
relayd_store_operation_duration_seconds_count{op="touch"} 2
process_cpu_seconds_total %v
process_cpu_seconds_total_other 99
`, claims, cpu)
	}
	var urls []string
	for _, body := range []string{page(3, 1.5), page(4, 0.25)} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.Equal(t, "/metrics", r.URL.Path)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	got, err := scrapeRelays(t.Context(), urls)
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"claim": 7, "touch": 4}, got.opsByName)
	require.Equal(t, 11.0, got.ops())
	require.InDelta(t, 1.75, got.cpuSeconds, 1e-9)
}

func TestLoadedReplicasNamesOnlyAStrictSubset(t *testing.T) {
	for _, c := range []struct{ replicas, loaded, want int }{
		{3, 0, 0}, {3, 1, 1}, {3, 2, 2}, {3, 3, 0}, {3, 5, 0}, {1, 1, 0}, {3, -1, 0},
	} {
		got := loaded(Lifecycle{Replicas: c.replicas, LoadedReplicas: c.loaded})
		require.Equal(t, c.want, got, "replicas %d, loaded %d", c.replicas, c.loaded)
	}
}

// TestRunLifecycleSpeaksEachProtocol runs a small lifecycle on the memory
// store under each protocol: every job is collected, nothing is judged a
// violation, and the result names its protocol and the jobs' mix.
func TestRunLifecycleSpeaksEachProtocol(t *testing.T) {
	bin := fleet.TestBinary(t)
	for _, proto := range []string{workload.ProtocolV0, workload.ProtocolV2, workload.ProtocolMixed} {
		t.Run("protocol="+proto, func(t *testing.T) {
			res, err := RunLifecycle(t.Context(), Lifecycle{Binary: bin, Store: "memory", Replicas: 1, Jobs: 60, Daemons: 4, SiteConcurrency: 4, Protocol: proto})
			require.NoError(t, err)
			require.Equal(t, proto, res.Protocol)
			require.Equal(t, 60, res.Collected)
			require.Zero(t, res.Violations)
		})
	}
}
