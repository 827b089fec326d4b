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
	for seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			vk := newTestStore(t, client)
			pinClock(t, vk)
			now, err := vk.Now(t.Context())
			require.NoError(t, err)
			clk := clock.NewManual(time.UnixMilli(now))
			d := &diff{t: t, rnd: rand.New(rand.NewPCG(uint64(seed), 7)), vk: vk, mem: memory.New(clk), clk: clk, leases: map[string]string{}}
			for step := range 400 {
				d.step(step)
				d.compareJobs()
			}
		})
	}
}

type grant struct {
	job, site, runner string
	vkID, memID       string
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
}

var diffRunners = []struct{ id, owner string }{{"r-a1", "alice"}, {"r-a2", "alice"}, {"r-b", "bob"}, {"r-c", "carol"}}
var diffOwners = []string{"alice", "bob", "carol"}
var diffSites = []string{"site-1", "site-2"}
var diffKinds = []string{protocol.KindGenerate, protocol.KindChat}
var diffAudiences = []string{protocol.AudiencePublic, protocol.AudienceNamed, protocol.AudienceSelf}

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

func (d *diff) step(step int) {
	t, ctx, r := d.t, d.t.Context(), d.rnd
	op := r.IntN(13)
	d.history = append(d.history, fmt.Sprintf("step %d op %d now %d", step, op, d.now()))
	switch op {
	case 0, 1, 2:
		st := protocol.JobStub{ID: d.jobID(), Kind: pick(r, diffKinds), Owner: pick(r, diffOwners), Site: "S",
			Audience: pick(r, diffAudiences), SizeClass: "small", DeadlineAt: d.now() + int64(r.IntN(120_000)) - 5_000}
		in := store.EnqueueInput{SiteID: pick(r, diffSites), Stub: st}
		vr, ve := d.vk.Enqueue(ctx, in)
		mr, me := d.mem.Enqueue(ctx, in)
		d.sameErr("enqueue", ve, me)
		require.Equal(t, mr, vr, "step %d enqueue", step)
	case 3, 4:
		rn := pick(r, diffRunners)
		in := store.ClaimInput{RunnerID: rn.id, Owner: rn.owner, Device: protocol.PublicIdentity{Identity: rn.id},
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
			d.grants = append(d.grants, grant{job: mc[i].ID, site: d.siteOf(mc[i].ID), runner: rn.id, vkID: vc[i].Lease.ID, memID: mc[i].Lease.ID})
		}
	case 5:
		rn, site := pick(r, diffRunners), pick(r, diffSites)
		var vl, ml []protocol.LeaseRef
		for _, g := range d.grants {
			if g.runner == rn.id && d.siteNow(g) == site && r.IntN(2) == 0 {
				vl = append(vl, protocol.LeaseRef{JobID: g.job, LeaseID: g.vkID})
				ml = append(ml, protocol.LeaseRef{JobID: g.job, LeaseID: g.memID})
			}
		}
		reason := pick(r, []string{protocol.ReasonRefused, protocol.ReasonShutdown, ""})
		vr, ve := d.vk.Release(ctx, store.ReleaseInput{SiteID: site, RunnerID: rn.id, Leases: vl, Reason: reason})
		mr, me := d.mem.Release(ctx, store.ReleaseInput{SiteID: site, RunnerID: rn.id, Leases: ml, Reason: reason})
		d.sameErr("release", ve, me)
		require.Equal(t, mr, vr, "step %d release", step)
	case 6:
		in := store.PayloadInput{JobID: fmt.Sprintf("job-%d", r.IntN(d.nextID+1)), SiteID: pick(r, diffSites), Envelope: env("payload", "x")}
		if g, ok := d.someGrant(); ok && r.IntN(3) > 0 {
			in.JobID = g.job
		}
		d.sameErr("seal", d.vk.Payload(ctx, in), d.mem.Payload(ctx, in))
	case 7:
		g, ok := d.someGrant()
		if !ok {
			return
		}
		vp, ve := d.vk.Fetch(ctx, store.LeaseInput{SiteID: d.siteNow(g), JobID: g.job, RunnerID: g.runner, LeaseID: g.vkID})
		mp, me := d.mem.Fetch(ctx, store.LeaseInput{SiteID: d.siteNow(g), JobID: g.job, RunnerID: g.runner, LeaseID: g.memID})
		d.sameErr("take", ve, me)
		require.Equal(t, mp, vp)
	case 8:
		g, ok := d.someGrant()
		if !ok {
			return
		}
		e, disp := env("result", fmt.Sprint(step)), pick(r, []string{"ok", "error"})
		vr, ve := d.vk.Result(ctx, store.ResultInput{LeaseInput: store.LeaseInput{SiteID: d.siteNow(g), JobID: g.job, RunnerID: g.runner, LeaseID: g.vkID}, Envelope: e, Disposition: disp})
		mr, me := d.mem.Result(ctx, store.ResultInput{LeaseInput: store.LeaseInput{SiteID: d.siteNow(g), JobID: g.job, RunnerID: g.runner, LeaseID: g.memID}, Envelope: e, Disposition: disp})
		d.sameErr("complete", ve, me)
		require.Equal(t, mr, vr)
	case 9:
		in := store.CancelInput{JobID: fmt.Sprintf("job-%d", r.IntN(d.nextID+1)), SiteID: pick(r, diffSites)}
		vr, ve := d.vk.Cancel(ctx, in)
		mr, me := d.mem.Cancel(ctx, in)
		d.sameErr("cancel", ve, me)
		require.Equal(t, mr, vr)
	case 10:
		rn := pick(r, diffRunners)
		vr, ve := d.vk.CancelRequests(ctx, store.CancelRequestsInput{RunnerID: rn.id})
		mr, me := d.mem.CancelRequests(ctx, store.CancelRequestsInput{RunnerID: rn.id})
		d.sameErr("cancelRequests", ve, me)
		require.Equal(t, grantJobs(mr), grantJobs(vr), "step %d cancelRequests", step)
		site := pick(r, diffSites)
		var vl, ml []protocol.LeaseRef
		for _, g := range d.grants {
			if g.runner == rn.id && d.siteNow(g) == site && r.IntN(2) == 0 {
				vl = append(vl, protocol.LeaseRef{JobID: g.job, LeaseID: g.vkID})
				ml = append(ml, protocol.LeaseRef{JobID: g.job, LeaseID: g.memID})
			}
		}
		leaseMs := int64(1_000 + r.IntN(30_000))
		vn, ve := d.vk.Renew(ctx, store.RenewInput{SiteID: site, RunnerID: rn.id, Leases: vl, LeaseMs: leaseMs})
		mn, me := d.mem.Renew(ctx, store.RenewInput{SiteID: site, RunnerID: rn.id, Leases: ml, LeaseMs: leaseMs})
		d.sameErr("renew", ve, me)
		require.Equal(t, mn.Renewed, vn.Renewed, "step %d renew", step)
		require.Equal(t, grantJobs(mn.Lost), grantJobs(vn.Lost), "step %d renew lost", step)
	case 11:
		liveVk, liveMem := d.ids(d.vk), d.ids(d.mem)
		vr, ve := d.vk.Sweep(ctx)
		mr, me := d.mem.Sweep(ctx)
		d.sameErr("sweep", ve, me)
		require.Equal(t, mr.Requeued, vr.Requeued, "step %d sweep requeued", step)
		// Each store reports only what it dropped itself, and they drop the
		// same jobs among those both still held.
		afterVk, afterMem := d.ids(d.vk), d.ids(d.mem)
		var vkDrops, memDrops []string
		for _, id := range vr.Expired {
			require.True(t, liveVk[id] && !afterVk[id], "step %d: valkey reports %s expired without dropping it", step, id)
			if liveMem[id] {
				vkDrops = append(vkDrops, id)
			}
		}
		for _, id := range mr.Expired {
			require.True(t, liveMem[id] && !afterMem[id], "step %d: memory reports %s expired without dropping it", step, id)
			if liveVk[id] {
				memDrops = append(memDrops, id)
			}
		}
		require.ElementsMatch(t, memDrops, vkDrops, "step %d sweep expired (memory said %v, valkey %v)", step, mr.Expired, vr.Expired)
	case 12:
		dt := time.Duration(r.IntN(15_000)) * time.Millisecond
		advance(t, d.vk, dt)
		d.clk.Advance(dt)
	}
}

// siteOf is the site of the live job with a proto-0 id, as a relay that
// names proto-0 jobs by id alone would find it (ids are unique across
// sites by id-taken), or "" when there is none.
func (d *diff) siteOf(id string) string {
	js, err := d.mem.Jobs(d.t.Context(), 0)
	require.NoError(d.t, err)
	for _, j := range js {
		if j.ID == id {
			return j.SiteID
		}
	}
	return ""
}

// siteNow is where a proto-0 call about g's job looks: the job's site
// now, or the grant's when the job is gone.
func (d *diff) siteNow(g grant) string {
	if s := d.siteOf(g.job); s != "" {
		return s
	}
	return g.site
}

func (d *diff) ids(s store.RoutingStore) map[string]bool {
	js, err := s.Jobs(d.t.Context(), 0)
	require.NoError(d.t, err)
	out := map[string]bool{}
	for _, j := range js {
		out[j.ID] = true
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
