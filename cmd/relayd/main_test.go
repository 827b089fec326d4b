package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/client"
	"github.com/byollm/relayd/internal/relaydtest"
	"github.com/byollm/relayd/protocol"
)

func startExample(t *testing.T, args ...string) *relaydtest.Process {
	return relaydtest.Start(t, relaydtest.Options{Fixture: "../../deploy/fixture.example.json", SiteID: "site_example", Args: args})
}

// halfSentEnqueue opens a connection to the relay and sends a correctly
// signed enqueue whose body is only partly written, so the request stays in
// flight until finish is called.
func halfSentEnqueue(t *testing.T, publicURL string) (finish func() *http.Response) {
	keys, err := client.LoadDemoKeys("../../deploy/demo-keys.json")
	require.NoError(t, err)
	stub := protocol.JobStub{ID: "drain-job", Kind: protocol.KindGenerate, Owner: "alice", Site: keys.Site.Keys.KeyID(),
		Audience: protocol.AudiencePublic, SizeClass: "small", DeadlineAt: time.Now().Add(time.Hour).UnixMilli()}
	body, err := json.Marshal(protocol.EnqueueRequest{SiteID: keys.Site.SiteID, Stub: stub})
	require.NoError(t, err)
	h := http.Header{}
	protocol.SignRequest(h, protocol.HeaderSite, keys.Site.Keys.IdentityPrivate(), "site/enqueue", keys.Site.SiteID, time.Now().UnixMilli(), body)

	u, err := url.Parse(publicURL)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	var head strings.Builder
	fmt.Fprintf(&head, "POST /relay/site/enqueue HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", u.Host, len(body))
	for k, v := range h {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v[0])
	}
	head.WriteString("\r\n")
	_, err = io.WriteString(conn, head.String())
	require.NoError(t, err)
	_, err = conn.Write(body[:10])
	require.NoError(t, err)
	return func() *http.Response {
		_, err := conn.Write(body[10:])
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		return resp
	}
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

	finish := halfSentEnqueue(t, p.Public)
	// Signal only once relayd holds the request: sooner, the listener could
	// close before the connection was even accepted.
	require.Eventually(t, func() bool {
		return strings.Contains(metricsText(p.Admin), "relayd_http_requests_in_flight 1")
	}, 10*time.Second, 10*time.Millisecond)
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

	require.NoError(t, p.Wait(30*time.Second), "relayd exits cleanly after draining")
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
	cmd := exec.Command(relaydtest.Binary(t), args...)
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
