package plane_test

// An external grant author (spec grants.md §7, G-R57 "External mode"),
// beside the local one, through real sockets on both stores: the relay
// POSTs to an HTTP author on a loopback socket, the way the published
// engine is served behind a shim.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/admission"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// engineInput is the reference GrantAuthor input, as an author reads it.
type engineInput struct {
	Job          proto2.ClaimedStub  `json:"job"`
	SiteID       string              `json:"siteId"`
	SiteKey      string              `json:"siteKey"`
	Purpose      *string             `json:"purpose"`
	Owner        string              `json:"owner"`
	RunnerID     string              `json:"runnerId"`
	Capabilities []proto2.Capability `json:"capabilities"`
}

// fakeEngine is an external grant author on a loopback socket. By default
// it grants every job on the first service the claim offers for its kind,
// signed with its own key at the relay's now; answer replaces that.
type fakeEngine struct {
	t      *testing.T
	signer testSigner
	srv    *httptest.Server

	mu     sync.Mutex
	now    func() time.Time
	inputs []engineInput
	raws   []string
	answer func(w http.ResponseWriter, in engineInput)
}

func newFakeEngine(t *testing.T) *fakeEngine {
	t.Helper()
	e := &fakeEngine{t: t, signer: newTestSigner(t)}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var in engineInput
		if err := json.Unmarshal(raw, &in); err != nil {
			http.Error(w, "bad input", http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.inputs = append(e.inputs, in)
		e.raws = append(e.raws, string(raw))
		answer := e.answer
		e.mu.Unlock()
		if answer == nil {
			answer = e.grant
		}
		answer(w, in)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *fakeEngine) set(answer func(w http.ResponseWriter, in engineInput)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer = answer
}

func (e *fakeEngine) calls() []engineInput {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engineInput{}, e.inputs...)
}

func (e *fakeEngine) lastRaw() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.raws[len(e.raws)-1]
}

// claimsFor are the claims a correct author grants in.
func (e *fakeEngine) claimsFor(in engineInput) admission.Claims {
	e.mu.Lock()
	now := e.now
	e.mu.Unlock()
	purpose := "default"
	if in.Purpose != nil {
		purpose = *in.Purpose
	}
	service := ""
	for _, c := range in.Capabilities {
		if c.Kind == in.Job.Kind {
			service = c.Service
			break
		}
	}
	return admission.Claims{
		GrantID: "grant_" + in.Job.Lease.ID, JobID: in.Job.ID, Site: in.SiteKey, User: in.Job.Owner, Owner: in.Owner,
		Purpose: purpose, Kind: in.Job.Kind, Service: service, IssuedAt: now().UnixMilli(),
	}
}

func (e *fakeEngine) grant(w http.ResponseWriter, in engineInput) {
	g, err := admission.Sign(context.Background(), e.signer, e.claimsFor(in))
	require.NoError(e.t, err)
	writeEngineAnswer(w, map[string]any{"granted": g})
}

func writeEngineAnswer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// eachStoreWithExternal runs test on every store, each with a relay whose
// grant authority is a local key ring of local beside an external author
// (a fakeEngine of its own) with the given timeout.
func eachStoreWithExternal(t *testing.T, local testSigner, timeout time.Duration, mods func(engine testSigner) []fixtureMod,
	test func(t *testing.T, b *bundle, engine *fakeEngine, counts *grantCounts)) {
	t.Helper()
	for _, sf := range storeFactories {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			engine := newFakeEngine(t)
			counts := &grantCounts{}
			ring, err := admission.NewKeyRing(local)
			require.NoError(t, err)
			logger := slog.New(slog.NewJSONHandler(&counts.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			external, err := admission.NewExternal(admission.ExternalOptions{
				URL: engine.srv.URL + "/author", Keys: []string{engine.signer.PublicKey()}, Timeout: timeout, Logger: logger,
			})
			require.NoError(t, err)
			opts := withGrants(t, local, counts, mods(engine.signer)...)
			opts.V2.Grants.Author = admission.Authors{
				Local:    admission.Author{Law: admission.Law{OwnDefault: true}, Keys: ring, Random: rand.Reader},
				External: external,
			}
			opts.Logger = logger
			b := setup(t, sf.make, opts)
			engine.mu.Lock()
			engine.now = b.clock.Now
			engine.mu.Unlock()
			test(t, b, engine, counts)
		})
	}
}

// G-R35: bob's device, enrolled with the author's key, is authored by the
// external author; alice's, enrolled with a local key, by the local law, on
// one relay. The admin listener names the author's key as current.
func TestGrants_ExternalAuthorBesideTheLocalOne(t *testing.T) {
	local := newTestSigner(t)
	mods := func(engine testSigner) []fixtureMod {
		return append(aliceOnBobsEcho(), enrolled("runner_bob", engine.grantKey(t)), enrolled("runner_alice", local.grantKey(t)))
	}
	eachStoreWithExternal(t, local, 20*time.Second, mods, func(t *testing.T, b *bundle, engine *fakeEngine, counts *grantCounts) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "alice-job", "alice"))
		jobs := decodeClaim(t, b.device2(t, "bob").claimWith(t, teamEcho(), 0))
		require.Len(t, jobs, 1)
		require.NotNil(t, jobs[0].Grant)
		require.True(t, admission.Verify(engine.signer.PublicKey(), *jobs[0].Grant), "the author signed it")
		require.Equal(t, "grant_"+jobs[0].Lease.ID, jobs[0].Grant.GrantID)
		calls := engine.calls()
		require.Len(t, calls, 1)
		in := calls[0]
		require.Equal(t, []string{"alice-job", jobs[0].Lease.ID, siteMain, site.peer.Keys().KeyID(), "bob", "runner_bob"},
			[]string{in.Job.ID, in.Job.Lease.ID, in.SiteID, in.SiteKey, in.Owner, in.RunnerID})
		require.Nil(t, in.Purpose, "no purpose is sent for a stub without one")
		require.NotContains(t, engine.lastRaw(), `"purpose"`)
		require.NotContains(t, engine.lastRaw(), `"grant"`)
		require.Equal(t, teamEcho(), in.Capabilities)
		require.Equal(t, "runner_bob", site.pendingFor(t, "alice-job").RunnerID)

		// Alice's own chat job has no mapping: the local owner's default.
		own := site.stub2(t, "alice-own", "alice")
		own.Kind = protocol.KindChat
		site.enqueued(t, own)
		jobs = decodeClaim(t, b.device2(t, "alice").claimWith(t, capabilities2(), 0))
		require.Len(t, jobs, 1)
		require.True(t, admission.Verify(local.PublicKey(), *jobs[0].Grant), "the local key signed alice's own")
		require.Len(t, engine.calls(), 1, "the author was not asked about alice's device")
		require.Equal(t, []string{"granted", "granted"}, counts.reasons())

		externalID, _ := protocol.KeyIDOf(engine.signer.PublicKey())
		localID, _ := protocol.KeyIDOf(local.PublicKey())
		ext := `{"publicKey":"` + engine.signer.PublicKey() + `","keyId":"` + externalID + `","signer":"external"}`
		loc := `{"publicKey":"` + local.PublicKey() + `","keyId":"` + localID + `","signer":"local"}`
		requireAnswer(t, b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/grant-keys"}), http.StatusOK,
			`{"current":`+ext+`,"keys":[`+ext+`,`+loc+`]}`)
		resp := b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/readyz"})
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, string(resp.Body), `"grants":{"mode":"external","current":"`+externalID+`","keys":["`+externalID+`","`+localID+`"],"unsignable":0}`)

		// Both pairing answers carry the key each device is enrolled with.
		sites := b.sitesJSON(t, "site")
		requireAnswer(t, b.pair2(t, fixturePair("bob", b.keys["bob"].Public())), http.StatusOK,
			`{"protocolVersion":"2","runnerId":"runner_bob","sites":`+sites+`,"controlPlanePublic":"`+engine.signer.PublicKey()+`"}`)
	})
}

// G-R37, G-R38: the author's permanent decline refuses the job for the
// runner; a failing author and a grant the device would refuse are
// transient declines (30 s), never a 5xx, and nothing is answered.
func TestGrants_ExternalDeclinesAndFailures(t *testing.T) {
	local := newTestSigner(t)
	mods := func(engine testSigner) []fixtureMod {
		return append(aliceOnBobsEcho(), enrolled("runner_bob", engine.grantKey(t)))
	}
	eachStoreWithExternal(t, local, 20*time.Second, mods, func(t *testing.T, b *bundle, engine *fakeEngine, counts *grantCounts) {
		site := b.site2(t, "site", siteMain)
		bob := b.device2(t, "bob")
		stranger := newTestSigner(t)
		for _, step := range []struct {
			job    string
			answer func(w http.ResponseWriter, in engineInput)
		}{
			{"refused", func(w http.ResponseWriter, _ engineInput) {
				writeEngineAnswer(w, map[string]any{"declined": map[string]any{"permanent": true, "reason": "not-a-member"}})
			}},
			{"down", func(w http.ResponseWriter, _ engineInput) { http.Error(w, "down", http.StatusServiceUnavailable) }},
			{"forged", func(w http.ResponseWriter, in engineInput) {
				g, err := admission.Sign(context.Background(), stranger, engine.claimsFor(in))
				require.NoError(t, err)
				writeEngineAnswer(w, map[string]any{"granted": g})
			}},
		} {
			engine.set(step.answer)
			site.enqueued(t, site.stub2(t, step.job, "alice"))
			requireAnswer(t, bob.claimWith(t, teamEcho(), 0), http.StatusOK, `{"jobs":[],"leaseMs":60000}`)
			j, ok, err := b.store.Job(b.ctx, siteMain, step.job)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, store.Queued, j.State, step.job)
			if step.job == "refused" {
				require.Equal(t, []string{"runner_bob"}, j.RefusedBy, "the author's permanence is trusted")
				require.Empty(t, j.RetryAfter)
			} else {
				require.Empty(t, j.RefusedBy, step.job)
				require.Equal(t, b.storeNow(t)+codec2.RetryAfterMs, j.RetryAfter["runner_bob"], step.job)
			}
		}
		require.Equal(t, []string{"not-a-member", "author-unavailable", "author-invalid"}, counts.reasons())
		requireAnswer(t, site.get(t, "pending"), http.StatusOK, `{"jobs":[]}`)
		logs := counts.logs.String()
		require.Contains(t, logs, "declined author-unavailable")
		require.Contains(t, logs, "declined author-invalid")
	})
}

// G-R16, G-R57: while the author thinks, the claimed job is held: the site
// does not list it, so it cannot seal to a device about to be declined.
func TestGrants_ASlowExternalAuthorKeepsTheJobOutOfPending(t *testing.T) {
	local := newTestSigner(t)
	mods := func(engine testSigner) []fixtureMod {
		return append(aliceOnBobsEcho(), enrolled("runner_bob", engine.grantKey(t)))
	}
	eachStoreWithExternal(t, local, 20*time.Second, mods, func(t *testing.T, b *bundle, engine *fakeEngine, _ *grantCounts) {
		release := make(chan struct{})
		engine.set(func(w http.ResponseWriter, in engineInput) {
			<-release
			engine.grant(w, in)
		})
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "alice-job", "alice"))
		answered := make(chan peer.RawResponse, 1)
		go func() { answered <- b.device2(t, "bob").claimWith(t, teamEcho(), 0) }()
		require.Eventually(t, func() bool { return len(engine.calls()) == 1 }, 15*time.Second, 5*time.Millisecond)
		requireAnswer(t, site.get(t, "pending"), http.StatusOK, `{"jobs":[]}`)
		close(release)
		jobs := decodeClaim(t, <-answered)
		require.Len(t, jobs, 1)
		require.NotNil(t, jobs[0].Grant)
		require.Equal(t, "runner_bob", site.pendingFor(t, "alice-job").RunnerID)
	})
}
