package memory

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// TestIndexesFollowEveryOperation drives random operations of both
// protocols through a store and, after each, checks that every index the
// store keeps (keys, ids, leases, queues, unsealed counts, listings) agrees
// with the jobs themselves. The contract sees only answers; a drifted index
// would show only later, as a wrong grant.
func TestIndexesFollowEveryOperation(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			c := clock.NewManual(time.UnixMilli(1_750_000_000_000))
			s := New(c)
			w := &walker{t: t, s: s, clock: c, rnd: rand.New(rand.NewPCG(seed, 7))}
			for step := range 400 {
				op := w.step(t.Context())
				s.mu.Lock()
				checkIndexes(t, s, fmt.Sprintf("step %d (%s)", step, op))
				s.mu.Unlock()
			}
		})
	}
}

// walker picks random operations from a small world of sites, ids,
// owners and runners, so that they collide often.
type walker struct {
	t      *testing.T
	s      *Store
	clock  *clock.Manual
	rnd    *rand.Rand
	grants []walkGrant
}

// walkGrant is a grant the walk was given, and the protocol it claimed under.
type walkGrant struct {
	protocol.ClaimedStub
	proto store.Proto
}

var (
	walkSites   = []string{"site_a", "site_b"}
	walkIDs     = []string{"j1", "j2", "j3", "j4"}
	walkOwners  = []string{"alice", "bob"}
	walkRunners = []string{"r1", "r2", "r3"}
	walkReasons = []string{protocol.ReasonShutdown, protocol.ReasonRefused, protocol.ReasonBackendDown}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func (w *walker) proto() store.Proto {
	if w.rnd.IntN(2) == 0 {
		return store.Proto0
	}
	return store.Proto2
}

func (w *walker) grant() (walkGrant, bool) {
	if len(w.grants) == 0 {
		return walkGrant{}, false
	}
	return pick(w.rnd, w.grants), true
}

// step runs one random operation and names it.
func (w *walker) step(ctx context.Context) string {
	r := w.rnd
	switch n := r.IntN(10); n {
	case 0, 1:
		p := w.proto()
		audience := pick(r, []string{protocol.AudiencePublic, protocol.AudienceSelf, "private", "team"})
		stub := protocol.JobStub{ID: pick(r, walkIDs), Kind: protocol.KindGenerate, Owner: pick(r, walkOwners), Audience: audience,
			DeadlineAt: clock.UnixMilli(w.clock) + int64(r.IntN(120_000))}
		_, _ = w.s.Enqueue(ctx, store.EnqueueInput{SiteID: pick(r, walkSites), Proto: p, Stub: stub})
		return "enqueue"
	case 2, 3:
		var routes []store.Route
		for _, site := range walkSites {
			for _, owner := range walkOwners {
				routes = append(routes, store.Route{SiteID: site, Owner: owner})
			}
		}
		p := w.proto()
		got, err := w.s.Claim(ctx, store.ClaimInput{Proto: p, RunnerID: pick(r, walkRunners), Owner: pick(r, walkOwners),
			Routes: routes, Kinds: []string{protocol.KindGenerate}, Max: 1 + r.IntN(3), LeaseMs: 30_000})
		require.NoError(w.t, err)
		for _, g := range got {
			w.grants = append(w.grants, walkGrant{ClaimedStub: g, proto: p})
		}
		return "claim"
	case 4:
		return w.seal(ctx)
	case 5:
		return w.holderCall(ctx)
	case 6:
		_, _ = w.s.Cancel(ctx, store.CancelInput{SiteID: pick(r, walkSites), JobID: pick(r, walkIDs)})
		return "cancel"
	case 7:
		w.clock.Advance(time.Duration(r.IntN(15_000)) * time.Millisecond)
		return "advance"
	case 8:
		_, err := w.s.Sweep(ctx)
		require.NoError(w.t, err)
		return "sweep"
	default:
		_, err := w.s.CancelRequests(ctx, store.CancelRequestsInput{Proto: w.proto(), RunnerID: pick(r, walkRunners)})
		require.NoError(w.t, err)
		return "cancelRequests"
	}
}

// seal seals a job awaiting its payload to its holder, as a site would.
func (w *walker) seal(ctx context.Context) string {
	site := pick(w.rnd, walkSites)
	pending, err := w.s.Pending(ctx, site)
	require.NoError(w.t, err)
	if len(pending) == 0 {
		return "seal (none pending)"
	}
	j := pick(w.rnd, pending)
	env := protocol.SealedEnvelope{RecipientKeyID: j.ClaimedBy.HolderKeyID()}
	_ = w.s.Payload(ctx, store.PayloadInput{SiteID: site, JobID: j.ID, Envelope: env})
	return "seal"
}

// holderCall makes one of the calls a holder makes, under a grant the walk
// was given, named as its protocol names it.
func (w *walker) holderCall(ctx context.Context) string {
	g, ok := w.grant()
	if !ok {
		return "holder call (no grant)"
	}
	r := w.rnd
	// Protocol "0" names the site, and the walk may name the wrong one.
	p, site := g.proto, ""
	if p == store.Proto0 {
		site = pick(r, walkSites)
	}
	in := store.LeaseInput{Proto: p, SiteID: site, JobID: g.ID, RunnerID: g.Lease.RunnerID, LeaseID: g.Lease.ID}
	refs := []protocol.LeaseRef{{JobID: g.ID, LeaseID: g.Lease.ID}}
	switch r.IntN(4) {
	case 0:
		_, _ = w.s.Fetch(ctx, in)
		return "fetch"
	case 1:
		holder := store.Claim{}
		_, _ = w.s.Result(ctx, store.ResultInput{LeaseInput: in, Envelope: protocol.SealedEnvelope{SenderKeyID: holder.HolderKeyID()}, Disposition: protocol.DispositionOK})
		return "result"
	case 2:
		_, err := w.s.Release(ctx, store.ReleaseInput{Proto: p, SiteID: site, RunnerID: g.Lease.RunnerID, Leases: refs, Reason: pick(r, walkReasons), RetryAfterMs: int64(r.IntN(3)) * 5_000})
		require.NoError(w.t, err)
		return "release"
	default:
		_, err := w.s.Renew(ctx, store.RenewInput{Proto: p, SiteID: site, RunnerID: g.Lease.RunnerID, Leases: refs, LeaseMs: 30_000})
		require.NoError(w.t, err)
		return "renew"
	}
}

// checkIndexes asserts that every index agrees with the jobs. The caller
// holds s.mu.
func checkIndexes(t *testing.T, s *Store, at string) {
	ids := 0
	for _, recs := range s.byID {
		ids += len(recs)
	}
	require.Equal(t, len(s.jobs), ids, "%s: byID holds every job once", at)
	unsealed := map[store.Route]int{}
	for key, r := range s.jobs {
		j := &r.job
		require.False(t, r.gone, at)
		require.Equal(t, key, r.key(), at)
		require.Contains(t, s.byID[key.id], r, "%s: byID has %v", at, key)
		wantQueued := j.State == store.Queued && !j.Cancelled
		require.Equal(t, wantQueued, r.queued != nil, "%s: %v is queued exactly while queued and not cancelled", at, key)
		if r.queued != nil {
			_, found := slices.BinarySearchFunc(s.queues[*r.queued], r, bySeq)
			require.True(t, found, "%s: %v is in the queue it names", at, key)
			want := keyOf(j, math.MaxInt64) // the open queue
			got := *r.queued
			if got.reofferTo != "" {
				require.Equal(t, j.ReofferTo, got.reofferTo, "%s: %v is kept for its re-offer runner", at, key)
			}
			got.reofferTo = ""
			require.Equal(t, want, got, "%s: %v sits in its own queue", at, key)
		}
		if j.Proto == store.Proto2 && j.State == store.AwaitingPayload {
			unsealed[r.route()]++
		}
		if j.ClaimedBy != nil {
			require.Same(t, r, s.byLease[j.ClaimedBy.LeaseID], "%s: the lease index names %v", at, key)
		}
		_, listed := s.listed[j.SiteID][r]
		require.Equal(t, j.State == store.AwaitingPayload || (j.State == store.Done && j.Result != nil), listed, "%s: %v listed", at, key)
	}
	require.Equal(t, unsealed, s.unsealed, "%s: unsealed counts", at)
	for lease, r := range s.byLease {
		require.False(t, r.gone, "%s: lease %s names a deleted job", at, lease)
		require.NotNil(t, r.job.ClaimedBy, at)
		require.Equal(t, lease, r.job.ClaimedBy.LeaseID, "%s: lease %s is its job's current grant", at, lease)
	}
	for k, q := range s.queues {
		require.NotEmpty(t, q, at)
		for _, r := range q {
			require.Equal(t, k, *r.queued, "%s: a queued job knows its queue", at)
		}
	}
}
