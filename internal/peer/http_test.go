package peer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/protocol"
)

// seen is one request as the fake relay received it.
type seen struct {
	Method string
	Path   string // escaped, as the relay routes on it
	Query  string
	Header http.Header
	Body   []byte
}

// fakeRelay is a real HTTP server on a loopback socket that records every
// request and answers from a per-path handler.
type fakeRelay struct {
	srv *httptest.Server

	mu     sync.Mutex
	seen   []seen
	routes map[string]func(req seen) (int, string)
}

func newFakeRelay(t *testing.T) *fakeRelay {
	t.Helper()
	f := &fakeRelay{routes: map[string]func(seen) (int, string){}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req := seen{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
		f.mu.Lock()
		f.seen = append(f.seen, req)
		route := f.routes[req.Path]
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if route == nil {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":"not-found"}`)
			return
		}
		status, out := route(req)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, out)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeRelay) handle(path string, fn func(req seen) (int, string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[path] = fn
}

func (f *fakeRelay) reply(path string, status int, body string) {
	f.handle(path, func(seen) (int, string) { return status, body })
}

func (f *fakeRelay) last(t *testing.T) seen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.seen)
	return f.seen[len(f.seen)-1]
}

func (f *fakeRelay) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.seen...)
}

var testNow = time.UnixMilli(1_800_000_000_123)

func testConfig(bases ...string) Config {
	return Config{BaseURLs: bases, Clock: clock.NewManual(testNow), PollInterval: time.Millisecond}
}

// requireSigned checks a request's signature headers the way the relay
// will: parsed, fresh against testNow, and valid for endpoint and body.
func requireSigned(t *testing.T, req seen, callerHeader, endpoint, callerID string, key Keys) {
	t.Helper()
	sig, ok := protocol.ParseSignature(req.Header, callerHeader)
	require.True(t, ok, "request is signed")
	require.Equal(t, callerID, sig.CallerID)
	require.Equal(t, testNow.UnixMilli(), sig.IssuedAt)
	require.Equal(t, protocol.Valid, protocol.Verify(sig, endpoint, req.Body, key.Public().Identity, testNow.UnixMilli()))
	// The other plane's caller header must not be set.
	other := protocol.HeaderSite
	if callerHeader == protocol.HeaderSite {
		other = protocol.HeaderRunner
	}
	require.Empty(t, req.Header.Get(other))
}

// requireStrictJSON checks that body is exactly the wire request shape:
// every key known to the protocol struct, and the same content as want.
func requireStrictJSON[T any](t *testing.T, body []byte, want string) T {
	t.Helper()
	var v T
	require.NoError(t, strictUnmarshal(body, &v))
	require.JSONEq(t, want, string(body))
	return v
}

func TestSigningHeadersVerify(t *testing.T) {
	keys := mustKeys(t)
	cfg := testConfig("http://127.0.0.1:1")
	d, err := NewDaemon(cfg, keys, "runner-1")
	require.NoError(t, err)
	body := []byte(`{"a":1}`)

	h := d.SignHeaders("claim", body)
	sig, ok := protocol.ParseSignature(h, protocol.HeaderRunner)
	require.True(t, ok)
	require.Equal(t, "1800000000123", h.Get("x-byollm-issued-at"))
	require.Equal(t, protocol.Valid, protocol.Verify(sig, "claim", body, keys.Public().Identity, testNow.UnixMilli()))
	require.Equal(t, protocol.BadSignature, protocol.Verify(sig, "fetch", body, keys.Public().Identity, testNow.UnixMilli()))
	require.Equal(t, protocol.BadSignature, protocol.Verify(sig, "claim", []byte(`{"a":2}`), keys.Public().Identity, testNow.UnixMilli()))
	require.Equal(t, protocol.Stale, protocol.Verify(sig, "claim", body, keys.Public().Identity, testNow.UnixMilli()+protocol.MaxClockSkewMs+1))

	s, err := NewSite(cfg, keys, "site-1")
	require.NoError(t, err)
	h = s.SignHeadersAt("site/pending", nil, 42)
	sig, ok = protocol.ParseSignature(h, protocol.HeaderSite)
	require.True(t, ok)
	require.Equal(t, "site-1", sig.CallerID)
	require.Equal(t, protocol.Valid, protocol.Verify(sig, "site/pending", nil, keys.Public().Identity, 42))
	_, ok = protocol.ParseSignature(h, protocol.HeaderRunner)
	require.False(t, ok, "a site signature is not a daemon signature")
}

func TestDaemonEndpoints(t *testing.T) {
	ctx := context.Background()
	relay := newFakeRelay(t)
	device, site := mustKeys(t), mustKeys(t)
	d, err := NewDaemon(testConfig(relay.srv.URL+"/"), device, "")
	require.NoError(t, err)

	_, err = d.Claim(ctx, []string{protocol.KindGenerate}, 1)
	require.ErrorContains(t, err, "pair first")
	require.Empty(t, relay.requests(), "nothing is sent before the daemon has a runner id")

	pairDaemon(t, ctx, relay, d, device, site)

	cases := daemonEndpointCases(ctx, d, site)
	for _, tc := range cases {
		t.Run(tc.endpoint, func(t *testing.T) {
			relay.reply("/byollm/"+tc.endpoint, 200, tc.reply)
			resp, err := tc.call()
			require.NoError(t, err)
			if tc.wantResp != nil {
				require.Equal(t, tc.wantResp, resp)
			}
			req := relay.last(t)
			require.Equal(t, http.MethodPost, req.Method)
			require.Equal(t, "/byollm/"+tc.endpoint, req.Path)
			require.Empty(t, req.Query)
			require.Equal(t, "application/json", req.Header.Get("Content-Type"))
			requireSigned(t, req, protocol.HeaderRunner, tc.endpoint, "runner-7", device)
			require.JSONEq(t, tc.wantBody, string(req.Body))
		})
	}

	claimed, err := d.Claim(ctx, nil, 1)
	require.NoError(t, err)
	require.Len(t, claimed.Jobs, 1)
	require.Equal(t, "job-1", claimed.Jobs[0].ID)
	require.Equal(t, "runner-7", claimed.Jobs[0].Lease.RunnerID)
	require.Contains(t, string(relay.last(t).Body), `"capabilities":[]`, "no kinds is an empty array, never null")

	_, err = d.Heartbeat(ctx, nil)
	require.NoError(t, err)
	require.Contains(t, string(relay.last(t).Body), `"activeLeases":[]`)
}

// pairDaemon pairs d as alice's device through relay, which answers as
// site: pair is unsigned, carries the fixture body, and pins the site.
func pairDaemon(t *testing.T, ctx context.Context, relay *fakeRelay, d *Daemon, device, site Keys) {
	t.Helper()
	pairResp, err := json.Marshal(protocol.PairResponse{ProtocolVersion: "0", RunnerID: "runner-7", Site: site.Public()})
	require.NoError(t, err)
	relay.reply("/byollm/pair", 200, string(pairResp))
	got, err := d.Pair(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, "runner-7", got.RunnerID)
	req := relay.last(t)
	require.Equal(t, http.MethodPost, req.Method)
	require.Equal(t, "/byollm/pair", req.Path)
	require.Empty(t, req.Header.Get(protocol.HeaderSignature))
	require.Empty(t, req.Header.Get(protocol.HeaderRunner))
	require.Equal(t, "application/json", req.Header.Get("Content-Type"))
	dev := device.Public()
	requireStrictJSON[protocol.PairRequest](t, req.Body, `{"protocolVersion":"0","owner":"alice","device":{"identity":"`+
		dev.Identity+`","encryption":"`+dev.Encryption+`","encryptionSig":"`+dev.EncryptionSig+`"}}`)
	require.Equal(t, "runner-7", d.RunnerID())
	pinned, ok := d.SiteIdentity()
	require.True(t, ok)
	require.Equal(t, site.Public(), pinned)
}

// daemonEndpointCase is one signed daemon call: the relay's reply, the
// body the call must send, and the answer it must read.
type daemonEndpointCase struct {
	endpoint string
	reply    string
	call     func() (any, error)
	wantBody string
	wantResp any
}

// daemonEndpointCases are the signed calls of d, runner-7, paired to site.
func daemonEndpointCases(ctx context.Context, d *Daemon, site Keys) []daemonEndpointCase {
	stubJSON := `{"id":"job-1","kind":"llm.generate","owner":"alice","site":"` + site.KeyID() +
		`","audience":"self","sizeClass":"small","streaming":false,"deadlineAt":1800000060000,` +
		`"lease":{"id":"0b7e4a8c-1f3d-4c2a-9e5b-6d7f8a9b0c1d","runnerId":"runner-7","expiresAt":1800000060123}}`
	env := protocol.SealedEnvelope{Ciphertext: "Y3Q", RecipientKeyID: "BYOLLM-R", SenderKeyID: "BYOLLM-S", Direction: "result", DeadlineAt: 5}
	envJSON := `{"ciphertext":"Y3Q","recipientKeyId":"BYOLLM-R","senderKeyId":"BYOLLM-S","direction":"result","deadlineAt":5}`
	leases := []protocol.LeaseRef{{JobID: "job-1", LeaseID: "lease-1"}, {JobID: "job-2", LeaseID: "lease-2"}}
	leasesJSON := `[{"jobId":"job-1","leaseId":"lease-1"},{"jobId":"job-2","leaseId":"lease-2"}]`
	caps := `[{"kind":"llm.generate","backendId":"ollama","backendClass":"http","model":"relayd-test","offerScope":"public"},` +
		`{"kind":"llm.chat","backendId":"ollama","backendClass":"http","model":"relayd-test","offerScope":"public"}]`

	return []daemonEndpointCase{
		{
			endpoint: "claim",
			reply:    `{"jobs":[` + stubJSON + `],"leaseMs":60000}`,
			call: func() (any, error) {
				return d.Claim(ctx, []string{protocol.KindGenerate, protocol.KindChat}, 3)
			},
			wantBody: `{"protocolVersion":"0","runnerId":"runner-7","capabilities":` + caps + `,"max":3}`,
		},
		{
			endpoint: "fetch",
			reply:    `{"envelope":` + envJSON + `}`,
			call:     func() (any, error) { return d.Fetch(ctx, "job-1", "lease-1") },
			wantBody: `{"protocolVersion":"0","runnerId":"runner-7","jobId":"job-1","leaseId":"lease-1"}`,
			wantResp: protocol.FetchResponse{Envelope: env},
		},
		{
			endpoint: "result",
			reply:    `{"accepted":false,"duplicate":true,"state":"done"}`,
			call:     func() (any, error) { return d.Result(ctx, "job-1", "lease-1", env, protocol.DispositionOK) },
			wantBody: `{"protocolVersion":"0","runnerId":"runner-7","jobId":"job-1","leaseId":"lease-1","envelope":` + envJSON + `,"disposition":"ok"}`,
			wantResp: protocol.ResultResponse{Accepted: false, Duplicate: true, State: "done"},
		},
		{
			endpoint: "heartbeat",
			reply:    `{"revoked":false,"cancel":["job-2"],"lost":[],"serverTime":1800000000200}`,
			call:     func() (any, error) { return d.Heartbeat(ctx, leases) },
			wantBody: `{"protocolVersion":"0","runnerId":"runner-7","daemonVersion":"relayd-client/0","capabilities":` + caps +
				`,"activeLeases":` + leasesJSON + `,"paused":false}`,
			wantResp: protocol.HeartbeatResponse{Cancel: []string{"job-2"}, Lost: []string{}, ServerTime: 1800000000200},
		},
		{
			endpoint: "release",
			reply:    `{"released":["job-1"]}`,
			call:     func() (any, error) { return d.Release(ctx, leases, protocol.ReasonShutdown) },
			wantBody: `{"protocolVersion":"0","runnerId":"runner-7","leases":` + leasesJSON + `,"reason":"shutdown"}`,
			wantResp: protocol.ReleaseResponse{Released: []string{"job-1"}},
		},
	}
}

func TestDaemonBasePath(t *testing.T) {
	relay := newFakeRelay(t)
	relay.reply("/custom/base/release", 200, `{"released":[]}`)
	relay.reply("/release", 200, `{"released":[]}`)

	cfg := testConfig(relay.srv.URL)
	cfg.BasePath = "/custom/base/"
	d, err := NewDaemon(cfg, mustKeys(t), "runner-1")
	require.NoError(t, err)
	_, err = d.Release(context.Background(), nil, protocol.ReasonPause)
	require.NoError(t, err)
	require.Equal(t, "/custom/base/release", relay.last(t).Path)

	cfg.BasePath = "/"
	d, err = NewDaemon(cfg, mustKeys(t), "runner-1")
	require.NoError(t, err)
	_, err = d.Release(context.Background(), nil, protocol.ReasonPause)
	require.NoError(t, err)
	require.Equal(t, "/release", relay.last(t).Path)
}

func TestPairKeepsTheFirstSitePinned(t *testing.T) {
	ctx := context.Background()
	relay := newFakeRelay(t)
	site, impostor := mustKeys(t), mustKeys(t)
	d, err := NewDaemon(testConfig(relay.srv.URL), mustKeys(t), "")
	require.NoError(t, err)

	for _, tc := range []struct {
		site    protocol.PublicIdentity
		wantErr string
	}{
		{site: func() protocol.PublicIdentity {
			p := site.Public()
			p.EncryptionSig = impostor.Public().EncryptionSig
			return p
		}(), wantErr: "not consistent"},
		{site: site.Public()},
		{site: impostor.Public(), wantErr: "is pinned"},
	} {
		body, err := json.Marshal(protocol.PairResponse{ProtocolVersion: "0", RunnerID: "runner-1", Site: tc.site})
		require.NoError(t, err)
		relay.reply("/byollm/pair", 200, string(body))
		_, err = d.Pair(ctx, "alice")
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr)
		} else {
			require.NoError(t, err)
		}
	}
	pinned, ok := d.SiteIdentity()
	require.True(t, ok)
	require.Equal(t, site.Public(), pinned)
}

func TestSiteEndpoints(t *testing.T) {
	ctx := context.Background()
	relay := newFakeRelay(t)
	siteKeys, device := mustKeys(t), mustKeys(t)
	s, err := NewSite(testConfig(relay.srv.URL), siteKeys, "site a&b")
	require.NoError(t, err)

	cases := siteEndpointCases(ctx, s, siteKeys, device)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			relay.reply("/relay/site/"+tc.name, 200, tc.reply)
			resp, err := tc.call()
			require.NoError(t, err)
			require.Equal(t, tc.wantResp, resp)
			req := relay.last(t)
			require.Equal(t, tc.method, req.Method)
			require.Equal(t, "/relay/site/"+tc.name, req.Path)
			requireSigned(t, req, protocol.HeaderSite, "site/"+tc.name, "site a&b", siteKeys)
			if tc.method == http.MethodGet {
				require.Equal(t, "siteId=site+a%26b", req.Query)
				require.Empty(t, req.Body)
				require.Equal(t, protocol.EmptyBodyDigest, sha256Hex(req.Body))
			} else {
				require.Empty(t, req.Query)
				require.Equal(t, "application/json", req.Header.Get("Content-Type"))
				require.JSONEq(t, tc.wantBody, string(req.Body))
			}
		})
	}
}

// siteEndpointCase is one signed site call: its method, the relay's
// reply, the body the call must send ("" for reads), and the answer it
// must read.
type siteEndpointCase struct {
	name     string
	method   string
	reply    string
	call     func() (any, error)
	wantBody string
	wantResp any
}

// siteEndpointCases are the signed calls of s, whose keys are siteKeys,
// about jobs for device.
func siteEndpointCases(ctx context.Context, s *Site, siteKeys, device Keys) []siteEndpointCase {
	stub := s.Stub("job-1", protocol.KindChat, "alice", 1800000060000)
	env := protocol.SealedEnvelope{Ciphertext: "Y3Q", RecipientKeyID: "BYOLLM-R", SenderKeyID: "BYOLLM-S", Direction: "payload", DeadlineAt: 5}
	envJSON := `{"ciphertext":"Y3Q","recipientKeyId":"BYOLLM-R","senderKeyId":"BYOLLM-S","direction":"payload","deadlineAt":5}`
	dev := device.Public()
	devJSON := `{"identity":"` + dev.Identity + `","encryption":"` + dev.Encryption + `","encryptionSig":"` + dev.EncryptionSig + `"}`

	return []siteEndpointCase{
		{
			name: "enqueue", method: http.MethodPost,
			reply:    `{"jobId":"job-1","state":"queued"}`,
			call:     func() (any, error) { return s.Enqueue(ctx, stub) },
			wantBody: `{"siteId":"site a&b","stub":{"id":"job-1","kind":"llm.chat","owner":"alice","site":"` + siteKeys.KeyID() + `","audience":"self","sizeClass":"small","streaming":false,"deadlineAt":1800000060000}}`,
			wantResp: protocol.EnqueueResponse{JobID: "job-1", State: "queued"},
		},
		{
			name: "payload", method: http.MethodPost,
			reply:    `{"jobId":"job-1","state":"ready"}`,
			call:     func() (any, error) { return s.Payload(ctx, "job-1", env) },
			wantBody: `{"siteId":"site a&b","jobId":"job-1","envelope":` + envJSON + `}`,
			wantResp: protocol.PayloadResponse{JobID: "job-1", State: "ready"},
		},
		{
			name: "cancel", method: http.MethodPost,
			reply:    `{"cancelled":true}`,
			call:     func() (any, error) { return s.Cancel(ctx, "job-1") },
			wantBody: `{"siteId":"site a&b","jobId":"job-1"}`,
			wantResp: protocol.CancelResponse{Cancelled: true},
		},
		{
			name: "pending", method: http.MethodGet,
			reply: `{"jobs":[{"jobId":"job-1","device":` + devJSON + `,"runnerId":"runner-1","leaseId":"lease-1","awaitingUntil":10,"leaseExpiresAt":60}]}`,
			call:  func() (any, error) { return s.Pending(ctx) },
			wantResp: protocol.PendingResponse{Jobs: []protocol.PendingJob{{
				JobID: "job-1", Device: dev, RunnerID: "runner-1", LeaseID: "lease-1", AwaitingUntil: 10, LeaseExpiresAt: 60,
			}}},
		},
		{
			name: "results", method: http.MethodGet,
			// Site-plane answers are read leniently, as the upstream site does.
			reply: `{"jobs":[{"jobId":"job-1","envelope":` + envJSON + `,"disposition":"ok","runnerId":"runner-1","leaseId":"lease-1","device":` + devJSON + `,"runnerOwner":"alice","extra":1}]}`,
			call:  func() (any, error) { return s.Results(ctx) },
			wantResp: protocol.ResultsResponse{Jobs: []protocol.FinishedJob{{
				JobID: "job-1", Envelope: env, Disposition: "ok", RunnerID: "runner-1", LeaseID: "lease-1", Device: dev, RunnerOwner: "alice",
			}}},
		},
	}
}

func TestRefusalsBecomeErrors(t *testing.T) {
	ctx := context.Background()
	relay := newFakeRelay(t)
	keys := mustKeys(t)
	d, err := NewDaemon(testConfig(relay.srv.URL), keys, "runner-1")
	require.NoError(t, err)
	s, err := NewSite(testConfig(relay.srv.URL), keys, "site-1")
	require.NoError(t, err)

	relay.reply("/byollm/fetch", 409, `{"error":"not-ready","message":"the site has not sealed this job yet"}`)
	_, err = d.Fetch(ctx, "job-1", "lease-1")
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "fetch", e.Endpoint)
	require.Equal(t, 409, e.Status)
	require.Equal(t, protocol.ErrorBody{Error: protocol.CodeNotReady, Message: protocol.MsgNotSealed}, e.Body)
	require.Equal(t, protocol.CodeNotReady, ErrorCode(err))
	require.Equal(t, 409, ErrorStatus(err))
	require.EqualError(t, err, "fetch: relay answered 409 not-ready: the site has not sealed this job yet")

	relay.reply("/relay/site/pending", 401, `{"error":"clock-skew","message":"m","serverTime":7,"maxSkewMs":120000}`)
	_, err = s.Pending(ctx)
	require.ErrorAs(t, err, &e)
	require.Equal(t, "site/pending", e.Endpoint)
	require.Equal(t, protocol.ErrorBody{Error: protocol.CodeClockSkew, Message: "m", ServerTime: 7, MaxSkewMs: 120000}, e.Body)

	// The unknown-path 404 carries no message; a proxy's HTML page is not JSON.
	_, err = d.Claim(ctx, nil, 1)
	require.ErrorAs(t, err, &e)
	require.Equal(t, 404, e.Status)
	require.Equal(t, protocol.CodeNotFound, e.Body.Error)
	relay.reply("/relay/site/cancel", 502, `<html>bad gateway</html>`)
	_, err = s.Cancel(ctx, "job-1")
	require.ErrorAs(t, err, &e)
	require.Equal(t, 502, e.Status)
	require.Empty(t, e.Body.Error)
	require.Equal(t, `<html>bad gateway</html>`, string(e.Raw))

	// Daemon-plane success bodies are read strictly (RB-A17): an extra key is
	// a decoding error, not a refusal.
	relay.reply("/byollm/release", 200, `{"released":[],"surprise":true}`)
	_, err = d.Release(ctx, nil, protocol.ReasonShutdown)
	require.ErrorContains(t, err, "surprise")
	require.False(t, errors.As(err, &e))
	require.Zero(t, ErrorStatus(err))
}

func TestRoundRobinAcrossReplicas(t *testing.T) {
	a, b := newFakeRelay(t), newFakeRelay(t)
	for _, r := range []*fakeRelay{a, b} {
		r.reply("/relay/site/cancel", 200, `{"cancelled":false}`)
	}
	s, err := NewSite(testConfig(a.srv.URL, b.srv.URL), mustKeys(t), "site-1")
	require.NoError(t, err)
	for range 5 {
		_, err := s.Cancel(context.Background(), "job-1")
		require.NoError(t, err)
	}
	require.Len(t, a.requests(), 3)
	require.Len(t, b.requests(), 2)

	// A raw request can be pinned to one replica.
	_, err = s.Raw(context.Background(), RawRequest{BaseURL: b.srv.URL, Path: "/x"})
	require.NoError(t, err)
	require.Len(t, b.requests(), 3)
}

func TestRawAndDoSendWhatTheyAreGiven(t *testing.T) {
	ctx := context.Background()
	relay := newFakeRelay(t)
	keys := mustKeys(t)
	d, err := NewDaemon(testConfig(relay.srv.URL), keys, "runner-1")
	require.NoError(t, err)

	resp, err := d.Raw(ctx, RawRequest{
		Method: http.MethodPut,
		Path:   "/byollm/cl%61im?x=1",
		Header: http.Header{"X-Byollm-Runner": {"a", "b"}},
		Body:   []byte("not json"),
	})
	require.NoError(t, err)
	require.Equal(t, 404, resp.Status)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.JSONEq(t, `{"error":"not-found"}`, string(resp.Body))
	req := relay.last(t)
	require.Equal(t, http.MethodPut, req.Method)
	require.Equal(t, "/byollm/cl%61im", req.Path, "escapes reach the relay as written")
	require.Equal(t, "x=1", req.Query)
	require.Equal(t, []string{"a", "b"}, req.Header.Values(protocol.HeaderRunner))
	require.Empty(t, req.Header.Get(protocol.HeaderSignature))
	require.Equal(t, "not json", string(req.Body))

	// Do signs a malformed body correctly, so the relay gets as far as its schema check.
	relay.reply("/byollm/claim", 400, `{"error":"bad-request","message":"request failed schema validation"}`)
	resp, err = d.Do(ctx, "claim", []byte(`{"max":`))
	require.NoError(t, err)
	require.Equal(t, 400, resp.Status)
	req = relay.last(t)
	require.Equal(t, `{"max":`, string(req.Body))
	requireSigned(t, req, protocol.HeaderRunner, "claim", "runner-1", keys)

	s, err := NewSite(testConfig(relay.srv.URL), keys, "site-1")
	require.NoError(t, err)
	_, err = s.Do(ctx, http.MethodGet, "results", nil)
	require.NoError(t, err)
	req = relay.last(t)
	require.Equal(t, "/relay/site/results", req.Path)
	require.Equal(t, "siteId=site-1", req.Query)
	requireSigned(t, req, protocol.HeaderSite, "site/results", "site-1", keys)
}

func TestConfigValidation(t *testing.T) {
	_, err := NewDaemon(Config{}, mustKeys(t), "")
	require.ErrorContains(t, err, "no base URL")
	_, err = NewSite(Config{BaseURLs: []string{"127.0.0.1:8080"}}, mustKeys(t), "site-1")
	require.ErrorContains(t, err, "not http")
	_, err = NewSite(Config{BaseURLs: []string{"http://127.0.0.1:8080"}}, mustKeys(t), "")
	require.ErrorContains(t, err, "site id is empty")
}

// runOnceRelay scripts a fake relay for one job: claim hands out job-1,
// fetch is not-ready notReady times and then returns env, result and
// release are recorded.
func runOnceRelay(t *testing.T, site Keys, env func() protocol.SealedEnvelope, notReady int) *fakeRelay {
	t.Helper()
	relay := newFakeRelay(t)
	pairResp, err := json.Marshal(protocol.PairResponse{ProtocolVersion: "0", RunnerID: "runner-1", Site: site.Public()})
	require.NoError(t, err)
	relay.reply("/byollm/pair", 200, string(pairResp))
	relay.reply("/byollm/claim", 200, `{"jobs":[{"id":"job-1","kind":"llm.generate","owner":"alice","site":"`+site.KeyID()+
		`","audience":"self","sizeClass":"small","streaming":false,"deadlineAt":1800000060000,`+
		`"lease":{"id":"lease-1","runnerId":"runner-1","expiresAt":1800000060123}}],"leaseMs":60000}`)
	var mu sync.Mutex
	fetches := 0
	relay.handle("/byollm/fetch", func(seen) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		fetches++
		if fetches <= notReady {
			return 409, `{"error":"not-ready","message":"the site has not sealed this job yet"}`
		}
		body, err := json.Marshal(protocol.FetchResponse{Envelope: env()})
		if err != nil {
			return 500, `{"error":"server-error","message":"test"}`
		}
		return 200, string(body)
	})
	relay.reply("/byollm/result", 200, `{"accepted":true,"state":"done"}`)
	relay.reply("/byollm/release", 200, `{"released":["job-1"]}`)
	return relay
}

func requestsTo(relay *fakeRelay, path string) []seen {
	var out []seen
	for _, r := range relay.requests() {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func TestRunOnce(t *testing.T) {
	ctx := context.Background()
	site, device := mustKeys(t), mustKeys(t)
	relay := runOnceRelay(t, site, func() protocol.SealedEnvelope {
		env, err := Seal(site, device.Public(), "job-1", protocol.DirectionPayload, 1800000060000, json.RawMessage(`{"prompt":"ping"}`))
		if err != nil {
			panic(err)
		}
		return env
	}, 2)
	d, err := NewDaemon(testConfig(relay.srv.URL), device, "")
	require.NoError(t, err)

	_, _, err = d.RunOnce(ctx, nil)
	require.ErrorContains(t, err, "no site identity pinned")
	require.Empty(t, relay.requests(), "no claim without a pinned site")

	_, err = d.Pair(ctx, "alice")
	require.NoError(t, err)
	ran, ok, err := d.RunOnce(ctx, func(p json.RawMessage) (json.RawMessage, error) {
		require.JSONEq(t, `{"prompt":"ping"}`, string(p))
		return json.RawMessage(`{"outcome":{"text":"pong"},"ran":{"model":"m","backendClass":"http","durationMs":1}}`), nil
	})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "job-1", ran.Job.ID)
	require.True(t, ran.Response.Accepted)
	require.Len(t, requestsTo(relay, "/byollm/fetch"), 3, "two not-ready polls, then the payload")
	require.Empty(t, requestsTo(relay, "/byollm/release"))

	// The posted result is sealed to the site and opens with the device pinned.
	results := requestsTo(relay, "/byollm/result")
	require.Len(t, results, 1)
	var posted protocol.ResultRequest
	require.NoError(t, strictUnmarshal(results[0].Body, &posted))
	require.Equal(t, "lease-1", posted.LeaseID)
	require.Equal(t, protocol.DispositionOK, posted.Disposition)
	require.Equal(t, ran.Envelope, posted.Envelope)
	s, err := NewSite(testConfig(relay.srv.URL), site, "site-1")
	require.NoError(t, err)
	out, err := s.OpenResult(protocol.FinishedJob{JobID: "job-1", Envelope: posted.Envelope, Device: device.Public()})
	require.NoError(t, err)
	require.JSONEq(t, `{"outcome":{"text":"pong"},"ran":{"model":"m","backendClass":"http","durationMs":1}}`, string(out))
}

func TestRunOnceRefusesWorkFromAnUnpinnedKey(t *testing.T) {
	ctx := context.Background()
	site, device, impostor := mustKeys(t), mustKeys(t), mustKeys(t)
	relay := runOnceRelay(t, site, func() protocol.SealedEnvelope {
		env, err := Seal(impostor, device.Public(), "job-1", protocol.DirectionPayload, 1800000060000, json.RawMessage(`{"prompt":"evil"}`))
		if err != nil {
			panic(err)
		}
		return env
	}, 0)
	d, err := NewDaemon(testConfig(relay.srv.URL), device, "")
	require.NoError(t, err)
	_, err = d.Pair(ctx, "alice")
	require.NoError(t, err)

	called := false
	_, ok, err := d.RunOnce(ctx, func(json.RawMessage) (json.RawMessage, error) { called = true; return nil, nil })
	require.True(t, ok)
	require.ErrorContains(t, err, "refuse payload")
	require.False(t, called, "the work never runs")
	require.Empty(t, requestsTo(relay, "/byollm/result"))
	releases := requestsTo(relay, "/byollm/release")
	require.Len(t, releases, 1)
	require.JSONEq(t, `{"protocolVersion":"0","runnerId":"runner-1","leases":[{"jobId":"job-1","leaseId":"lease-1"}],"reason":"refused"}`, string(releases[0].Body))
}

func TestRunOnceNothingToClaimAndFetchBound(t *testing.T) {
	ctx := context.Background()
	site, device := mustKeys(t), mustKeys(t)
	relay := runOnceRelay(t, site, func() protocol.SealedEnvelope { return protocol.SealedEnvelope{} }, 1<<30)
	cfg := testConfig(relay.srv.URL)
	cfg.FetchWait = 20 * time.Millisecond
	d, err := NewDaemon(cfg, device, "")
	require.NoError(t, err)
	_, err = d.Pair(ctx, "alice")
	require.NoError(t, err)

	_, ok, err := d.RunOnce(ctx, nil)
	require.True(t, ok)
	require.Equal(t, protocol.CodeNotReady, ErrorCode(err))
	require.ErrorContains(t, err, "not sealed within")

	relay.reply("/byollm/claim", 200, `{"jobs":[],"leaseMs":60000}`)
	_, ok, err = d.RunOnce(ctx, nil)
	require.NoError(t, err)
	require.False(t, ok)
}

func TestSiteHelpers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	relay := newFakeRelay(t)
	siteKeys, device := mustKeys(t), mustKeys(t)
	s, err := NewSite(testConfig(relay.srv.URL), siteKeys, "site-1")
	require.NoError(t, err)

	var mu sync.Mutex
	polls := 0
	dev, err := json.Marshal(device.Public())
	require.NoError(t, err)
	relay.handle("/relay/site/pending", func(seen) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		polls++
		if polls < 3 {
			return 200, `{"jobs":[]}`
		}
		return 200, `{"jobs":[{"jobId":"job-1","device":` + string(dev) + `,"runnerId":"runner-1","leaseId":"lease-1","awaitingUntil":1,"leaseExpiresAt":2}]}`
	})
	pending, err := s.AwaitPending(ctx, "job-1")
	require.NoError(t, err)
	require.Equal(t, 3, polls)

	relay.reply("/relay/site/payload", 200, `{"jobId":"job-1","state":"ready"}`)
	_, err = s.SendPayload(ctx, pending, 1800000060000, json.RawMessage(`{"prompt":"hi"}`))
	require.NoError(t, err)
	var sent protocol.PayloadRequest
	require.NoError(t, strictUnmarshal(relay.last(t).Body, &sent))
	got, err := Open(device, sent.Envelope, Expectation{JobID: "job-1", Direction: protocol.DirectionPayload, SenderIdentity: siteKeys.Public().Identity})
	require.NoError(t, err)
	require.JSONEq(t, `{"prompt":"hi"}`, string(got))

	relay.reply("/relay/site/results", 200, `{"jobs":[]}`)
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	_, err = s.AwaitResult(short, "job-1")
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
