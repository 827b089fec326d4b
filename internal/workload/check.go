package workload

import (
	"fmt"
	"sort"
	"strings"

	"github.com/byollm/relayd/protocol"
)

// Violation kinds: each is something a correct relay never does.
const (
	// DoubleGrant: a job granted while an earlier grant was provably still
	// live (not lapsed, not given back, not past its sealing window), or
	// granted again after it finished.
	DoubleGrant = "double-grant"
	// Lost: a job the site never got a result for, and whose result no
	// daemon had handed in either.
	Lost = "lost"
	// ResultNeverCollected: the relay accepted a result the site never saw.
	ResultNeverCollected = "result-never-collected"
	// ResultTwice: two results accepted for one job, or the site saw the
	// listed result of a job change.
	ResultTwice = "result-twice"
	// DuplicateNotAnswered: a deliberate replay of an accepted result was
	// not answered {accepted:false, duplicate:true, state:"done"}.
	DuplicateNotAnswered = "duplicate-not-answered"
	// ServerError: a 5xx answer (a 503 server-error with Retry-After is
	// allowed when Config.Allow503 is set).
	ServerError = "server-error"
	// LeaseClock: a lease whose grant time, derived from its expiresAt, lies
	// outside its claim's round trip: not stamped with the store's clock.
	LeaseClock = "lease-clock"
	// WrongDevice: pending named a device the fixture does not approve for
	// that runner, or a result came under a lease pending never showed.
	WrongDevice = "wrong-device"
	// ResultUnopenable: a result did not open with the device key pending
	// gave, or is not the echo of the job's payload.
	ResultUnopenable = "result-unopenable"
	// Inconsistent: an answer that contradicts another or the protocol.
	Inconsistent = "inconsistent"
	// Reoffer: a "2" job whose grant lapsed unsealed was granted to
	// another runner than that grant's within the next sealing window, or
	// not granted again at all (protocol-2 §4.5, decision P2-D8).
	Reoffer = "reoffer"
	// CrossProtocol: a job of one protocol offered to a daemon of the
	// other, or a claim answer a "2" daemon could not read (the published
	// daemon refuses such an answer whole).
	CrossProtocol = "cross-protocol"
)

// Violation is one thing the relay must never do, found in a run.
type Violation struct {
	Kind  string `json:"kind"`
	JobID string `json:"jobId,omitempty"`
	// Site is the job's site: "2" lets two sites use one id.
	Site   string `json:"site,omitempty"`
	Detail string `json:"detail"`
}

func (v Violation) String() string {
	switch {
	case v.JobID == "":
		return v.Kind + ": " + v.Detail
	case v.Site != "":
		return v.Kind + " " + v.Site + "/" + v.JobID + ": " + v.Detail
	}
	return v.Kind + " " + v.JobID + ": " + v.Detail
}

// Check returns every violation in the run. Call it after the run ended.
func (r *Run) Check() []Violation {
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	out := append([]Violation(nil), r.rec.general...)
	for _, id := range r.rec.order {
		out = append(out, r.checkJob(r.rec.jobs[id])...)
	}
	out = append(out, r.checkServerErrors()...)
	return out
}

// checkJob returns every violation of one job, in a fixed order: its
// enqueue, its result, its replays, its grants, its re-offer, its leases'
// clock.
func (r *Run) checkJob(j *job) []Violation {
	c := &jobCheck{j: j, out: append([]Violation(nil), j.problems...)}
	gs := j.sortedGrants()
	c.enqueue()
	c.collected(gs)
	c.replays()
	c.overlaps(gs)
	c.out = append(c.out, checkReoffer(j, gs)...)
	c.leaseClock(gs, r.cfg.ClockTolerance.Milliseconds())
	return c.out
}

// jobCheck collects the violations of one job.
type jobCheck struct {
	j   *job
	out []Violation
}

func (c *jobCheck) add(kind, format string, args ...any) {
	c.out = append(c.out, Violation{Kind: kind, JobID: c.j.id, Site: c.j.siteID(), Detail: fmt.Sprintf(format, args...)})
}

// enqueue: a new job is queued; only a try after one that may have
// created it can find it further on.
func (c *jobCheck) enqueue() {
	j := c.j
	if j.enqueued && j.enqueueState != "queued" && !j.enqueueRetried {
		c.add(Inconsistent, "a first enqueue answered state %q", j.enqueueState)
	}
}

// collected: the result was collected exactly once, under the one lease
// the relay accepted, or the job is accounted for.
func (c *jobCheck) collected(gs []*grant) {
	j := c.j
	if j.site == nil {
		if len(j.accepted) > 0 {
			c.add(ResultNeverCollected, "the relay accepted a result under lease %s from %s; the site never saw it", j.accepted[0].leaseID, j.accepted[0].runner)
		} else {
			expired := ""
			if j.deadlineAt > 0 && nowMs() >= j.deadlineAt {
				expired = ", its deadline has passed"
			}
			c.add(Lost, "never finished (enqueued %v%s; %d grants: %s)", j.enqueued, expired, len(gs), describeGrants(gs))
		}
	}
	acceptedLeases := map[string]bool{}
	for _, a := range j.accepted {
		acceptedLeases[a.leaseID] = true
		if a.duplicate && !a.retried {
			c.add(Inconsistent, "the first submission of the result under lease %s was answered duplicate", a.leaseID)
		}
	}
	if len(acceptedLeases) > 1 {
		c.add(ResultTwice, "results accepted under %d different leases", len(acceptedLeases))
	}
	if j.site != nil && len(acceptedLeases) > 0 && !acceptedLeases[j.site.leaseID] {
		c.add(ResultTwice, "the site collected the result of lease %s, but the relay accepted lease %s's", j.site.leaseID, j.accepted[0].leaseID)
	}
}

// replays: every deliberate second submission was answered duplicate.
func (c *jobCheck) replays() {
	for _, rp := range c.j.replays {
		switch {
		case rp.err != "" && rp.refused:
			c.add(DuplicateNotAnswered, "a replay under lease %s was refused: %s", rp.leaseID, rp.err)
		case rp.err == "" && (rp.answer.Accepted || !rp.answer.Duplicate || rp.answer.State != "done"):
			c.add(DuplicateNotAnswered, "a replay under lease %s was answered %+v", rp.leaseID, rp.answer)
		}
	}
}

// overlaps: no grant while an earlier one was live, and none after the
// job was done. liveUntil is a lower bound of each grant's true end, so
// every overlap reported here is certain.
func (c *jobCheck) overlaps(gs []*grant) {
	for i, a := range gs {
		live := a.liveUntil()
		for _, b := range gs[i+1:] {
			if b.grantedAt < live {
				c.add(DoubleGrant, "lease %s (%s) was granted at %d while lease %s (%s, granted %d) was live until at least %d [%s]",
					b.leaseID, b.runner, b.grantedAt, a.leaseID, a.runner, a.grantedAt, live, describeGrant(a))
			}
		}
	}
	for _, a := range c.j.accepted {
		if a.duplicate {
			continue
		}
		for _, b := range gs {
			if b.grantedAt > a.recv {
				c.add(DoubleGrant, "lease %s (%s) was granted at %d, after the result under lease %s was accepted (answer received at %d)",
					b.leaseID, b.runner, b.grantedAt, a.leaseID, a.recv)
			}
		}
	}
}

// leaseClock: leases come from the store's clock, whatever the replica's
// own, so each claimed grant's time falls within its claim's round trip,
// give or take tolMs.
func (c *jobCheck) leaseClock(gs []*grant, tolMs int64) {
	for _, g := range gs {
		if at := g.claimedAt(); g.source == "claim" && (at < g.claimSent-tolMs || at > g.claimRecv+tolMs) {
			c.add(LeaseClock, "lease %s was granted at %d by its expiresAt, outside its claim's round trip [%d, %d] on this machine's clock",
				g.leaseID, at, g.claimSent, g.claimRecv)
		}
	}
}

// checkReoffer holds a job whose grant the site left unsealed to the
// sticky re-offer: until one sealing window after that grant's own
// window lapsed, only its runner may be granted the job again, unless that
// runner refused it (decision P2-D8 ends the exclusivity there, so that a
// job whose claimant never comes back is not stuck). The site never sent
// a payload for the job before, so the lapse is certain.
func checkReoffer(j *job, gs []*grant) []Violation {
	var out []Violation
	for i, lapsed := range gs {
		if !lapsed.unsealed {
			continue
		}
		exclusiveUntil := lapsed.grantedAt + 2*protocol.AwaitingPayloadMs
		refusedAt := int64(0)
		for _, g := range gs[i:] {
			if g.runner == lapsed.runner && g.refusedAt > 0 && (refusedAt == 0 || g.refusedAt < refusedAt) {
				refusedAt = g.refusedAt
			}
		}
		for _, g := range gs[i+1:] {
			if g.runner == lapsed.runner || g.grantedAt >= exclusiveUntil || (refusedAt > 0 && g.grantedAt > refusedAt) {
				continue
			}
			out = append(out, Violation{Kind: Reoffer, JobID: j.id, Site: j.siteID(), Detail: fmt.Sprintf(
				"lease %s (%s) let its sealing window lapse unsealed, yet the job was granted to %s (lease %s) at %d, before %d [%s]",
				lapsed.leaseID, lapsed.runner, g.runner, g.leaseID, g.grantedAt, exclusiveUntil, describeGrants(gs))})
		}
		if len(gs) == i+1 && j.site != nil {
			out = append(out, Violation{Kind: Reoffer, JobID: j.id, Site: j.siteID(), Detail: fmt.Sprintf(
				"lease %s was left unsealed, yet the job finished with no grant after it", lapsed.leaseID)})
		}
	}
	return out
}

// checkServerErrors turns the 5xx answers seen into violations, one per
// kind of answer.
func (r *Run) checkServerErrors() []Violation {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	counts := map[string]int{}
	for _, a := range r.st.serverErrors {
		allowed := r.cfg.Allow503 && a.status == 503 && a.code == string(protocol.CodeServerError) && a.retryAfter != ""
		if allowed {
			continue
		}
		counts[fmt.Sprintf("%s answered %d %q (Retry-After %q)", a.endpoint, a.status, a.code, a.retryAfter)]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []Violation
	for _, k := range keys {
		out = append(out, Violation{Kind: ServerError, Detail: fmt.Sprintf("%s, %d times", k, counts[k])})
	}
	return out
}

func describeGrants(gs []*grant) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = describeGrant(g)
	}
	return strings.Join(parts, "; ")
}

func describeGrant(g *grant) string {
	var flags []string
	for _, f := range []struct {
		on   bool
		name string
	}{{g.sealed, "sealed"}, {g.fetched, "fetched"}, {g.accepted, "accepted"}, {g.unsealed, "left unsealed"}, {g.abandoned, "abandoned"}, {g.lost, "lost"}, {g.releasedAt > 0, "released"}} {
		if f.on {
			flags = append(flags, f.name)
		}
	}
	return fmt.Sprintf("%s %s via %s granted %d expires %d renewed≥%d [%s]", g.leaseID, g.runner, g.source, g.grantedAt, g.expiresAt, g.renewFloor, strings.Join(flags, ","))
}

// Summary formats violations for a test log, at most limit of them.
func Summary(vs []Violation, limit int) string {
	if len(vs) == 0 {
		return "no violations"
	}
	byKind := map[string]int{}
	for _, v := range vs {
		byKind[v.Kind]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d violations %v:\n", len(vs), byKind)
	for i, v := range vs {
		if i == limit {
			fmt.Fprintf(&b, "  … and %d more\n", len(vs)-limit)
			break
		}
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}
