package server_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/server"
)

// decliningAuthor is an external author that declines every job
// transiently and records the Authorization header of each call.
type decliningAuthor struct {
	srv   *httptest.Server
	mu    sync.Mutex
	auths []string
}

func newDecliningAuthor(t *testing.T) *decliningAuthor {
	t.Helper()
	a := &decliningAuthor{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.auths = append(a.auths, r.Header.Get("Authorization"))
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"declined":{"permanent":false,"reason":"unmapped"}}`))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *decliningAuthor) authorizations() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string{}, a.auths...)
}

// With --grant-author-url the boot log names the author's host and key,
// never the token; a device enrolled with the author's key has its claims
// authored there, with the token, and timed and counted in /metrics; the
// admin listener names the author's key as current (G-R35, G-R50, G-R51).
func TestGrantAuthorURLWiresTheExternalAuthor(t *testing.T) {
	author := newDecliningAuthor(t)
	_, private := writeGrantKey(t, 0x41)
	public := protocol.EncodeKey(private.Public().(ed25519.PublicKey))
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("tok-0123456789\n"), 0o400))
	var logs lockedBuffer
	r := startWith(t, []string{"--grant-author-url", author.srv.URL + "/grant", "--grant-author-key", public, "--grant-author-token-file", token},
		slog.New(slog.NewJSONHandler(&logs, nil)))
	keyID, _ := protocol.KeyIDOf(public)
	host, err := url.Parse(author.srv.URL)
	require.NoError(t, err)
	require.Contains(t, logs.String(), "grants: external "+host.Host+", key "+keyID+", 1 keys")
	require.NotContains(t, logs.String(), "grants: off")
	enrolWith(t, r, "runner_alice_laptop", public)

	demo, err := peer.LoadDemoKeys("../deploy/demo-keys.json")
	require.NoError(t, err)
	site, err := peer.NewSite2(peer.Config{BaseURLs: []string{r.public}}, demo.Site.Keys, demo.Site.SiteID)
	require.NoError(t, err)
	_, err = site.Enqueue(t.Context(), site.Stub("job_external", protocol.KindGenerate, "alice", time.Now().Add(time.Minute).UnixMilli()))
	require.NoError(t, err)
	alice, ok := demo.Device("runner_alice_laptop")
	require.True(t, ok, "the demo keys hold alice's laptop")
	daemon, err := peer.NewDaemon(peer.Config{BaseURLs: []string{r.public}}, alice.Keys, alice.RunnerID)
	require.NoError(t, err)
	caps := []proto2.Capability{{Kind: protocol.KindGenerate, Service: "echo", BackendID: "openai-http", BackendClass: "http", Model: "m", OfferScope: "private"}}
	body, err := json.Marshal(proto2.ClaimRequest{ProtocolVersion: "2", RunnerID: alice.RunnerID, Capabilities: caps, Max: 1})
	require.NoError(t, err)
	resp, err := daemon.Do(context.Background(), "claim", body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.JSONEq(t, `{"jobs":[],"leaseMs":60000}`, string(resp.Body))

	require.Equal(t, []string{"Bearer tok-0123456789"}, author.authorizations())
	metrics := get(t, r.admin+"/metrics")
	require.Contains(t, metrics, `relayd_signed_grants_total{outcome="declined",permanent="false",reason="unmapped"} 1`)
	require.Contains(t, metrics, `relayd_grant_author_duration_seconds_count{mode="external"} 1`)
	key := `{"publicKey":"` + public + `","keyId":"` + keyID + `","signer":"external"}`
	require.JSONEq(t, `{"current":`+key+`,"keys":[`+key+`]}`, get(t, r.admin+"/grant-keys"))
	require.Contains(t, get(t, r.admin+"/readyz"), `"mode":"external"`)
	require.NotContains(t, logs.String(), "tok-0123456789", "the token is never logged")
}

// A key that is both local and the author's, and a token file that cannot
// be read, refuse to start.
func TestGrantAuthorRefusalsAtBoot(t *testing.T) {
	path, private := writeGrantKey(t, 0x42)
	public := protocol.EncodeKey(private.Public().(ed25519.PublicKey))
	fixture := filepath.Join(t.TempDir(), "fixture.json")
	example, err := os.ReadFile("../deploy/fixture.example.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(fixture, example, 0o600))
	for want, extra := range map[string][]string{
		"--grant-author-key 1 is also a --grant-key-file key": {"--grant-key-file", path, "--grant-author-url", "https://author.example/g", "--grant-author-key", public},
		"token file": {"--grant-author-url", "https://author.example/g", "--grant-author-key", public, "--grant-author-token-file", filepath.Join(t.TempDir(), "missing")},
	} {
		args := append([]string{"--fixture", fixture, "--site-id", "site_example", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, extra...)
		cfg, err := config.Load(args, func(string) string { return "" })
		require.NoError(t, err)
		err = server.Run(context.Background(), cfg, slog.New(slog.DiscardHandler), server.Hooks{})
		require.ErrorContains(t, err, want)
	}
}
