package main_test

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

func startExample(t *testing.T, args ...string) *fleet.Process {
	f := fleet.StartForTest(t, fleet.Options{Fixture: "../../deploy/fixture.example.json", SiteID: "site_example", Args: args})
	return f.Replica(0).Process()
}

// heldEnqueue holds a correctly signed enqueue open mid-body as the demo
// site, until finish is called.
func heldEnqueue(t *testing.T, publicURL string) (finish func() *http.Response) {
	keys, err := peer.LoadDemoKeys("../../deploy/demo-keys.json")
	require.NoError(t, err)
	site, err := peer.NewSite(peer.Config{BaseURLs: []string{publicURL}}, keys.Site.Keys, keys.Site.SiteID)
	require.NoError(t, err)
	stub := site.Stub("drain-job", protocol.KindGenerate, "alice", time.Now().Add(time.Hour).UnixMilli())
	return fleet.HoldEnqueue(t, publicURL, site, stub)
}

func readiness(admin string) (int, string) {
	resp, err := http.Get(admin + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSIGTERMFailsReadinessFirstAndFinishesInFlightRequests(t *testing.T) {
	p := startExample(t, "--shutdown-timeout", "30s")
	status, _ := readiness(p.Admin)
	require.Equal(t, http.StatusOK, status)

	// HoldEnqueue returns once relayd's handler is reading the body, so the
	// signal cannot beat the listener to the connection.
	finish := heldEnqueue(t, p.Public)
	require.Contains(t, metricsText(p.Admin), "relayd_http_requests_in_flight 1")
	require.NoError(t, p.Signal(syscall.SIGTERM))

	// While the request is still open, the replica already says it is
	// going away, so a load balancer stops sending it work.
	require.Eventually(t, func() bool {
		status, body := readiness(p.Admin)
		return status == http.StatusServiceUnavailable && strings.Contains(body, `"status":"draining"`)
	}, 10*time.Second, 10*time.Millisecond)

	resp := finish()
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the in-flight request completes: %s", got)
	require.JSONEq(t, `{"jobId":"drain-job","state":"queued"}`, string(got))

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, p.Wait(ctx), "relayd exits cleanly after draining")
	logs := p.Logs()
	require.Less(t, strings.Index(logs, `"msg":"draining"`), strings.Index(logs, `"msg":"stopped"`))
}

func TestRefusesToStartWithoutAFixture(t *testing.T) {
	// A missing fixture is an operator error worth failing loudly on.
	out, err := runRelayd(t, "--site-id", "site_example", "--fixture", t.TempDir()+"/absent.json")
	require.Error(t, err)
	require.Contains(t, out, "absent.json")
}

func TestHelpListsEveryEnvironmentTwin(t *testing.T) {
	out, err := runRelayd(t, "--help")
	require.NoError(t, err)
	for _, env := range []string{"RELAYD_LISTEN", "RELAYD_FIXTURE", "RELAYD_STORE", "RELAYD_VALKEY_ADDR", "RELAYD_PUBLIC_DEBUG"} {
		require.Contains(t, out, env)
	}
}

func runRelayd(t *testing.T, args ...string) (string, error) {
	cmd := exec.Command(fleet.TestBinary(t), args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func metricsText(admin string) string {
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
