package plane_test

// FuzzHandler drives the whole public handler with requests a stranger (or
// a signed caller) could send, against a relay on the memory store holding
// jobs in every state. It is served in process with a recorder, for speed;
// the end-to-end tests cover the sockets.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/plane"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
)

// The signers a fuzz input may pick (signer % len(fuzzSigners)).
var fuzzSigners = []struct {
	keys, caller string
	site         bool
}{
	{},                               // unsigned
	{"alice", "runner_alice", false}, // paired, consented
	{"bob", "runner_bob", false},     // paired, revoked
	{"carol", "runner_carol", false}, // paired, consent gone
	{"site", siteMain, true},         // the relay's site
	{"other", siteOther, true},       // registered, not routed for
	{"stranger", "runner_alice", false},
}

// Option bits of a fuzz input.
const (
	fuzzPublicDebug = 1 << iota
	fuzzTrustForwardedFor
	fuzzSmallLimits
	fuzzSendTwice // with a limiter of burst 1
	fuzzServeV2   // protocols 0 and 2, with device-code pairing
)

// fuzzStart is the fixed instant both clocks start from, so that inputs
// replay the same way.
var fuzzStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fuzzWorld is what every iteration shares: deterministic keys and the
// projection.
type fuzzWorld struct {
	keys   keyring
	source *projection.Source
}

func newFuzzWorld(f *testing.F) *fuzzWorld {
	w := &fuzzWorld{keys: keyring{}}
	for _, name := range []string{"site", "other", "stranger", "alice", "bob", "carol"} {
		seed := sha256.Sum256([]byte("fuzz identity " + name))
		enc := sha256.Sum256([]byte("fuzz encryption " + name))
		k, err := peer.NewKeys(ed25519.NewKeyFromSeed(seed[:]), enc)
		if err != nil {
			f.Fatal(err)
		}
		w.keys[name] = k
	}
	fx := projection.Empty()
	fx.Sites = []projection.SiteRecord{{SiteID: siteMain, Site: w.keys["site"].Public()}, {SiteID: siteOther, Site: w.keys["other"].Public()}}
	fx.Consents = []projection.ConsentRecord{{Owner: "alice", SiteID: siteMain}, {Owner: "bob", SiteID: siteMain}}
	fx.Revoked = []projection.RevocationRecord{{Owner: "bob", SiteID: siteMain}}
	for _, d := range []struct{ name, owner, runner string }{{"alice", "alice", "runner_alice"}, {"bob", "bob", "runner_bob"}, {"carol", "carol", "runner_carol"}} {
		fx.Devices = append(fx.Devices, projection.DeviceRecord{Owner: d.owner, RunnerID: d.runner, Device: w.keys[d.name].Public()})
	}
	var err error
	if w.source, err = projection.Static(fx); err != nil {
		f.Fatal(err)
	}
	return w
}

// fuzzState is one iteration's store, filled with jobs in every state, and
// the secrets only their rightful callers may see.
type fuzzState struct {
	store *memory.Store
	clock *clock.Manual
	// vars are the placeholders a fuzz input may use, such as
	// {{lease-job-ready}}, with their values in this iteration.
	vars map[string]string
	// secrets are texts only alice (the holder) or the site may be shown.
	secrets []string
}

func (w *fuzzWorld) state(t *testing.T) *fuzzState {
	ctx := context.Background()
	clk := clock.NewManual(fuzzStart)
	st := memory.New(clk)
	s := &fuzzState{store: st, clock: clk, vars: map[string]string{}}
	now := fuzzStart.UnixMilli()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []struct{ name, owner, runner string }{{"alice", "alice", "runner_alice"}, {"bob", "bob", "runner_bob"}, {"carol", "carol", "runner_carol"}} {
		_, err := st.Pair(ctx, store.PairInput{RunnerID: d.runner, Owner: d.owner, Device: w.keys[d.name].Public()})
		must(err)
	}
	siteKeyID := w.keys["site"].KeyID()
	stub := func(id, owner, kind string) protocol.JobStub {
		return protocol.JobStub{ID: id, Kind: kind, Owner: owner, Site: siteKeyID, Audience: protocol.AudiencePublic,
			SizeClass: protocol.SizeClassSmall, DeadlineAt: now + time.Hour.Milliseconds()}
	}
	// Envelopes between the site and alice's device, who holds every job.
	envelope := func(secret, direction string) protocol.SealedEnvelope {
		s.secrets = append(s.secrets, secret)
		e := protocol.SealedEnvelope{Ciphertext: secret, RecipientKeyID: w.keys["alice"].KeyID(), SenderKeyID: siteKeyID, Direction: direction, DeadlineAt: now + time.Hour.Milliseconds()}
		if direction == protocol.DirectionResult {
			e.RecipientKeyID, e.SenderKeyID = e.SenderKeyID, e.RecipientKeyID
		}
		return e
	}
	alice := w.keys["alice"].Public()
	claim := store.ClaimInput{RunnerID: "runner_alice", Owner: "alice", Device: alice, Routes: []store.Route{{SiteID: siteMain, Owner: "alice"}},
		Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: protocol.DefaultLeaseMs}
	// Each job is enqueued alone and taken as far as its name says.
	for _, id := range []string{"job-done", "job-running", "job-ready", "job-awaiting"} {
		_, err := st.Enqueue(ctx, store.EnqueueInput{SiteID: siteMain, Stub: stub(id, "alice", protocol.KindGenerate)})
		must(err)
		got, err := st.Claim(ctx, claim)
		must(err)
		if len(got) != 1 || got[0].ID != id {
			t.Fatalf("seeding: claimed %+v, want %s", got, id)
		}
		l := store.LeaseInput{JobID: id, RunnerID: "runner_alice", LeaseID: got[0].Lease.ID}
		s.vars["{{lease-"+id+"}}"] = l.LeaseID
		s.secrets = append(s.secrets, l.LeaseID)
		if id == "job-awaiting" {
			continue
		}
		must(st.Payload(ctx, store.PayloadInput{JobID: id, SiteID: siteMain, Envelope: envelope("SECRET-PAYLOAD-"+id, protocol.DirectionPayload)}))
		if id == "job-ready" {
			continue
		}
		_, err = st.Fetch(ctx, l)
		must(err)
		if id == "job-done" {
			_, err = st.Result(ctx, store.ResultInput{LeaseInput: l, Envelope: envelope("SECRET-RESULT-"+id, protocol.DirectionResult), Disposition: protocol.DispositionOK})
			must(err)
		}
	}
	for _, in := range []store.EnqueueInput{
		{SiteID: siteMain, Stub: stub("job-queued", "alice", protocol.KindGenerate)},
		{SiteID: siteMain, Stub: stub("job-chat", "bob", protocol.KindChat)},
		{SiteID: siteOther, Stub: stub("job-foreign", "alice", protocol.KindGenerate)},
	} {
		_, err := st.Enqueue(ctx, in)
		must(err)
	}
	aliceJSON, _ := json.Marshal(alice)
	s.vars["{{siteKeyId}}"] = siteKeyID
	s.vars["{{aliceDevice}}"] = string(aliceJSON)
	s.vars["{{now}}"] = strconv.FormatInt(now, 10)
	s.vars["{{deadline}}"] = strconv.FormatInt(now+time.Hour.Milliseconds(), 10)
	return s
}

// expand replaces the placeholders in text.
func (s *fuzzState) expand(text string) string {
	if !strings.Contains(text, "{{") {
		return text
	}
	for k, v := range s.vars {
		text = strings.ReplaceAll(text, k, v)
	}
	return text
}

// snapshot is every job and presence record, as JSON.
func (s *fuzzState) snapshot(t *testing.T) string {
	jobs, err := s.store.Jobs(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	people, err := s.store.Runners(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal([]any{jobs, people})
	return string(out)
}

func (w *fuzzWorld) relay(s *fuzzState, opts uint8) *plane.Relay {
	cfg := plane.Config{
		SiteID: siteMain, Store: s.store, Projection: w.source.Current, Clock: s.clock,
		PublicDebug:       opts&fuzzPublicDebug != 0,
		TrustForwardedFor: opts&fuzzTrustForwardedFor != 0,
		// The requests' Host, so that the public debug page is fuzzed.
		AdminHosts: []string{"relay.test"},
	}
	if opts&fuzzSmallLimits != 0 {
		cfg.MaxBodyBytes = 1024
		cfg.Limits = protocol.Limits{MaxListItems: 2, MaxCiphertextBytes: 16}
	}
	if opts&fuzzServeV2 != 0 {
		cfg.Protocols = plane.Protocols{V0: true, V2: true}
		cfg.V2 = codec2.Options{VerificationURL: verificationURL}
		cfg.Pairings = s.store.Pairings()
	}
	rate := ratelimit.Rate{Every: time.Millisecond, Burst: 1000}
	if opts&fuzzSendTwice != 0 {
		rate = ratelimit.Rate{Every: time.Minute, Burst: 1}
	}
	runners, _ := ratelimit.NewMemory(rate, s.clock)
	sites, _ := ratelimit.NewMemory(rate, s.clock)
	cfg.RunnerLimit, cfg.SiteLimit = ratelimit.Apart(runners), ratelimit.Apart(sites)
	return plane.New(cfg)
}

// isToken reports whether method could reach a server as a method at all.
func isToken(method string) bool {
	if method == "" {
		return false
	}
	for _, c := range []byte(method) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// FuzzHandler sends one request (twice with fuzzSendTwice), optionally
// signed as one of fuzzSigners over whatever path and body the input
// holds, to a fresh relay. Placeholders such as {{lease-job-ready}} in the
// path, headers and body let inputs name this iteration's lease ids.
// Properties: no panic and no 5xx; JSON with the protocol's content type
// (or the debug page where it is served); every refusal a known code with
// a status that code may carry and only its own extra fields; a refused
// request changes nothing stored; a lease id or ciphertext reaches only
// its holder (alice) or the site, unless the request itself carried it.
func FuzzHandler(f *testing.F) {
	w := newFuzzWorld(f)
	f.Fuzz(func(t *testing.T, method, path, headers string, body []byte, signer uint8, skewMs int64, opts uint8) {
		if !isToken(method) || !strings.HasPrefix(path, "/") {
			return
		}
		s := w.state(t)
		path = s.expand(path)
		body = []byte(s.expand(string(body)))
		req, err := http.NewRequest(method, "http://relay.test"+path, bytes.NewReader(body))
		if err != nil {
			return // no server would hand this request to the handler
		}
		req.RemoteAddr = "192.0.2.10:5555"
		req.RequestURI = path
		headers = s.expand(headers)
		for _, line := range strings.Split(headers, "\n") {
			name, value, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
			if ok && name != "" {
				req.Header.Add(name, strings.TrimSpace(value))
			}
		}
		who := fuzzSigners[int(signer)%len(fuzzSigners)]
		if who.keys != "" {
			endpoint := req.URL.EscapedPath()
			endpoint = endpoint[strings.LastIndexByte(endpoint, '/')+1:]
			header := protocol.HeaderRunner
			if who.site {
				endpoint, header = "site/"+endpoint, protocol.HeaderSite
			}
			signed := body
			if method != http.MethodPost {
				signed = nil
			}
			protocol.SignRequest(req.Header, header, w.keys[who.keys].IdentityPrivate(), endpoint, who.caller, fuzzStart.UnixMilli()+skewMs, signed)
		}
		relay := w.relay(s, opts)
		sent := path + "\n" + headers + "\n" + string(body)
		maySee := who.keys == "alice" || (who.keys == "site" && who.site)

		rounds := 1
		if opts&fuzzSendTwice != 0 {
			rounds = 2
		}
		for range rounds {
			before := s.snapshot(t)
			r := req.Clone(context.Background())
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec := httptest.NewRecorder()
			relay.Handler().ServeHTTP(rec, r)
			checkFuzzAnswer(t, rec, opts)
			if rec.Code >= 400 && s.snapshot(t) != before {
				t.Fatalf("refused with %d %s, yet the state changed", rec.Code, rec.Body.Bytes())
			}
			if !maySee {
				for _, secret := range s.secrets {
					if strings.Contains(rec.Body.String(), secret) && !strings.Contains(sent, secret) {
						t.Fatalf("answer to %q shows %q: %s", who.keys, secret, rec.Body.Bytes())
					}
				}
			}
		}
	})
}

// allowedCodes pairs each refusal status with the codes it may carry: the
// protocol's table, the reference's 403 "unauthorized" (RB-G1), 409
// "too-late" (RB-G2) and relayd's 413 "bad-request".
var allowedCodes = map[int][]protocol.Code{
	400: {protocol.CodeBadRequest, protocol.CodeUnsupportedProtocolVersion},
	401: {protocol.CodeUnauthorized, protocol.CodeClockSkew},
	403: {protocol.CodeForbidden, protocol.CodeRevoked, protocol.CodeUnauthorized},
	404: {protocol.CodeNotFound},
	409: {protocol.CodeNotReady, protocol.CodeTooLate},
	413: {protocol.CodeBadRequest},
	429: {protocol.CodeRateLimited},
	// Protocol "2": device-code pairing without a verification URL.
	501: {protocol.CodeBadRequest},
}

func checkFuzzAnswer(t *testing.T, rec *httptest.ResponseRecorder, opts uint8) {
	t.Helper()
	status, body := rec.Code, rec.Body.Bytes()
	if status >= 500 {
		t.Fatalf("%d: %s", status, body)
	}
	ct := rec.Header().Values("Content-Type")
	if status == 200 && slices.Equal(ct, []string{"text/html; charset=utf-8"}) {
		if opts&fuzzPublicDebug == 0 {
			t.Fatalf("the debug page was served without PublicDebug")
		}
		return
	}
	if !slices.Equal(ct, []string{"application/json"}) {
		t.Fatalf("%d with content type %v: %s", status, ct, body)
	}
	if !json.Valid(body) {
		t.Fatalf("%d with a body that is not JSON: %q", status, body)
	}
	if status < 400 {
		if status != 200 {
			t.Fatalf("status %d", status)
		}
		return
	}
	var e protocol.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("%d: refusal body %s does not parse: %v", status, body, err)
	}
	if !slices.Contains(allowedCodes[status], e.Error) {
		t.Fatalf("%d carries code %q: %s", status, e.Error, body)
	}
	if e.Message == "" && string(body) != `{"error":"not-found"}` {
		t.Fatalf("refusal without a message: %s", body)
	}
	clockSkew := e.Error == protocol.CodeClockSkew
	if clockSkew != (e.ServerTime == fuzzStart.UnixMilli() && e.MaxSkewMs == protocol.MaxClockSkewMs) ||
		(!clockSkew && (e.ServerTime != 0 || e.MaxSkewMs != 0)) {
		t.Fatalf("clock fields: %s", body)
	}
	version := e.Error == protocol.CodeUnsupportedProtocolVersion
	supported := []string{"0"}
	if opts&fuzzServeV2 != 0 {
		supported = []string{"0", "2"}
	}
	if version != (slices.Equal(e.Supported, supported) && e.Minimum == "0") {
		t.Fatalf("version fields: %s", body)
	}
	retry := e.Error == protocol.CodeRateLimited || e.Error == protocol.CodeServerError
	if retry != (e.RetryAfter > 0) {
		t.Fatalf("retry fields: %s", body)
	}
	if retry && rec.Header().Get("Retry-After") != strconv.FormatInt(e.RetryAfter, 10) {
		t.Fatalf("Retry-After %q for %s", rec.Header().Get("Retry-After"), body)
	}
}
