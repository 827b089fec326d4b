package replicas_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// The three parts of the differential workload (differential2_test.go).

// handJobs is what the hand-steered part holds: each job's current grant
// by recorded name, and a label for every lease id granted.
type handJobs struct {
	grants map[string]diffGrab
	leases map[string]string
}

func (h *handJobs) add(g diffGrab, name string) {
	h.grants[name] = g
	h.leases[g.job.Lease.ID] = g.job.ID
}

func (h *handJobs) grant(name string) (diffGrab, error) {
	g, ok := h.grants[name]
	if !ok {
		return g, fmt.Errorf("%s was never granted", name)
	}
	return g, nil
}

// claims is the hand-steered part: owner 0's three devices race for the
// main site's jobs a0…a5 and the other site's t0, and every answer along
// the way is recorded.
func (p *diffPeers) claims(ctx context.Context) error {
	h, err := p.firstRace(ctx)
	if err == nil {
		err = p.fetchesAndResults(ctx, h)
	}
	if err == nil {
		err = p.releases(ctx, h)
	}
	if err == nil {
		err = p.cancels(ctx, h)
	}
	return err
}

// republish enqueues id again and records the state it answers.
func (p *diffPeers) republish(ctx context.Context, key, id string) {
	resp, err := p.s.Enqueue(ctx, p.stub(p.s, id, p.fx.Owners[0]))
	if err != nil {
		p.obs.put(key, answer(err))
		return
	}
	p.obs.put(key, resp.State)
}

// firstRace enqueues, races three devices for the jobs, reads pending and
// seals the two the cap let through.
func (p *diffPeers) firstRace(ctx context.Context) (*handJobs, error) {
	owner := p.fx.Owners[0]
	var states []string
	for i := range 6 {
		resp, err := p.s.Enqueue(ctx, p.stub(p.s, fmt.Sprintf("a%d", i), owner))
		if err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
		states = append(states, resp.State)
	}
	resp, err := p.u.Enqueue(ctx, p.stub(p.u, "t0", owner))
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	p.obs.put("enqueue/new jobs", strings.Join(append(states, resp.State), " "))
	grabs, err := p.raceClaims(ctx, p.a, 3, 8)
	if err != nil {
		return nil, err
	}
	h := &handJobs{grants: map[string]diffGrab{}, leases: map[string]string{}}
	for name, g := range p.grabbed("claim race 1", grabs) {
		h.add(g, name)
	}
	g0, err0 := h.grant("S:a0")
	g1, err1 := h.grant("S:a1")
	if _, err := h.grant("T:t0"); err != nil || err0 != nil || err1 != nil {
		return nil, fmt.Errorf("the first race granted %v", slices.Sorted(maps.Keys(h.grants)))
	}
	pend, err := p.s.Pending(ctx)
	if err != nil {
		return nil, err
	}
	p.recordPending("pending/after claim race 1", pend.Jobs, h)
	p.obs.put("payload/two seals at once", together(
		func() string { return sealPending(ctx, p.s, pend.Jobs, "a0", g0.job.DeadlineAt) },
		func() string { return sealPending(ctx, p.s, pend.Jobs, "a1", g1.job.DeadlineAt) }))
	p.obs.put("payload/a second seal", sealPending(ctx, p.s, pend.Jobs, "a0", g0.job.DeadlineAt))
	p.republish(ctx, "enqueue/republish of a ready job", "a0")
	return h, p.runT0(ctx, h)
}

// recordPending records a pending answer: the "a" jobs in its order, that
// each names the device, runner and lease of its grant, and how far the
// lease outlasts the sealing window.
func (p *diffPeers) recordPending(key string, jobs []protocol.PendingJob, h *handJobs) {
	p.obs.put(key, pendingIDs(jobs, "a"))
	var holders []string
	gaps := map[string]bool{}
	for _, j := range jobs {
		if !strings.HasPrefix(j.JobID, "a") {
			continue
		}
		g := h.grants["S:"+j.JobID]
		names := g.d != nil && j.RunnerID == g.d.RunnerID() && j.LeaseID == g.job.Lease.ID && j.Device == g.d.Keys().Public()
		holders = append(holders, fmt.Sprintf("%s:%t", j.JobID, names))
		gaps[leaseGap(j.LeaseExpiresAt-j.AwaitingUntil)] = true
	}
	p.obs.put(key+"/names each grant", strings.Join(holders, " "))
	p.obs.put(key+"/leaseExpiresAt-awaitingUntil", strings.Join(slices.Sorted(maps.Keys(gaps)), " "))
}

// leaseGap says how far a pending grant's lease outlasts its sealing
// window: exactly the lease length less the window when it was never
// renewed; a heartbeat's renewal moves only the lease, by however long
// after the claim it came, which is timing and so recorded only as "more".
func leaseGap(ms int64) string {
	const fresh = protocol.DefaultLeaseMs - protocol.AwaitingPayloadMs
	switch {
	case ms == fresh:
		return strconv.Itoa(fresh)
	case ms > fresh:
		return "more (renewed)"
	}
	return "less: " + strconv.FormatInt(ms, 10)
}

// runT0 has the other site seal t0 and its holder run it to the end.
func (p *diffPeers) runT0(ctx context.Context, h *handJobs) error {
	g, err := h.grant("T:t0")
	if err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	pending, err := p.u.AwaitPending(wait, "t0")
	if err != nil {
		return err
	}
	if _, err := p.u.SendPayload(ctx, pending, g.job.DeadlineAt, json.RawMessage(`{"job":"t0"}`)); err != nil {
		return fmt.Errorf("seal t0: %w", err)
	}
	ran, err := g.d.Work(ctx, g.job, diffEcho, peer.Steps{FetchFor: 15 * time.Second})
	p.obs.put("work/t0 on the other site", resultAnswer(ran.Response, err))
	return nil
}

func diffEcho(payload json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"echo":` + string(payload) + `}`), nil
}

// fetchesAndResults races and replays fetches and results on a0 and a1
// and reads the listing they leave.
func (p *diffPeers) fetchesAndResults(ctx context.Context, h *handJobs) error {
	g0, _ := h.grant("S:a0")
	g1, _ := h.grant("S:a1")
	h0, l0, x := g0.d, g0.job.Lease.ID, other(p.a, g0.d)
	fetch := func(d *peer.Daemon2, id, lease string) func() string {
		return func() string { _, err := d.Fetch(ctx, id, lease); return answer(err) }
	}
	result := func(d *peer.Daemon2, id, lease string, env protocol.SealedEnvelope) func() string {
		return func() string {
			return resultAnswer(d.Result(ctx, id, lease, env, protocol.DispositionOK))
		}
	}
	p.obs.put("fetch/the holder, twice at once", together(fetch(h0, "a0", l0), fetch(h0, "a0", l0)))
	p.obs.put("fetch/another runner, the holder's lease", fetch(x, "a0", l0)())
	p.obs.put("fetch/another runner, a lease never granted", fetch(x, "a0", bogusLease)())
	p.obs.put("fetch/the holder, a lease never granted", fetch(h0, "a0", bogusLease)())
	p.obs.put("fetch/a job never claimed", fetch(h0, "a5", bogusLease)())
	p.republish(ctx, "enqueue/republish of a running job", "a0")

	env1, err1 := sealResult(g1.d, g1.job, `{"echo":"a1"}`)
	env0, err0 := sealResult(h0, g0.job, `{"echo":"a0"}`)
	envX, errX := sealResult(x, g0.job, `{"echo":"not the holder"}`)
	if err0 != nil || err1 != nil || errX != nil {
		return fmt.Errorf("seal results: %v %v %v", err0, err1, errX)
	}
	p.obs.put("result/before the fetch", result(g1.d, "a1", g1.job.Lease.ID, env1)())
	p.obs.put("fetch/after the result", fetch(g1.d, "a1", g1.job.Lease.ID)())
	p.obs.put("result/twice at once", together(result(h0, "a0", l0, env0), result(h0, "a0", l0, env0)))
	p.obs.put("result/a replay", result(h0, "a0", l0, env0)())
	p.obs.put("result/the holder, a lease never granted, job done", result(h0, "a0", bogusLease, env0)())
	p.obs.put("result/another runner, the holder's lease", result(x, "a0", l0, envX)())
	p.obs.put("fetch/a done job", fetch(h0, "a0", l0)())
	p.republish(ctx, "enqueue/republish of a done job", "a0")
	if err := p.recordResults(ctx, "results/after two results", h); err != nil {
		return err
	}
	hb, err := h0.Heartbeat(ctx, []protocol.LeaseRef{{JobID: "a0", LeaseID: l0}, {JobID: "a0", LeaseID: bogusLease}, {JobID: "zz", LeaseID: bogusLease}, {JobID: "zz", LeaseID: bogusLease}})
	p.obs.put("heartbeat/a done grant, a bogus lease, an unknown job twice", heartbeatAnswer(hb, err, h.leases))
	return nil
}

// heartbeatAnswer records a heartbeat's cancel and lost lists, labelled,
// and how many sites it names.
func heartbeatAnswer(hb proto2.HeartbeatResponse, err error, leases map[string]string) string {
	if err != nil {
		return answer(err)
	}
	return fmt.Sprintf("sites=%d awaitingConsent=%d cancel=[%s] lost=[%s]", len(hb.Sites), len(hb.AwaitingConsent),
		labels(hb.Cancel, leases), labels(hb.Lost, leases))
}

// cancelAnswer records a heartbeat's cancel list against what P2-ST14 says it
// holds: every cancelled job whose current grant is the caller's, done or
// not, under that grant, in enqueue order. Which jobs one runner holds is
// timing, so the list itself is not recorded.
func cancelAnswer(hb proto2.HeartbeatResponse, err error, d *peer.Daemon2, h *handJobs, cancelled []string) string {
	if err != nil {
		return answer(err)
	}
	var want []protocol.LeaseRef
	for _, id := range cancelled {
		if g := h.grants["S:"+id]; g.d == d {
			want = append(want, protocol.LeaseRef{JobID: id, LeaseID: g.job.Lease.ID})
		}
	}
	return fmt.Sprintf("cancel names every cancelled job the runner holds, in order: %t; lost=[%s]",
		slices.Equal(want, hb.Cancel), labels(hb.Lost, h.leases))
}

// recordResults records the main site's listing of "a" jobs: their order,
// and for each whether it names its grant's runner, owner, lease and
// device and opens.
func (p *diffPeers) recordResults(ctx context.Context, key string, h *handJobs) error {
	res, err := p.s.Results(ctx)
	if err != nil {
		return err
	}
	p.obs.put(key, strings.Join(resultIDs(res.Jobs, "a"), " "))
	var fields []string
	for _, fin := range res.Jobs {
		if !strings.HasPrefix(fin.JobID, "a") {
			continue
		}
		g := h.grants["S:"+fin.JobID]
		_, openErr := p.s.OpenResult(fin)
		fields = append(fields, fmt.Sprintf("%s:%s runner=%t owner=%t lease=%t device=%t opens=%t", fin.JobID, fin.Disposition,
			g.d != nil && fin.RunnerID == g.d.RunnerID(), fin.RunnerOwner == p.fx.Owners[0], fin.LeaseID == g.job.Lease.ID,
			g.d != nil && fin.Device == g.d.Keys().Public(), openErr == nil))
	}
	p.obs.put(key+"/fields", strings.Join(fields, " "))
	return nil
}

// release gives one lease back and records what was released.
func (p *diffPeers) release(ctx context.Context, key string, d *peer.Daemon2, id, lease, reason string) {
	resp, err := d.Release(ctx, []protocol.LeaseRef{{JobID: id, LeaseID: lease}}, reason)
	if err != nil {
		p.obs.put(key, answer(err))
		return
	}
	p.obs.put(key, "released=["+strings.Join(resp.Released, " ")+"]")
}

// releases frees the cap, races for a2 and a3, then gives leases back
// plainly and as refused and watches where the jobs go next.
func (p *diffPeers) releases(ctx context.Context, h *handJobs) error {
	grabs, err := p.raceClaims(ctx, p.a, 2, 8)
	if err != nil {
		return err
	}
	for name, g := range p.grabbed("claim race 2", grabs) {
		h.add(g, name)
	}
	g0, _ := h.grant("S:a0")
	g2, err2 := h.grant("S:a2")
	g3, err3 := h.grant("S:a3")
	if err2 != nil || err3 != nil {
		return fmt.Errorf("the second race: %v %v", err2, err3)
	}
	before, err := p.s.Pending(ctx)
	if err != nil {
		return err
	}
	p.release(ctx, "release/a held lease", g2.d, "a2", g2.job.Lease.ID, protocol.ReasonShutdown)
	p.release(ctx, "release/the same lease again", g2.d, "a2", g2.job.Lease.ID, protocol.ReasonShutdown)
	p.release(ctx, "release/a done job's lease", g0.d, "a0", g0.job.Lease.ID, protocol.ReasonShutdown)
	p.obs.put("payload/a released job", sealPending(ctx, p.s, before.Jobs, "a2", g2.job.DeadlineAt))
	// x is neither a2's first holder nor a3's, so the payload a2's first
	// grant was sealed for is another device's once x holds a2.
	x := other(p.a, g3.d, g2.d)
	for _, j := range p.claimOne(ctx, "claim/after the release, one slot free", x) {
		h.add(diffGrab{d: x, job: j}, p.name(j))
	}
	pend, err := p.s.Pending(ctx)
	if err != nil {
		return err
	}
	p.recordPending("pending/after the release", pend.Jobs, h)
	p.release(ctx, "release/refused", g3.d, "a3", g3.job.Lease.ID, protocol.ReasonRefused)
	for _, j := range p.claimOne(ctx, "claim/the refuser, after refusing", g3.d) {
		h.add(diffGrab{d: g3.d, job: j}, p.name(j))
	}
	p.claimOne(ctx, "claim/another runner, at the cap", x)
	again, _ := h.grant("S:a2")
	p.obs.put("payload/a seal for the released grant's device, another holding it", sealPending(ctx, p.s, before.Jobs, "a2", g2.job.DeadlineAt))
	p.obs.put("payload/the released job's new grant", sealPending(ctx, p.s, pend.Jobs, "a2", again.job.DeadlineAt))
	for _, j := range p.claimOne(ctx, "claim/another runner, once a slot is free", x) {
		h.add(diffGrab{d: x, job: j}, p.name(j))
	}
	return nil
}

// cancels cancels jobs in every state and reads what the heartbeats, the
// listings and the claims make of it.
func (p *diffPeers) cancels(ctx context.Context, h *handJobs) error {
	cancel := func(key, id string) {
		resp, err := p.s.Cancel(ctx, id)
		if err != nil {
			p.obs.put(key, answer(err))
			return
		}
		p.obs.put(key, fmt.Sprintf("cancelled=%t", resp.Cancelled))
	}
	cancel("cancel/a done job", "a0")
	cancel("cancel/an unknown job", "nope")
	cancel("cancel/an unsealed job", "a4")
	cancel("cancel/a queued job", "a5")
	g0, _ := h.grant("S:a0")
	g4, err := h.grant("S:a4")
	if err != nil {
		return err
	}
	cancelled := []string{"a0", "a4", "a5"}
	hb, err := g0.d.Heartbeat(ctx, []protocol.LeaseRef{{JobID: "a0", LeaseID: g0.job.Lease.ID}})
	p.obs.put("heartbeat/after a done job is cancelled", cancelAnswer(hb, err, g0.d, h, cancelled))
	hb, err = g4.d.Heartbeat(ctx, []protocol.LeaseRef{{JobID: "a4", LeaseID: g4.job.Lease.ID}})
	p.obs.put("heartbeat/after an unsealed job is cancelled", cancelAnswer(hb, err, g4.d, h, cancelled))
	pend, err := p.s.Pending(ctx)
	if err != nil {
		return err
	}
	p.recordPending("pending/with a cancelled job", pend.Jobs, h)
	p.obs.put("payload/a cancelled job", sealPending(ctx, p.s, pend.Jobs, "a4", g4.job.DeadlineAt))
	grabs, err := p.raceClaims(ctx, p.a, 1, 8)
	if err != nil {
		return err
	}
	p.grabbed("claim race 3", grabs)
	return p.recordResults(ctx, "results/after the cancels", h)
}

// claimAnswer is a claim by d (max 8), recorded by the jobs it got.
func (p *diffPeers) claimAnswer(ctx context.Context, d *peer.Daemon2) func() string {
	return func() string {
		resp, err := d.Claim(ctx, []string{protocol.KindGenerate}, 8)
		if err != nil {
			return answer(err)
		}
		return "[" + p.names(resp.Jobs) + "]"
	}
}

// lapse is owner 1's part on the other site: a claimant lets the sealing
// windows of b0 and b1 lapse; both are re-offered to it alone, under new
// leases; it refuses b1, which the reference then offers to nobody (P2-S44)
// and relayd to the others (P2-D8), and runs b0.
func (p *diffPeers) lapse(ctx context.Context) error {
	for _, id := range []string{"b0", "b1"} {
		if _, err := p.u.Enqueue(ctx, p.stub(p.u, id, p.fx.Owners[1])); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
	}
	claimant := p.b[0]
	resp, err := p.b[1].Claim(ctx, nil, 8)
	p.obs.put("claim/no capabilities", fmt.Sprintf("%s [%s]", answer(err), p.names(resp.Jobs)))
	first := p.claimOne(ctx, "lapse/the first claim", claimant)
	others := func() string { return together(p.claimAnswer(ctx, p.b[1]), p.claimAnswer(ctx, p.b[2])) }
	p.obs.put("lapse/the others, before the lapse", others())
	wait, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	stale, err := p.u.AwaitPending(wait, "b0")
	if err != nil || len(first) != 2 {
		return fmt.Errorf("the first claim got %d jobs, pending: %v", len(first), err)
	}
	if err := p.awaitUnlisted(ctx, "b", 40*time.Second); err != nil {
		return err
	}
	_, err = p.u.SendPayload(ctx, stale, first[0].DeadlineAt, json.RawMessage(`{"job":"b0"}`))
	p.obs.put("lapse/a seal after the lapse", answer(err))
	p.obs.put("lapse/the others, after the lapse", others())
	again := p.claimOne(ctx, "lapse/the claimant, after the lapse", claimant)
	grants := map[string]proto2.ClaimedStub{}
	for _, j := range again {
		grants[j.ID] = j
	}
	b0, b1 := grants["b0"], grants["b1"]
	if b0.ID == "" || b1.ID == "" {
		return fmt.Errorf("the re-offer got %s", p.names(again))
	}
	p.release(ctx, "lapse/the claimant refuses b1", claimant, "b1", b1.Lease.ID, protocol.ReasonRefused)
	p.obs.put("lapse/the others, after the claimant refused b1", others())
	p.claimOne(ctx, "lapse/the claimant, after refusing b1", claimant)
	old, now := stale.LeaseID, b0.Lease.ID
	p.obs.put("lapse/the re-offer's lease is new", strconv.FormatBool(old != now))
	_, err = claimant.Fetch(ctx, "b0", old)
	p.obs.put("lapse/fetch under the lapsed lease", answer(err))
	hb, err := claimant.Heartbeat(ctx, []protocol.LeaseRef{{JobID: "b0", LeaseID: old}, {JobID: "b0", LeaseID: now}})
	p.obs.put("lapse/heartbeat of both leases", heartbeatAnswer(hb, err, map[string]string{old: "lapsed", now: "current"}))
	return p.finishB0(ctx, claimant, b0)
}

// awaitUnlisted polls the other site's pending until it lists no job
// whose id starts with prefix.
func (p *diffPeers) awaitUnlisted(ctx context.Context, prefix string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		pend, err := p.u.Pending(ctx)
		if err != nil {
			return err
		}
		if pendingIDs(pend.Jobs, prefix) == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s… still pending after %s", prefix, within)
		}
		if err := clock.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// finishB0 seals b0 for its re-offered grant, runs it and reads the
// listing.
func (p *diffPeers) finishB0(ctx context.Context, claimant *peer.Daemon2, job proto2.ClaimedStub) error {
	pend, err := p.u.Pending(ctx)
	if err != nil {
		return err
	}
	p.obs.put("lapse/pending names the new grant", strconv.FormatBool(slices.ContainsFunc(pend.Jobs, func(j protocol.PendingJob) bool {
		return j.JobID == "b0" && j.LeaseID == job.Lease.ID && j.RunnerID == claimant.RunnerID()
	})))
	p.obs.put("lapse/the seal of the new grant", sealPending(ctx, p.u, pend.Jobs, "b0", job.DeadlineAt))
	ran, err := claimant.Work(ctx, job, diffEcho, peer.Steps{FetchFor: 15 * time.Second})
	p.obs.put("lapse/work after the re-offer", resultAnswer(ran.Response, err))
	res, err := p.u.Results(ctx)
	if err != nil {
		return err
	}
	p.obs.put("lapse/results name the new grant", strconv.FormatBool(slices.ContainsFunc(res.Jobs, func(f protocol.FinishedJob) bool {
		return f.JobID == "b0" && f.LeaseID == job.Lease.ID && f.RunnerID == claimant.RunnerID()
	})))
	return nil
}

// bulkJobs is the size of the bulk part.
const bulkJobs = 30

// bulkRun is what one daemon of the bulk part did.
type bulkRun struct {
	order                             []string
	worked, duplicates, lost, failure int
}

// bulk is owner 2's part on the main site: thirty jobs, three daemons
// claiming two at a time, heartbeating, running and replaying each result,
// and the site sealing whatever pending lists, until every result is
// listed.
func (p *diffPeers) bulk(ctx context.Context) error {
	deadlines := map[string]int64{}
	for i := range bulkJobs {
		stub := p.stub(p.s, fmt.Sprintf("c%02d", i), p.fx.Owners[2])
		enqueue := func() string {
			resp, err := p.s.Enqueue(ctx, stub)
			if err != nil {
				return answer(err)
			}
			return resp.State
		}
		if i == 0 {
			p.obs.put("enqueue/the same new job twice at once", together(enqueue, enqueue))
		} else if got := enqueue(); got != string(store.Queued) {
			return fmt.Errorf("enqueue %s: %s", stub.ID, got)
		}
		deadlines[stub.ID] = stub.DeadlineAt
	}
	run, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var unsealed atomic.Int64
	wg.Go(func() { p.sealLoop(run, deadlines, &unsealed) })
	runs := make([]bulkRun, len(p.c))
	for i, d := range p.c {
		wg.Go(func() { runs[i] = bulkDaemon(run, d) })
	}
	listed, err := p.awaitResults(ctx, "c", bulkJobs, 2*time.Minute)
	stop()
	wg.Wait()
	if err != nil {
		return err
	}
	p.recordBulk(listed, runs, unsealed.Load())
	return nil
}

// recordBulk records the bulk part by what it means, not when.
func (p *diffPeers) recordBulk(listed []string, runs []bulkRun, unsealed int64) {
	p.obs.put("bulk/results listed", strconv.Itoa(len(listed)))
	order := "enqueue order"
	if !slices.IsSorted(listed) {
		order = strings.Join(listed, " ")
	}
	p.obs.put("bulk/results order", order)
	seen := map[string]int{}
	inOrder := true
	var worked, duplicates, lost, failures int
	for _, r := range runs {
		for _, id := range r.order {
			seen[id]++
		}
		inOrder = inOrder && slices.IsSorted(r.order)
		worked, duplicates, lost, failures = worked+r.worked, duplicates+r.duplicates, lost+r.lost, failures+r.failure
	}
	twice := 0
	for _, n := range seen {
		twice += n - 1
	}
	p.obs.put("bulk/granted twice", strconv.Itoa(twice))
	p.obs.put("bulk/each daemon's grants in enqueue order", strconv.FormatBool(inOrder))
	p.obs.put("bulk/replays answered duplicate", fmt.Sprintf("%d of %d", duplicates, worked))
	p.obs.put("bulk/grants a heartbeat called lost", strconv.Itoa(lost))
	p.obs.put("bulk/failed calls", strconv.Itoa(failures))
	p.obs.put("bulk/pending listed at most two unsealed", strconv.FormatBool(unsealed <= 2))
}

// sealLoop seals every bulk job pending lists, once per grant, and notes
// the most unsealed bulk jobs one listing held.
func (p *diffPeers) sealLoop(ctx context.Context, deadlines map[string]int64, most *atomic.Int64) {
	sealed := map[string]bool{}
	for ctx.Err() == nil {
		if pend, err := p.s.Pending(ctx); err == nil {
			var n int64
			for _, j := range pend.Jobs {
				if _, bulk := deadlines[j.JobID]; !bulk {
					continue
				}
				n++
				if !sealed[j.LeaseID] {
					_, err := p.s.SendPayload(ctx, j, deadlines[j.JobID], json.RawMessage(`{"job":"`+j.JobID+`"}`))
					sealed[j.LeaseID] = err == nil
				}
			}
			most.Store(max(most.Load(), n))
		}
		_ = clock.Sleep(ctx, 20*time.Millisecond)
	}
}

// bulkDaemon claims two at a time until ctx ends, heartbeating each grant,
// running it and replaying its result.
func bulkDaemon(ctx context.Context, d *peer.Daemon2) bulkRun {
	var r bulkRun
	for ctx.Err() == nil {
		resp, err := d.Claim(ctx, []string{protocol.KindGenerate}, 2)
		if err != nil || len(resp.Jobs) == 0 {
			if err != nil && ctx.Err() == nil {
				r.failure++
			}
			_ = clock.Sleep(ctx, 20*time.Millisecond)
			continue
		}
		for _, j := range resp.Jobs {
			r.order = append(r.order, j.ID)
			hb, err := d.Heartbeat(ctx, []protocol.LeaseRef{{JobID: j.ID, LeaseID: j.Lease.ID}})
			r.lost += len(hb.Lost)
			ran, werr := d.Work(ctx, j, diffEcho, peer.Steps{FetchFor: 15 * time.Second})
			if err != nil || werr != nil {
				if ctx.Err() == nil {
					r.failure++
				}
				continue
			}
			r.worked++
			// The result just sent may be the last one the site waits for,
			// and the site then stops the run: the replay must not be cut
			// off by that stop, or a replay never sent counts as one not
			// answered duplicate.
			replay, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			dup, err := d.Result(replay, j.ID, j.Lease.ID, ran.Envelope, protocol.DispositionOK)
			cancel()
			if err == nil && dup.Duplicate && !dup.Accepted {
				r.duplicates++
			}
		}
	}
	return r
}

// awaitResults polls the main site's results until n jobs with prefix are
// listed, and returns them in the listing's order.
func (p *diffPeers) awaitResults(ctx context.Context, prefix string, n int, within time.Duration) ([]string, error) {
	deadline := time.Now().Add(within)
	for {
		res, err := p.s.Results(ctx)
		if err != nil {
			return nil, err
		}
		ids := resultIDs(res.Jobs, prefix)
		if len(ids) >= n {
			return ids, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d results listed after %s", len(ids), n, within)
		}
		if err := clock.Sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}
}
