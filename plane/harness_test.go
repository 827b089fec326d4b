package plane_test

// The end-to-end bundle: a relay on real loopback sockets, a site and
// daemons that talk to it over HTTP, and the levers a test needs (the store
// clock, the projection). Every test in this package runs once per store in
// storeFactories and looks at routing state only through store.RoutingStore.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/plane"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
	"github.com/byollm/relayd/store/valkey"
)

// storeFactory returns a new, empty store that no other call shares, and a
// function that moves that store's clock forward.
type storeFactory func(t *testing.T) (store.RoutingStore, func(time.Duration))

// storeFactories is every store the end-to-end tests run on. Add a store
// here and every test in this package runs on it too.
var storeFactories = []struct {
	name string
	make storeFactory
}{
	{"memory", memoryStore},
	{"valkey", valkeyStore},
}

func memoryStore(t *testing.T) (store.RoutingStore, func(time.Duration)) {
	c := clock.NewManual(time.Now())
	s := memory.New(c)
	t.Cleanup(func() { _ = s.Close() })
	return s, c.Advance
}

// valkeyStore is a Valkey store under a prefix of its own on the process's
// shared server, with its clock pinned so that tests move it explicitly.
func valkeyStore(t *testing.T) (store.RoutingStore, func(time.Duration)) {
	return valkeyStoreOn(valkeytest.Shared(t))(t)
}

// valkeyStoreOn is valkeyStore on the server srv, for a test that owns
// one.
func valkeyStoreOn(srv *valkeytest.Server) storeFactory {
	return func(t *testing.T) (store.RoutingStore, func(time.Duration)) {
		s, err := valkey.NewFromClientForTest(srv.Client(t), valkeytest.Prefix(t))
		require.NoError(t, err)
		require.NoError(t, s.Ping(t.Context()))
		clock, err := valkey.TestClockOf(s)
		require.NoError(t, err)
		require.NoError(t, clock.Pin(t.Context()))
		return s, func(d time.Duration) { require.NoError(t, clock.Advance(context.Background(), d)) }
	}
}

// The world every bundle starts from: two registered sites (the relay
// routes for siteMain only), alice and bob consenting to siteMain, and four
// approved devices, one of them carol's, who never consented.
const (
	siteMain  = "site_main"
	siteOther = "site_other"
	// jobTTL puts stub deadlines far beyond any clock advance in a test.
	jobTTL = time.Hour
)

type deviceSpec struct{ name, owner, runner string }

var worldDevices = []deviceSpec{
	{"alice", "alice", "runner_alice"},
	{"alice2", "alice", "runner_alice2"},
	{"bob", "bob", "runner_bob"},
	{"carol", "carol", "runner_carol"},
}

func deviceNamed(name string) deviceSpec {
	for _, d := range worldDevices {
		if d.name == name {
			return d
		}
	}
	panic("no device named " + name)
}

// keyring holds every private key of the world by name: "site", "other",
// each device's name, and "stranger", whom nobody approved.
type keyring map[string]peer.Keys

// fixtureMod changes the world's fixture; used at setup and with project.
type fixtureMod func(f *projection.Fixture, k keyring)

type setupOpts struct {
	BasePath     string
	LeaseMs      int64
	MaxBodyBytes int64
	PublicDebug  bool
	Fixture      []fixtureMod
	// WrapStore, when set, puts a wrapper between the relay and the store.
	WrapStore func(store.RoutingStore) store.RoutingStore
	// Limits, RateLimit, SiteRateLimit and TrustForwardedFor are the
	// relay's hardening settings; the zero values are protocol's default
	// limits and no rate limits.
	Limits            protocol.Limits
	RateLimit         ratelimit.Rate
	SiteRateLimit     ratelimit.Rate
	TrustForwardedFor bool
	// Protocols and V2 are the protocols served and protocol "2"'s
	// settings; the zero values serve "0" alone, as relayd did before "2".
	Protocols plane.Protocols
	V2        codec2.Options
	// Logger, when set, receives the relay's logs.
	Logger *slog.Logger
	// AdminHosts is the relay's --admin-hosts.
	AdminHosts []string
	// Random, when set, is where pairing codes are drawn from.
	Random io.Reader
}

type bundle struct {
	ctx      context.Context
	store    store.RoutingStore
	advance  func(time.Duration)
	newStore storeFactory
	source   *projection.Source
	// clock is the relay's own clock. It stands still unless a test moves
	// it, and the clients stamp issuedAt from it, so freshness is exact.
	clock *clock.Manual
	keys  keyring
	opts  setupOpts

	relay    *plane.Relay
	admin    *plane.Admin
	url      string
	adminURL string
	httpc    *http.Client

	site      *peer.Site // the site the relay routes for
	otherSite *peer.Site // registered, but not routed for
}

// eachStore runs test once per store factory, each on a fresh bundle. A
// test that names no protocols is one of protocol "0"'s: it runs on a
// relay serving "0" alone, the relay relayd was before "2" (subtests
// named after the store), and again on one serving relayd's default, "0"
// and "2" (named memory_default), where protocol "0" must answer the
// same but for a daemon-plane request that declares no version (P2-A1; see
// requireUndeclared). The second run is on the memory store alone: which
// codec serves a request is the plane's choice, made before any store is
// asked, and the store contract holds the two stores to one behaviour.
func eachStore(t *testing.T, opts *setupOpts, test func(t *testing.T, b *bundle)) {
	t.Helper()
	if opts == nil {
		opts = &setupOpts{}
	}
	configs := []struct {
		suffix    string
		protocols plane.Protocols
	}{{"", opts.Protocols}}
	if opts.Protocols == (plane.Protocols{}) {
		configs = append(configs, struct {
			suffix    string
			protocols plane.Protocols
		}{"_default", defaultProtocols})
	}
	for _, sf := range storeFactories {
		for _, cfg := range configs {
			if cfg.suffix != "" && sf.name != "memory" {
				continue
			}
			o := *opts
			o.Protocols = cfg.protocols
			t.Run(sf.name+cfg.suffix, func(t *testing.T) {
				t.Parallel()
				test(t, setup(t, sf.make, &o))
			})
		}
	}
}

// defaultProtocols is what relayd serves unless told otherwise
// (config.DefaultProtocols).
var defaultProtocols = plane.Protocols{V0: true, V2: true}

// servesV2 reports whether the bundle's relay serves protocol "2" too.
func (b *bundle) servesV2() bool { return b.opts.Protocols.V2 }

// requireUndeclared checks the answer to a daemon-plane request that
// declares no protocol version: protocol "0"'s own answer (status, body)
// on a relay serving "0" alone; with "2" served too, the version is
// refused by name before anything else is looked at (P2-A1).
func (b *bundle) requireUndeclared(t *testing.T, resp peer.RawResponse, status int, body string) {
	t.Helper()
	if b.servesV2() {
		requireAnswer(t, resp, 400, bodyNoVersion)
		return
	}
	requireAnswer(t, resp, status, body)
}

func setup(t *testing.T, sf storeFactory, opts *setupOpts) *bundle {
	t.Helper()
	if opts == nil {
		opts = &setupOpts{}
	}
	b := &bundle{ctx: t.Context(), newStore: sf, opts: *opts, keys: keyring{}}
	b.clock = clock.NewManual(time.Now())
	for _, name := range []string{"site", "other", "stranger"} {
		b.keys[name] = genKeys(t)
	}
	for _, d := range worldDevices {
		b.keys[d.name] = genKeys(t)
	}
	f := b.worldFixture()
	for _, mod := range opts.Fixture {
		mod(f, b.keys)
	}
	var err error
	b.source, err = projection.Static(f)
	require.NoError(t, err)
	b.store, b.advance = sf(t)
	if opts.WrapStore != nil {
		b.store = opts.WrapStore(b.store)
	}

	b.relay = plane.New(b.config(b.store))
	srv := httptest.NewServer(b.relay.Handler())
	t.Cleanup(srv.Close)
	b.url, b.httpc = srv.URL, srv.Client()
	b.admin = plane.NewAdmin(b.relay)
	adm := httptest.NewServer(b.admin.Handler())
	t.Cleanup(adm.Close)
	b.adminURL = adm.URL

	b.site = b.siteAs(t, "site", siteMain)
	b.otherSite = b.siteAs(t, "other", siteOther)
	return b
}

func genKeys(t *testing.T) peer.Keys {
	t.Helper()
	k, err := peer.GenerateKeys()
	require.NoError(t, err)
	return k
}

func (b *bundle) worldFixture() *projection.Fixture {
	f := projection.Empty()
	f.Sites = []projection.SiteRecord{
		{SiteID: siteMain, Site: b.keys["site"].Public()},
		{SiteID: siteOther, Site: b.keys["other"].Public()},
	}
	f.Consents = []projection.ConsentRecord{
		{Owner: "alice", SiteID: siteMain},
		{Owner: "bob", SiteID: siteMain},
	}
	for _, d := range worldDevices {
		f.Devices = append(f.Devices, projection.DeviceRecord{Owner: d.owner, RunnerID: d.runner, Device: b.keys[d.name].Public()})
	}
	return f
}

func (b *bundle) config(s store.RoutingStore) plane.Config {
	return plane.Config{
		SiteID:       siteMain,
		BasePath:     b.opts.BasePath,
		LeaseMs:      b.opts.LeaseMs,
		Store:        s,
		Projection:   b.source.Current,
		Clock:        b.clock,
		MaxBodyBytes: b.opts.MaxBodyBytes,
		PublicDebug:  b.opts.PublicDebug,
		AdminHosts:   b.opts.AdminHosts,

		Limits:            b.opts.Limits,
		RunnerLimit:       limitOn(s, b.opts.RateLimit),
		SiteLimit:         limitOn(s, b.opts.SiteRateLimit),
		TrustForwardedFor: b.opts.TrustForwardedFor,

		Logger:    b.opts.Logger,
		Random:    b.opts.Random,
		Protocols: b.opts.Protocols,
		V2:        b.opts.V2,
		Pairings:  pairingsOf(s),
	}
}

// limitOn is a rate limit kept where s keeps its state, on s's clock, as
// relayd wires one: each store offers the limiter that lives beside it
// (in its Valkey under its prefix, so that replicas on one Valkey share
// buckets; in process on the memory store's clock), whose buckets its
// operations charge too. No limit when rate is disabled.
func limitOn(s store.RoutingStore, rate ratelimit.Rate) ratelimit.Limit {
	if !rate.Enabled() {
		return ratelimit.Limit{}
	}
	l, err := s.(interface {
		Limiter(ratelimit.Rate) (ratelimit.Limiter, error)
	}).Limiter(rate)
	if err != nil {
		panic(fmt.Sprintf("test rate %v: %v", rate, err))
	}
	return ratelimit.Stored(l, rate)
}

// replica starts another relay on store s, sharing this bundle's projection
// and relay clock, and returns its URL.
func (b *bundle) replica(t *testing.T, s store.RoutingStore) string {
	t.Helper()
	srv := httptest.NewServer(plane.New(b.config(s)).Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func (b *bundle) clientConfig(url string) peer.Config {
	return peer.Config{
		BaseURLs:     []string{url},
		BasePath:     b.opts.BasePath,
		HTTPClient:   b.httpc,
		Clock:        b.clock,
		PollInterval: time.Millisecond,
	}
}

// siteAs is a site client signing as siteID with the named keys.
func (b *bundle) siteAs(t *testing.T, keys, siteID string) *peer.Site {
	t.Helper()
	s, err := peer.NewSite(b.clientConfig(b.url), b.keys[keys], siteID)
	require.NoError(t, err)
	return s
}

// daemon is an unpaired daemon with the named device's keys.
func (b *bundle) daemon(t *testing.T, name string) *peer.Daemon {
	t.Helper()
	return b.daemonAt(t, name, b.url, "")
}

// daemonAt is a daemon with the named keys on the relay at url, signing as
// runnerID until it pairs ("" for none).
func (b *bundle) daemonAt(t *testing.T, name, url, runnerID string) *peer.Daemon {
	t.Helper()
	d, err := peer.NewDaemon(b.clientConfig(url), b.keys[name], runnerID)
	require.NoError(t, err)
	return d
}

// paired is the named device's daemon, paired for its owner.
func (b *bundle) paired(t *testing.T, name string) *peer.Daemon {
	t.Helper()
	return b.pairedAt(t, name, b.url)
}

func (b *bundle) pairedAt(t *testing.T, name, url string) *peer.Daemon {
	t.Helper()
	spec := deviceNamed(name)
	d := b.daemonAt(t, name, url, "")
	resp, err := d.Pair(b.ctx, spec.owner)
	require.NoError(t, err)
	require.Equal(t, spec.runner, resp.RunnerID)
	return d
}

// project puts a changed copy of the projection in force at once.
func (b *bundle) project(t *testing.T, mods ...fixtureMod) {
	t.Helper()
	f := b.source.Current().Fixture()
	for _, mod := range mods {
		mod(f, b.keys)
	}
	p, err := projection.New(f)
	require.NoError(t, err)
	b.source.Replace(p)
}

// Fixture changes, for setupOpts.Fixture and project.

func withRoster(owner string, members ...string) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		f.Rosters = append(f.Rosters, projection.RosterRecord{ID: "roster_" + owner, Owner: owner, Members: members})
	}
}

// withConsent sets owner's consent to siteMain, adding it if missing.
func withConsent(owner string, paused bool) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		for i, c := range f.Consents {
			if c.Owner == owner && c.SiteID == siteMain {
				f.Consents[i].Paused = paused
				return
			}
		}
		f.Consents = append(f.Consents, projection.ConsentRecord{Owner: owner, SiteID: siteMain, Paused: paused})
	}
}

func withoutConsent(owner string) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		f.Consents = slices.DeleteFunc(f.Consents, func(c projection.ConsentRecord) bool { return c.Owner == owner })
	}
}

// withRevocation adds a revocation for owner on siteMain and leaves the
// consent record in place: the revocation alone must win.
func withRevocation(owner string) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		f.Revoked = append(f.Revoked, projection.RevocationRecord{Owner: owner, SiteID: siteMain})
	}
}

func withoutDevice(runner string) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		f.Devices = slices.DeleteFunc(f.Devices, func(d projection.DeviceRecord) bool { return d.RunnerID == runner })
	}
}

func withoutSite(siteID string) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		f.Sites = slices.DeleteFunc(f.Sites, func(s projection.SiteRecord) bool { return s.SiteID == siteID })
	}
}

// Jobs.

func (b *bundle) storeNow(t *testing.T) int64 {
	t.Helper()
	now, err := b.store.Now(b.ctx)
	require.NoError(t, err)
	return now
}

func (b *bundle) relayNow() int64 { return b.clock.Now().UnixMilli() }

type stubMod func(*protocol.JobStub)

func audience(a string) stubMod      { return func(s *protocol.JobStub) { s.Audience = a } }
func streaming(on bool) stubMod      { return func(s *protocol.JobStub) { s.Streaming = on } }
func kind(k string) stubMod          { return func(s *protocol.JobStub) { s.Kind = k } }
func deadline(at int64) stubMod      { return func(s *protocol.JobStub) { s.DeadlineAt = at } }
func namedSite(keyID string) stubMod { return func(s *protocol.JobStub) { s.Site = keyID } }

// stub is a well-formed siteMain stub for owner, due an hour from the store
// clock's now.
func (b *bundle) stub(t *testing.T, id, owner string, mods ...stubMod) protocol.JobStub {
	t.Helper()
	s := b.site.Stub(id, protocol.KindGenerate, owner, b.storeNow(t)+jobTTL.Milliseconds())
	for _, m := range mods {
		m(&s)
	}
	return s
}

// enqueue publishes stubs through the site plane; each must be new.
func (b *bundle) enqueue(t *testing.T, stubs ...protocol.JobStub) {
	t.Helper()
	for _, s := range stubs {
		resp, err := b.site.Enqueue(b.ctx, s)
		require.NoError(t, err)
		require.Equal(t, protocol.EnqueueResponse{JobID: s.ID, State: "queued"}, resp)
	}
}

func (b *bundle) claim(t *testing.T, d *peer.Daemon, maxJobs int) []protocol.ClaimedStub {
	t.Helper()
	resp, err := d.Claim(b.ctx, []string{protocol.KindGenerate, protocol.KindChat}, maxJobs)
	require.NoError(t, err)
	return resp.Jobs
}

// claimOne claims and requires exactly the job id.
func (b *bundle) claimOne(t *testing.T, d *peer.Daemon, id string) protocol.ClaimedStub {
	t.Helper()
	jobs := b.claim(t, d, 1)
	require.Len(t, jobs, 1, "claim grants %s", id)
	require.Equal(t, id, jobs[0].ID)
	return jobs[0]
}

// pending returns the site's pending entry for a job, which must be listed.
func (b *bundle) pending(t *testing.T, id string) protocol.PendingJob {
	t.Helper()
	resp, err := b.site.Pending(b.ctx)
	require.NoError(t, err)
	for _, p := range resp.Jobs {
		if p.JobID == id {
			return p
		}
	}
	require.Failf(t, "job not pending", "%s not in %+v", id, resp.Jobs)
	return protocol.PendingJob{}
}

// seal seals plaintext to the device that claimed the job and hands it over.
func (b *bundle) seal(t *testing.T, c protocol.ClaimedStub, plaintext string) protocol.SealedEnvelope {
	t.Helper()
	p := b.pending(t, c.ID)
	env, err := b.site.SealFor(p, c.ID, c.DeadlineAt, json.RawMessage(plaintext))
	require.NoError(t, err)
	resp, err := b.site.Payload(b.ctx, c.ID, env)
	require.NoError(t, err)
	require.Equal(t, protocol.PayloadResponse{JobID: c.ID, State: "ready"}, resp)
	return env
}

// finish seals a result from d to the site and posts it.
func (b *bundle) finish(t *testing.T, d *peer.Daemon, c protocol.ClaimedStub, plaintext string) protocol.SealedEnvelope {
	t.Helper()
	env, err := peer.Seal(d.Keys(), b.keys["site"].Public(), c.ID, protocol.DirectionResult, c.DeadlineAt, json.RawMessage(plaintext))
	require.NoError(t, err)
	resp, err := d.Result(b.ctx, c.ID, c.Lease.ID, env, protocol.DispositionOK)
	require.NoError(t, err)
	require.Equal(t, protocol.ResultResponse{Accepted: true, State: "done"}, resp)
	return env
}

// runToDone takes a claimed job through seal, fetch and result.
func (b *bundle) runToDone(t *testing.T, d *peer.Daemon, c protocol.ClaimedStub) {
	t.Helper()
	b.seal(t, c, `{"prompt":"p"}`)
	_, err := d.Fetch(b.ctx, c.ID, c.Lease.ID)
	require.NoError(t, err)
	b.finish(t, d, c, `{"outcome":{"text":"r"}}`)
}

// job finds the stored job with this id, whichever site enqueued it (the
// tests give each job an id of its own).
func (b *bundle) job(t *testing.T, id string) store.Job {
	t.Helper()
	j, ok := b.lookup(t, id)
	require.True(t, ok, "job %s is stored", id)
	return j
}

func (b *bundle) lookup(t *testing.T, id string) (store.Job, bool) {
	t.Helper()
	jobs, err := b.store.Jobs(b.ctx, 0)
	require.NoError(t, err)
	for _, j := range jobs {
		if j.ID == id {
			return j, true
		}
	}
	return store.Job{}, false
}

func (b *bundle) requireState(t *testing.T, id string, want store.State) store.Job {
	t.Helper()
	j := b.job(t, id)
	require.Equal(t, want, j.State, "state of %s", id)
	return j
}

func (b *bundle) requireNoJob(t *testing.T, id string) {
	t.Helper()
	_, ok := b.lookup(t, id)
	require.False(t, ok, "job %s must not be stored", id)
}

func (b *bundle) presence(t *testing.T, runner string) (store.Presence, bool) {
	t.Helper()
	p, ok, err := b.store.Presence(b.ctx, runner)
	require.NoError(t, err)
	return p, ok
}

// Raw requests and exact answers.

func (b *bundle) raw(t *testing.T, req peer.RawRequest) peer.RawResponse {
	t.Helper()
	if req.BaseURL == "" {
		req.BaseURL = b.url
	}
	tr, err := peer.NewTransport(b.clientConfig(req.BaseURL))
	require.NoError(t, err)
	resp, err := tr.Raw(b.ctx, req)
	require.NoError(t, err)
	return resp
}

// signedDaemon is a raw request from d to path, signed as endpoint over body.
func signedDaemon(d *peer.Daemon, method, path, endpoint string, body []byte) peer.RawRequest {
	return peer.RawRequest{Method: method, Path: path, Header: d.SignHeaders(endpoint, body), Body: body}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return out
}

func claimBody(t *testing.T, runner string) []byte {
	t.Helper()
	return mustJSON(t, protocol.ClaimRequest{ProtocolVersion: "0", RunnerID: runner, Capabilities: peer.Capabilities([]string{protocol.KindGenerate}), Max: 8})
}

func heartbeatBody(t *testing.T, runner string, leases ...protocol.LeaseRef) []byte {
	t.Helper()
	if leases == nil {
		leases = []protocol.LeaseRef{}
	}
	return mustJSON(t, protocol.HeartbeatRequest{ProtocolVersion: "0", RunnerID: runner, DaemonVersion: "test",
		Capabilities: peer.Capabilities([]string{protocol.KindGenerate}), ActiveLeases: leases})
}

func lease(c protocol.ClaimedStub) protocol.LeaseRef {
	return protocol.LeaseRef{JobID: c.ID, LeaseID: c.Lease.ID}
}

// requireAnswer checks a response byte for byte: status, the one content
// type the relay sends with JSON, and the body.
func requireAnswer(t *testing.T, resp peer.RawResponse, status int, body string) {
	t.Helper()
	require.Equal(t, status, resp.Status, "status; body %s", resp.Body)
	require.Equal(t, []string{"application/json"}, resp.Header.Values("Content-Type"))
	require.Equal(t, body, string(resp.Body))
}

// requireRefused checks a client error against an exact wire refusal.
func requireRefused(t *testing.T, err error, status int, body string) {
	t.Helper()
	var e *peer.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, status, e.Status, "status; body %s", e.Raw)
	require.Equal(t, body, string(e.Raw))
}

// Refusal bodies, written out as they travel.
const (
	bodyNotFoundPath      = `{"error":"not-found"}`
	bodyNotSigned         = `{"error":"unauthorized","message":"this request is not signed"}`
	bodyRunnerUnknown     = `{"error":"unauthorized","message":"this runner is not recognised"}`
	bodySiteUnknown       = `{"error":"unauthorized","message":"this site is not registered"}`
	bodyBadSignature      = `{"error":"unauthorized","message":"signature check failed"}`
	bodyRevoked           = `{"error":"revoked","message":"routing for this runner has been revoked"}`
	bodySchema            = `{"error":"bad-request","message":"request failed schema validation"}`
	bodyNotYourSite       = `{"error":"forbidden","message":"that is not your site"}`
	bodyNotRoutedForYou   = `{"error":"forbidden","message":"this relay does not route for you"}`
	bodyRunnerMismatch    = `{"error":"unauthorized","message":"runner id does not match the key"}`
	bodyUnknownJob        = `{"error":"not-found","message":"unknown job"}`
	bodyNotHolder         = `{"error":"unauthorized","message":"this runner does not hold the job"}`
	bodyStaleLease        = `{"error":"unauthorized","message":"that lease is no longer current"}`
	bodyNotReady          = `{"error":"not-ready","message":"the site has not sealed this job yet"}`
	bodyPairSchema        = `{"error":"bad-request","message":"pair request failed schema validation"}`
	bodyInconsistent      = `{"error":"bad-request","message":"the device identity is not consistent"}`
	bodyNoConsent         = `{"error":"forbidden","message":"no consent record for this user"}`
	bodyPairSiteUnknown   = `{"error":"forbidden","message":"this site is not registered"}`
	bodyDeviceNotApproved = `{"error":"unauthorized","message":"this device has not been approved by its owner"}`
	bodyDeviceOtherOwner  = `{"error":"forbidden","message":"this device belongs to another owner"}`
	bodyStubWrongSite     = `{"error":"unauthorized","message":"that stub does not name the site that signed it"}`
	bodyIDTaken           = `{"error":"forbidden","message":"that job id belongs to another site"}`
	bodyAlreadyFinished   = `{"error":"too-late","message":"this job has already finished"}`
	// bodyNoVersion is P2-A1's refusal, on a relay serving "0" and "2".
	bodyNoVersion = `{"error":"unsupported-protocol-version","message":"this request declared no protocol version. Upgrade the daemon: ` +
		"`npm i -g byollm@latest`" + `.","supported":["0","2"],"minimum":"0"}`
)

func bodyTooLate(state store.State) string {
	return `{"error":"too-late","message":"job is ` + string(state) + `, not awaiting payload"}`
}

func bodyClockSkew(serverTime int64) string {
	return `{"error":"clock-skew","message":"this request's timestamp is too far from the server's clock; check the machine's time and try again","serverTime":` +
		strconv.FormatInt(serverTime, 10) + `,"maxSkewMs":120000}`
}

// dumpState is every job and presence record, JSON-encoded, for tests that
// look for what must never be stored.
func (b *bundle) dumpState(t *testing.T) string {
	t.Helper()
	jobs, err := b.store.Jobs(b.ctx, 0)
	require.NoError(t, err)
	people, err := b.store.Runners(b.ctx, 0)
	require.NoError(t, err)
	return fmt.Sprintf("%s\n%s", mustJSON(t, jobs), mustJSON(t, people))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// pairingsOf is the pending device codes kept beside s, as relayd wires
// them: every relay on one store shares them. A test's wrapper of a store
// keeps none.
func pairingsOf(s store.RoutingStore) store.Pairings {
	if p, ok := s.(interface{ Pairings() store.Pairings }); ok {
		return p.Pairings()
	}
	return nil
}
