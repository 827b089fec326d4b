package valkey

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
)

// TestAgreesWithMemoryStore drives the Valkey store and the in-memory
// reference through the same random sequences of operations, on clocks
// that move together, and requires the same answers and the same stored
// jobs after every step. It reaches interleavings the contract's cases do
// not: refusals mixed with grants (the claim's refusal skipping), lapsed
// windows and leases met by every operation, cancels in every state.
func TestAgreesWithMemoryStore(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	seeds := 12
	if n, err := strconv.Atoi(os.Getenv("RELAYD_DIFF_SEEDS")); err == nil && n > 0 {
		seeds = n
	}
	if testing.Short() {
		seeds = 3
	}
	var seen coverage
	for seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			vk := newTestStore(t, client)
			// The memory store settles every passed deadline a claim
			// meets; a claim here stops at its budget, a rule of this
			// store alone (TestClaimSettlesAtMostItsBudget), which a
			// clock jump over many jobs would reach.
			vk.settleBudget = 1 << 20
			pinClock(t, vk)
			now, err := vk.Now(t.Context())
			require.NoError(t, err)
			clk := clock.NewManual(time.UnixMilli(now))
			d := &diff{t: t, rnd: rand.New(rand.NewPCG(uint64(seed), 7)), vk: vk, mem: memory.New(clk), clk: clk, leases: map[string]string{}, seen: &seen}
			for step := range 400 {
				d.step(step)
				d.compareJobs()
			}
		})
	}
	// The runs must have met the protocol-2 paths they are meant to check.
	require.Positive(t, seen.grants2, "proto-2 grants")
	require.Positive(t, seen.lapses, "proto-2 lapses")
	require.Positive(t, seen.sharedIDs, "ids two sites share")
}

// coverage counts what the runs met, across seeds.
type coverage struct{ grants2, lapses, sharedIDs int }

type grant struct {
	proto             store.Proto
	job, site, runner string
	vkID, memID       string
}

// site is the site a holder-scoped call names: proto 0 names it, proto 2
// resolves lease first.
func (g grant) siteArg() string {
	if g.proto == store.Proto2 {
		return ""
	}
	return g.site
}

type diff struct {
	t       *testing.T
	rnd     *rand.Rand
	vk      *Store
	mem     *memory.Store
	clk     *clock.Manual
	grants  []grant
	leases  map[string]string // valkey lease id -> memory lease id
	history []string
	nextID  int
	seen    *coverage
}

var diffRunners = []struct{ id, owner string }{{"r-a1", "alice"}, {"r-a2", "alice"}, {"r-b", "bob"}, {"r-c", "carol"}}
var diffOwners = []string{"alice", "bob", "carol"}
var diffSites = []string{"site-1", "site-2"}
var diffKinds = []string{protocol.KindGenerate, protocol.KindChat}
var diffAudiences = map[store.Proto][]string{
	store.Proto0: {protocol.AudiencePublic, protocol.AudienceNamed, protocol.AudienceSelf},
	store.Proto2: {"private", "team"},
}
var diffProtos = []store.Proto{store.Proto0, store.Proto2}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func subset[T any](r *rand.Rand, xs []T) []T {
	var out []T
	for _, x := range xs {
		if r.IntN(2) == 0 {
			out = append(out, x)
		}
	}
	return out
}

func (d *diff) now() int64 { return d.clk.Now().UnixMilli() }

// sameErr requires both stores to fail or succeed alike, with the same
// refusal; neither may fail for any other reason.
func (d *diff) sameErr(op string, vkErr, memErr error) {
	d.t.Helper()
	if vkErr != nil && store.RefusalOf(vkErr) == "" {
		d.t.Fatalf("%s: valkey store failed: %v", op, vkErr)
	}
	var vr, mr store.Refusal
	if r, ok := vkErr.(*store.Refusal); ok {
		vr = *r
	}
	if r, ok := memErr.(*store.Refusal); ok {
		mr = *r
	}
	require.Equal(d.t, mr, vr, "%s: refusal", op)
	require.Equal(d.t, memErr == nil, vkErr == nil, "%s: outcome", op)
}

func (d *diff) jobID() string {
	if d.nextID > 0 && d.rnd.IntN(4) == 0 {
		return fmt.Sprintf("job-%d", d.rnd.IntN(d.nextID))
	}
	d.nextID++
	return fmt.Sprintf("job-%d", d.nextID-1)
}

func (d *diff) someGrant() (grant, bool) {
	if len(d.grants) == 0 {
		return grant{}, false
	}
	return d.grants[d.rnd.IntN(len(d.grants))], true
}

// step runs one random operation on both stores and compares their
// answers.
func (d *diff) step(step int) {
	op := d.rnd.IntN(13)
	d.history = append(d.history, fmt.Sprintf("step %d op %d now %d", step, op, d.now()))
	switch op {
	case 0, 1, 2:
		d.enqueueBoth(step)
	case 3, 4:
		d.claimBoth(step)
	case 5:
		d.releaseBoth(step)
	case 6:
		d.payloadBoth()
	case 7:
		d.fetchBoth()
	case 8:
		d.resultBoth(step)
	case 9:
		d.cancelBoth()
	case 10:
		d.cancelRequestsAndRenewBoth(step)
	case 11:
		d.sweepBoth(step)
	case 12:
		d.advanceBoth()
	}
}

// enqueueBoth enqueues one random stub in both stores.
func (d *diff) enqueueBoth(step int) {
	t, ctx, r := d.t, d.t.Context(), d.rnd
	p := pick(r, diffProtos)
	st := protocol.JobStub{ID: d.jobID(), Kind: pick(r, diffKinds), Owner: pick(r, diffOwners), Site: "S",
		Audience: pick(r, diffAudiences[p]), SizeClass: "small", DeadlineAt: d.now() + int64(r.IntN(120_000)) - 5_000}
	in := store.EnqueueInput{SiteID: pick(r, diffSites), Proto: p, Stub: st}
	vr, ve := d.vk.Enqueue(ctx, in)
	mr, me := d.mem.Enqueue(ctx, in)
	d.sameErr("enqueue", ve, me)
	require.Equal(t, mr, vr, "step %d enqueue", step)
}

// claimBoth has a random runner claim in both stores and records the
// grants, which must match.
func (d *diff) claimBoth(step int) {
	t, ctx, r := d.t, d.t.Context(), d.rnd
	rn := pick(r, diffRunners)
	in := store.ClaimInput{Proto: pick(r, diffProtos), RunnerID: rn.id, Owner: rn.owner, Device: protocol.PublicIdentity{Identity: rn.id},
		Kinds: subset(r, diffKinds), Max: r.IntN(7), LeaseMs: int64(2_000 + r.IntN(40_000))}
	for _, o := range subset(r, diffOwners) {
		in.Routes = append(in.Routes, store.Route{SiteID: pick(r, diffSites), Owner: o})
	}
	vc, ve := d.vk.Claim(ctx, in)
	mc, me := d.mem.Claim(ctx, in)
	d.sameErr("claim", ve, me)
	require.Equal(t, len(mc), len(vc), "step %d claim %+v", step, in)
	for i := range mc {
		require.Equal(t, mc[i].JobStub, vc[i].JobStub, "step %d claim order", step)
		require.Equal(t, mc[i].Lease.ExpiresAt, vc[i].Lease.ExpiresAt)
		d.leases[vc[i].Lease.ID] = mc[i].Lease.ID
		if in.Proto == store.Proto2 {
			d.seen.grants2++
		}
		d.grants = append(d.grants, grant{proto: in.Proto, job: mc[i].ID, site: d.siteOfLease(mc[i].Lease.ID), runner: rn.id, vkID: vc[i].Lease.ID, memID: mc[i].Lease.ID})
	}
}

// releaseBoth releases some of a runner's leases in both stores, now and
// then with a not-before.
func (d *diff) releaseBoth(step int) {
	t, ctx, r := d.t, d.t.Context(), d.rnd
	rn, p, site := pick(r, diffRunners), pick(r, diffProtos), pick(r, diffSites)
	vl, ml, siteArg := d.someLeases(rn.id, p, site)
	reason := pick(r, []string{protocol.ReasonRefused, protocol.ReasonShutdown, ""})
	var delay int64
	if r.IntN(3) == 0 {
		delay = int64(r.IntN(20_000))
	}
	vr, ve := d.vk.Release(ctx, store.ReleaseInput{Proto: p, SiteID: siteArg, RunnerID: rn.id, Leases: vl, Reason: reason, RetryAfterMs: delay})
	mr, me := d.mem.Release(ctx, store.ReleaseInput{Proto: p, SiteID: siteArg, RunnerID: rn.id, Leases: ml, Reason: reason, RetryAfterMs: delay})
	d.sameErr("release", ve, me)
	require.Equal(t, mr, vr, "step %d release", step)
}

// payloadBoth seals a payload in both stores, mostly for a granted job.
func (d *diff) payloadBoth() {
	ctx, r := d.t.Context(), d.rnd
	in := store.PayloadInput{JobID: fmt.Sprintf("job-%d", r.IntN(d.nextID+1)), SiteID: pick(r, diffSites), Envelope: env("payload", "x")}
	if g, ok := d.someGrant(); ok && r.IntN(3) > 0 {
		in.JobID = g.job
	}
	d.sameErr("seal", d.vk.Payload(ctx, in), d.mem.Payload(ctx, in))
}

// fetchBoth fetches a granted job's payload from both stores.
func (d *diff) fetchBoth() {
	t, ctx := d.t, d.t.Context()
	g, ok := d.someGrant()
	if !ok {
		return
	}
	vk, mem := d.leaseInputs(g)
	vp, ve := d.vk.Fetch(ctx, vk)
	mp, me := d.mem.Fetch(ctx, mem)
	d.sameErr("take", ve, me)
	require.Equal(t, mp, vp)
}

// resultBoth posts a result for a granted job to both stores.
func (d *diff) resultBoth(step int) {
	t, ctx, r := d.t, d.t.Context(), d.rnd
	g, ok := d.someGrant()
	if !ok {
		return
	}
	e, disp := env("result", fmt.Sprint(step)), pick(r, []string{"ok", "error"})
	vk, mem := d.leaseInputs(g)
	vr, ve := d.vk.Result(ctx, store.ResultInput{LeaseInput: vk, Envelope: e, Disposition: disp})
	mr, me := d.mem.Result(ctx, store.ResultInput{LeaseInput: mem, Envelope: e, Disposition: disp})
	d.sameErr("complete", ve, me)
	require.Equal(t, mr, vr)
}

// cancelBoth cancels a random job in both stores.
func (d *diff) cancelBoth() {
	t, ctx, r := d.t, d.t.Context(), d.rnd
	in := store.CancelInput{JobID: fmt.Sprintf("job-%d", r.IntN(d.nextID+1)), SiteID: pick(r, diffSites)}
	vr, ve := d.vk.Cancel(ctx, in)
	mr, me := d.mem.Cancel(ctx, in)
	d.sameErr("cancel", ve, me)
	require.Equal(t, mr, vr)
}

// cancelRequestsAndRenewBoth reads a runner's cancel requests from both
// stores, then renews some of its leases in both.
func (d *diff) cancelRequestsAndRenewBoth(step int) {
	t, ctx, r := d.t, d.t.Context(), d.rnd
	rn, p := pick(r, diffRunners), pick(r, diffProtos)
	vr, ve := d.vk.CancelRequests(ctx, store.CancelRequestsInput{Proto: p, RunnerID: rn.id})
	mr, me := d.mem.CancelRequests(ctx, store.CancelRequestsInput{Proto: p, RunnerID: rn.id})
	d.sameErr("cancelRequests", ve, me)
	require.Equal(t, grantJobs(mr), grantJobs(vr), "step %d cancelRequests", step)
	require.Equal(t, mr, d.memLeases(vr), "step %d cancelRequests grants", step)
	vl, ml, siteArg := d.someLeases(rn.id, p, pick(r, diffSites))
	leaseMs := int64(1_000 + r.IntN(30_000))
	vn, ve := d.vk.Renew(ctx, store.RenewInput{Proto: p, SiteID: siteArg, RunnerID: rn.id, Leases: vl, LeaseMs: leaseMs})
	mn, me := d.mem.Renew(ctx, store.RenewInput{Proto: p, SiteID: siteArg, RunnerID: rn.id, Leases: ml, LeaseMs: leaseMs})
	d.sameErr("renew", ve, me)
	require.Equal(t, mn.Renewed, vn.Renewed, "step %d renew", step)
	require.Equal(t, grantJobs(mn.Lost), grantJobs(vn.Lost), "step %d renew lost", step)
}

// sweepBoth sweeps both stores and compares what each requeued, lapsed
// and expired.
func (d *diff) sweepBoth(step int) {
	t, ctx := d.t, d.t.Context()
	liveVk, liveMem := d.ids(d.vk), d.ids(d.mem)
	vr, ve := d.vk.Sweep(ctx)
	mr, me := d.mem.Sweep(ctx)
	d.sameErr("sweep", ve, me)
	require.Equal(t, mr.Requeued, vr.Requeued, "step %d sweep requeued", step)
	d.seen.lapses += len(vr.Lapsed)
	require.Equal(t, slices.Clip(append([]string{}, mr.Lapsed...)), slices.Clip(append([]string{}, vr.Lapsed...)), "step %d sweep lapsed", step)
	// Each store reports only what it dropped itself, and they drop the
	// same jobs among those both still held.
	afterVk, afterMem := d.ids(d.vk), d.ids(d.mem)
	var vkDrops, memDrops []string
	for _, id := range vr.Expired {
		require.Less(t, afterVk[id], liveVk[id], "step %d: valkey reports %s expired without dropping it", step, id)
		if liveMem[id] > 0 {
			vkDrops = append(vkDrops, id)
		}
	}
	for _, id := range mr.Expired {
		require.Less(t, afterMem[id], liveMem[id], "step %d: memory reports %s expired without dropping it", step, id)
		if liveVk[id] > 0 {
			memDrops = append(memDrops, id)
		}
	}
	require.ElementsMatch(t, memDrops, vkDrops, "step %d sweep expired (memory said %v, valkey %v)", step, mr.Expired, vr.Expired)
}

// advanceBoth moves both stores' clocks forward by up to 15 s.
func (d *diff) advanceBoth() {
	t, r := d.t, d.rnd
	dt := time.Duration(r.IntN(15_000)) * time.Millisecond
	advance(t, d.vk, dt)
	d.clk.Advance(dt)
}

// siteOfLease is the site of the job the memory store just granted
// under a lease: two sites may share an id.
func (d *diff) siteOfLease(lease string) string {
	js, err := d.mem.Jobs(d.t.Context(), 0)
	require.NoError(d.t, err)
	for _, j := range js {
		if j.ClaimedBy != nil && j.ClaimedBy.LeaseID == lease {
			return j.SiteID
		}
	}
	d.t.Fatalf("no job holds the lease just granted")
	return ""
}

// leaseInputs names g to each store; now and then with another grant's
// lease, so lease-first resolution meets leases of other jobs.
func (d *diff) leaseInputs(g grant) (vk, mem store.LeaseInput) {
	vk = store.LeaseInput{Proto: g.proto, SiteID: g.siteArg(), JobID: g.job, RunnerID: g.runner, LeaseID: g.vkID}
	mem = vk
	mem.LeaseID = g.memID
	if other, ok := d.someGrant(); ok && d.rnd.IntN(6) == 0 {
		vk.LeaseID, mem.LeaseID = other.vkID, other.memID
	}
	return vk, mem
}

// someLeases picks some of a runner's grants of a protocol for one call:
// proto 0 names one site, proto 2 none.
func (d *diff) someLeases(runner string, p store.Proto, site string) (vk, mem []protocol.LeaseRef, siteArg string) {
	for _, g := range d.grants {
		if g.runner == runner && g.proto == p && (p == store.Proto2 || g.site == site) && d.rnd.IntN(2) == 0 {
			vk = append(vk, protocol.LeaseRef{JobID: g.job, LeaseID: g.vkID})
			mem = append(mem, protocol.LeaseRef{JobID: g.job, LeaseID: g.memID})
		}
	}
	if p == store.Proto2 {
		return vk, mem, ""
	}
	return vk, mem, site
}

// memLeases maps Valkey grants onto the memory store's lease ids.
func (d *diff) memLeases(grants []protocol.LeaseRef) []protocol.LeaseRef {
	out := []protocol.LeaseRef{}
	for _, g := range grants {
		out = append(out, protocol.LeaseRef{JobID: g.JobID, LeaseID: d.leases[g.LeaseID]})
	}
	return out
}

// ids counts the stored jobs under each id: sites may share one.
func (d *diff) ids(s store.RoutingStore) map[string]int {
	js, err := s.Jobs(d.t.Context(), 0)
	require.NoError(d.t, err)
	out := map[string]int{}
	for _, j := range js {
		out[j.ID]++
	}
	return out
}

// unexpired drops the jobs whose deadline has passed: they are logically
// gone, and which operation deletes them first may differ between stores.
func (d *diff) unexpired(js []store.Job) []store.Job {
	return slices.DeleteFunc(js, func(j store.Job) bool { return j.Stub.DeadlineAt <= d.now() })
}

// compareJobs requires both stores to hold the same jobs, with lease ids
// mapped from one store's to the other's.
func (d *diff) compareJobs() {
	t, ctx := d.t, d.t.Context()
	vj, err := d.vk.Jobs(ctx, 0)
	require.NoError(t, err)
	mj, err := d.mem.Jobs(ctx, 0)
	require.NoError(t, err)
	vj, mj = d.unexpired(vj), d.unexpired(mj)
	for i := range vj {
		if c := vj[i].ClaimedBy; c != nil {
			c.LeaseID = d.leases[c.LeaseID]
		}
	}
	for _, n := range d.ids(d.vk) {
		if n > 1 {
			d.seen.sharedIDs++
		}
	}
	if !assertSameJobs(t, mj, vj) {
		t.Logf("history: %v", d.history[max(0, len(d.history)-6):])
		t.FailNow()
	}
	for _, site := range diffSites {
		va, err := d.vk.Pending(ctx, site)
		require.NoError(t, err)
		ma, err := d.mem.Pending(ctx, site)
		require.NoError(t, err)
		require.Equal(t, jobIDsOf(d.unexpired(ma)), jobIDsOf(d.unexpired(va)), "awaiting %s", site)
		vf, err := d.vk.Results(ctx, site)
		require.NoError(t, err)
		mf, err := d.mem.Results(ctx, site)
		require.NoError(t, err)
		require.Equal(t, jobIDsOf(d.unexpired(mf)), jobIDsOf(d.unexpired(vf)), "finished %s", site)
	}
}

func jobIDsOf(js []store.Job) []string {
	out := []string{}
	for _, j := range js {
		out = append(out, j.ID)
	}
	return slices.Clip(out)
}

// assertSameJobs compares job lists and names the first difference briefly.
func assertSameJobs(t *testing.T, want, got []store.Job) bool {
	t.Helper()
	brief := func(js []store.Job) []string {
		var out []string
		for _, j := range js {
			out = append(out, j.ID+":"+string(j.State))
		}
		return out
	}
	if !assert.Equal(t, brief(want), brief(got), "job ids and states") {
		return false
	}
	for i := range want {
		if !assert.Equal(t, want[i], got[i], "job %s", want[i].ID) {
			return false
		}
	}
	return true
}

// grantJobs is the job ids of grants: the two stores draw lease ids apart.
func grantJobs(grants []protocol.LeaseRef) []string {
	ids := []string{}
	for _, g := range grants {
		ids = append(ids, g.JobID)
	}
	return ids
}
