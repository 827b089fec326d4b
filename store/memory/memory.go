// Package memory is the embedded RoutingStore: all routing state in one
// process, for a relay that runs as a single replica with nothing else
// installed. It keeps the same indexes a shared store would (FIFO queues per
// protocol, route and kind, a count of unsealed grants per route, a lease
// index, heaps of deadlines), so claim and sweep cost what they grant or
// find due, not what is stored.
package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/google/uuid"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// Store is the in-memory RoutingStore. The zero value is not usable; call New.
type Store struct {
	clock clock.Clock

	// limiters holds one limiter per rate, shared by Limiter and by
	// admissions' charges, so that both spend from the same buckets.
	limitersMu sync.Mutex
	limiters   map[ratelimit.Rate]*ratelimit.Memory

	mu        sync.Mutex
	nextSeq   uint64
	jobs      map[jobKey]*record
	byID      map[string][]*record // bare job id: the jobs of every site with it, in creation order
	byLease   map[string]*record   // lease id of a current grant (kept once done): its job
	order     []*record            // every job ever created, in creation order; deleted ones are skipped
	deleted   int                  // how many of order are deleted, to know when to compact
	queues    map[queueKey][]*record
	deadlines timeHeap                        // job deadlines
	awaiting  timeHeap                        // sealing windows
	leases    timeHeap                        // lease expiries of ready and running jobs
	reoffers  timeHeap                        // ends of proto-2 re-offers to one runner
	unsealed  map[store.Route]int             // proto-2 jobs awaiting a payload, per (site, job owner)
	listed    map[string]map[*record]struct{} // by site: jobs the site's listings show (awaiting a payload, or done with a result)
	cancelled map[string]map[*record]struct{} // by holder: cancelled jobs held
	returning map[string]map[*record]struct{} // by holder: sealed jobs whose lease lapsed, kept for it (RD-D14)
	presence  map[string]*store.Presence
	pairings  *Pairings // pending device codes, on the same clock
	paired    []string  // runner ids in first-pair order
}

var _ store.RoutingStore = (*Store)(nil)

// New returns an empty store stamping time from c.
func New(c clock.Clock) *Store {
	return &Store{
		clock:     c,
		limiters:  map[ratelimit.Rate]*ratelimit.Memory{},
		jobs:      map[jobKey]*record{},
		byID:      map[string][]*record{},
		byLease:   map[string]*record{},
		queues:    map[queueKey][]*record{},
		unsealed:  map[store.Route]int{},
		listed:    map[string]map[*record]struct{}{},
		cancelled: map[string]map[*record]struct{}{},
		returning: map[string]map[*record]struct{}{},
		presence:  map[string]*store.Presence{},
		pairings:  NewPairings(c),
	}
}

// jobKey is a job's primary key: two sites may use one id.
type jobKey struct{ site, id string }

type record struct {
	seq  uint64
	job  store.Job
	gone bool
	// queued is the queue holding the job, nil while it is in none.
	queued *queueKey
	// unsealed says the job is counted in Store.unsealed.
	unsealed bool
	// held says a Hold claim granted the job and SettleGrants has not yet
	// decided it: it awaits its payload unlisted.
	held bool
	// returningTo is the runner whose returning list holds the job (RD-D14).
	returningTo string
}

func (r *record) key() jobKey { return jobKey{site: r.job.SiteID, id: r.job.ID} }

func (r *record) route() store.Route {
	return store.Route{SiteID: r.job.SiteID, Owner: r.job.Stub.Owner}
}

// queueKey names one FIFO queue: the queued, uncancelled jobs of one
// protocol, site, owner and kind. Owner-only jobs are kept apart because
// only the owner's own devices may take them, and a proto-2 job re-offered
// to one runner sits in that runner's queue until the re-offer ends, so
// that no claim scans what it may not take.
type queueKey struct {
	proto             store.Proto
	site, owner, kind string
	ownerOnly         bool
	reofferTo         string
}

// keyOf is the queue a queued job belongs in at now.
func keyOf(j *store.Job, now int64) queueKey {
	k := queueKey{proto: j.Proto, site: j.SiteID, owner: j.Stub.Owner, kind: j.Stub.Kind, ownerOnly: store.OwnerOnly(j.Stub.Audience)}
	if reofferOpen(j, now) {
		k.reofferTo = j.ReofferTo
	}
	return k
}

// reofferOpen reports whether a job is still re-offered to its ReofferTo
// runner alone: until ReofferUntil, and not once that runner refused it (P2-D8).
func reofferOpen(j *store.Job, now int64) bool {
	return j.Proto == store.Proto2 && j.ReofferTo != "" && j.ReofferUntil > now && !slices.Contains(j.RefusedBy, j.ReofferTo)
}

func (s *Store) now() int64 { return clock.UnixMilli(s.clock) }

// Now reads the store clock.
func (s *Store) Now(context.Context) (int64, error) { return s.now(), nil }

// Limiter returns the in-process limiter of rate on the store's clock,
// the one admissions of that rate charge too: a relay on the memory store
// is one replica, so its buckets need no other sharing. The clock only
// measures waits, so a shifted test clock changes nothing a caller sees.
func (s *Store) Limiter(rate ratelimit.Rate) (ratelimit.Limiter, error) {
	return s.limiter(rate)
}

func (s *Store) limiter(rate ratelimit.Rate) (*ratelimit.Memory, error) {
	s.limitersMu.Lock()
	defer s.limitersMu.Unlock()
	if l, ok := s.limiters[rate]; ok {
		return l, nil
	}
	l, err := ratelimit.NewMemory(rate, s.clock)
	if err != nil {
		return nil, err
	}
	s.limiters[rate] = l
	return l, nil
}

// enter starts a daemon call of runnerID under s.mu: its admission is
// checked, then its presence stamped when touch, and the call's time
// returned.
func (s *Store) enter(ctx context.Context, runnerID string, a *store.Admission, touch bool) (int64, error) {
	if err := s.admit(ctx, runnerID, a); err != nil {
		return 0, err
	}
	now := s.now()
	if touch {
		s.stamp(runnerID, now)
	}
	return now, nil
}

// admit checks a call's admission (nil admits it), under s.mu.
func (s *Store) admit(ctx context.Context, runnerID string, a *store.Admission) error {
	if a == nil {
		return nil
	}
	if a.Paired != nil {
		p := s.presence[runnerID]
		if p == nil || p.Owner != a.Paired.Owner || p.Device != a.Paired.Device {
			return store.Refuse(store.RefusedUnknownRunner)
		}
	}
	if a.Charge != nil {
		l, err := s.limiter(ratelimit.Rate{Every: a.Charge.Every, Burst: a.Charge.Burst})
		if err != nil {
			return fmt.Errorf("memory store: admission: %w", err)
		}
		d, err := l.Allow(ctx, a.Charge.Key)
		if err != nil {
			return fmt.Errorf("memory store: admission: %w", err)
		}
		if !d.Allowed {
			return &store.Refusal{Code: store.RefusedRateLimited, RetryAfter: d.RetryAfter}
		}
	}
	if a.Pair != nil {
		p := *a.Pair
		p.RunnerID = runnerID
		s.pair(p, s.now())
	}
	return nil
}

// Pairings returns the store's pending device codes, judged on its clock:
// every relay sharing this store shares them.
func (s *Store) Pairings() store.Pairings { return s.pairings }

// Ping always succeeds: the store is in this process.
func (s *Store) Ping(context.Context) error { return nil }

// Close does nothing; the state goes with the process.
func (s *Store) Close() error { return nil }

// Enqueue implements store.RoutingStore.
func (s *Store) Enqueue(ctx context.Context, in store.EnqueueInput) (store.EnqueueResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.admit(ctx, "", in.Admit); err != nil {
		return store.EnqueueResult{}, err
	}
	now := s.now()
	if r := s.live(jobKey{site: in.SiteID, id: in.Stub.ID}, now); r != nil {
		return store.EnqueueResult{State: r.job.State}, nil
	}
	if in.Proto == store.Proto0 && s.takenByOtherV0Site(in.SiteID, in.Stub.ID, now) {
		return store.EnqueueResult{}, store.Refuse(store.RefusedIDTaken)
	}
	s.nextSeq++
	r := &record{seq: s.nextSeq, job: store.Job{ID: in.Stub.ID, SiteID: in.SiteID, Proto: in.Proto, Stub: in.Stub, State: store.Queued, RefusedBy: []string{}}}
	s.jobs[r.key()] = r
	s.byID[r.job.ID] = append(s.byID[r.job.ID], r)
	s.order = append(s.order, r)
	s.deadlines.push(entry{at: in.Stub.DeadlineAt, rec: r})
	s.enqueueRecord(r, now)
	return store.EnqueueResult{State: store.Queued, Created: true}, nil
}

// takenByOtherV0Site reports whether a live proto-0 job of another site
// holds id: protocol "0" keeps id-taken (P2-A4), and only among its own jobs,
// so a proto-2 job never makes a v0 enqueue fail.
func (s *Store) takenByOtherV0Site(siteID, id string, now int64) bool {
	for _, r := range slices.Clone(s.byID[id]) {
		if r.job.Proto == store.Proto0 && r.job.SiteID != siteID && !s.apply(r, now).dropped() {
			return true
		}
	}
	return false
}

// Claim implements store.RoutingStore.
func (s *Store) Claim(ctx context.Context, in store.ClaimInput) ([]protocol.ClaimedStub, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.enter(ctx, in.RunnerID, in.Admit, in.Touch)
	if err != nil {
		return nil, err
	}
	s.sweep(now)
	granted := []protocol.ClaimedStub{}
	if in.Max <= 0 {
		return granted, nil
	}
	granted = append(granted, s.regrantToHolder(in, now, in.Max)...)
	cursors := s.candidateQueues(in)
	for len(granted) < in.Max {
		r := s.nextCandidate(cursors, in.RunnerID, now)
		if r == nil {
			break
		}
		s.dequeue(r)
		claim := store.Claim{RunnerID: in.RunnerID, Owner: in.Owner, Device: in.Device, LeaseID: uuid.NewString(), LeaseExpiresAt: now + in.LeaseMs}
		r.job.State = store.AwaitingPayload
		r.job.ClaimedBy = &claim
		r.job.AwaitingUntil = now + protocol.AwaitingPayloadMs
		r.held = in.Hold
		s.byLease[claim.LeaseID] = r
		s.relist(r)
		s.awaiting.push(entry{at: r.job.AwaitingUntil, rec: r})
		granted = append(granted, store.ClaimedStub(r.job.Stub, claim))
	}
	return granted, nil
}

// cursor walks one queue during a claim.
type cursor struct {
	queue []*record
	pos   int
	route store.Route
	// capped says the queue's route counts toward the unsealed cap.
	capped bool
}

// candidateQueues lists the queues a claim may draw from: for every route
// and kind, the open queue, the one of jobs re-offered to this runner, and
// the owner-only ones when the device is the route owner's. A proto-2
// route already at its unsealed cap contributes none.
func (s *Store) candidateQueues(in store.ClaimInput) []*cursor {
	seen := map[queueKey]bool{}
	var out []*cursor
	add := func(rt store.Route, k queueKey) {
		if seen[k] {
			return
		}
		seen[k] = true
		if q := s.queues[k]; len(q) > 0 {
			out = append(out, &cursor{queue: q, route: rt, capped: in.Proto == store.Proto2})
		}
	}
	for _, rt := range in.Routes {
		if in.Proto == store.Proto2 && s.unsealed[rt] >= store.UnsealedPerRoute {
			continue
		}
		for _, kind := range in.Kinds {
			for _, ownerOnly := range []bool{false, true} {
				if ownerOnly && rt.Owner != in.Owner {
					continue
				}
				k := queueKey{proto: in.Proto, site: rt.SiteID, owner: rt.Owner, kind: kind, ownerOnly: ownerOnly}
				add(rt, k)
				if in.Proto == store.Proto2 {
					k.reofferTo = in.RunnerID
					add(rt, k)
				}
			}
		}
	}
	return out
}

// nextCandidate returns the earliest-enqueued job across the cursors that
// runner may take now (not refused by it, not barred for it until later),
// advancing past it; a cursor whose route reached its cap during this claim
// is passed over. Cursors hold snapshots, so dequeuing the winner does not
// disturb the walk.
func (s *Store) nextCandidate(cursors []*cursor, runner string, now int64) *record {
	for {
		var best *cursor
		for _, c := range cursors {
			if c.capped && s.unsealed[c.route] >= store.UnsealedPerRoute {
				continue
			}
			if c.pos < len(c.queue) && (best == nil || c.queue[c.pos].seq < best.queue[best.pos].seq) {
				best = c
			}
		}
		if best == nil {
			return nil
		}
		r := best.queue[best.pos]
		best.pos++
		if !slices.Contains(r.job.RefusedBy, runner) && r.job.RetryAfter[runner] <= now {
			return r
		}
	}
}

// Fetch implements store.RoutingStore.
func (s *Store) Fetch(ctx context.Context, in store.LeaseInput) (protocol.SealedEnvelope, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.enter(ctx, in.RunnerID, in.Admit, in.Touch)
	if err != nil {
		return protocol.SealedEnvelope{}, err
	}
	r, err := s.held(in, now)
	if err != nil {
		return protocol.SealedEnvelope{}, err
	}
	if err := fetchRefusal(&r.job); err != nil {
		return protocol.SealedEnvelope{}, err
	}
	r.job.State = store.Running
	s.relist(r)
	return *r.job.Payload, nil
}

// fetchRefusal says why the holder may not have the payload, if it may not.
// Protocol "0" refuses a finished job first (design RB-G9); protocol "2"
// checks for the payload first, as P2-ST9 orders it, so a job finished
// without one answers not-ready (P2-S15).
func fetchRefusal(j *store.Job) error {
	finished := j.State != store.Ready && j.State != store.Running && j.Payload != nil
	if j.Proto == store.Proto0 {
		finished = j.State == store.Done
	}
	switch {
	case finished:
		return store.Refuse(store.RefusedFinished)
	case j.Payload == nil:
		return store.Refuse(store.RefusedNotReady)
	}
	return nil
}

// Result implements store.RoutingStore.
func (s *Store) Result(ctx context.Context, in store.ResultInput) (store.ResultOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.enter(ctx, in.RunnerID, in.Admit, in.Touch)
	if err != nil {
		return store.ResultOutcome{}, err
	}
	r, err := s.held(in.LeaseInput, now)
	switch {
	case err != nil:
		return store.ResultOutcome{}, err
	case in.Envelope.SenderKeyID != r.job.ClaimedBy.HolderKeyID():
		return store.ResultOutcome{}, store.Refuse(store.RefusedOtherDevice)
	case r.job.State == store.Done:
		return store.ResultOutcome{Duplicate: true}, nil
	}
	env := in.Envelope
	r.job.Result = &env
	r.job.Disposition = in.Disposition
	r.job.State = store.Done
	r.job.AwaitingUntil = 0
	s.relist(r)
	if r.job.Proto == store.Proto0 {
		// Protocol "0" never names a finished job in cancel (RB-G11), so it
		// leaves the index; protocol "2" still names it (P2-ST14).
		delete(s.cancelled[r.job.ClaimedBy.RunnerID], r)
	}
	return store.ResultOutcome{}, nil
}

// Release implements store.RoutingStore.
func (s *Store) Release(ctx context.Context, in store.ReleaseInput) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.enter(ctx, in.RunnerID, in.Admit, in.Touch)
	if err != nil {
		return nil, err
	}
	released := []string{}
	for _, l := range in.Leases {
		r, err := s.held(store.LeaseInput{Proto: in.Proto, SiteID: in.SiteID, JobID: l.JobID, RunnerID: in.RunnerID, LeaseID: l.LeaseID}, now)
		if err != nil || r.job.State == store.Done {
			continue
		}
		if in.Reason == protocol.ReasonRefused && !slices.Contains(r.job.RefusedBy, in.RunnerID) {
			r.job.RefusedBy = append(r.job.RefusedBy, in.RunnerID)
		}
		if in.RetryAfterMs > 0 {
			if r.job.RetryAfter == nil {
				r.job.RetryAfter = map[string]int64{}
			}
			r.job.RetryAfter[in.RunnerID] = now + in.RetryAfterMs
		}
		s.requeue(r, now)
		released = append(released, r.job.ID)
	}
	return released, nil
}

// Payload implements store.RoutingStore.
func (s *Store) Payload(ctx context.Context, in store.PayloadInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.admit(ctx, "", in.Admit); err != nil {
		return err
	}
	r := s.live(jobKey{site: in.SiteID, id: in.JobID}, s.now())
	if r == nil {
		return store.Refuse(store.RefusedNotFound)
	}
	if r.job.State != store.AwaitingPayload {
		return &store.Refusal{Code: store.RefusedTooLate, Was: r.job.State}
	}
	if in.Envelope.RecipientKeyID != r.job.ClaimedBy.HolderKeyID() {
		return store.Refuse(store.RefusedOtherDevice)
	}
	env := in.Envelope
	r.job.Payload = &env
	r.job.State = store.Ready
	r.held = false // sealed: nothing is left to hold back from the site
	r.job.AwaitingUntil = 0
	r.job.SealAttempts = 0
	s.relist(r)
	s.leases.push(entry{at: r.job.ClaimedBy.LeaseExpiresAt, rec: r})
	return nil
}

// Cancel implements store.RoutingStore.
func (s *Store) Cancel(ctx context.Context, in store.CancelInput) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.admit(ctx, "", in.Admit); err != nil {
		return false, err
	}
	r := s.live(jobKey{site: in.SiteID, id: in.JobID}, s.now())
	if r == nil {
		return false, nil
	}
	if r.job.Cancelled {
		return true, nil
	}
	r.job.Cancelled = true
	s.dequeue(r)
	if c := r.job.ClaimedBy; c != nil && (r.job.Proto == store.Proto2 || r.job.State != store.Done) {
		held := s.cancelled[c.RunnerID]
		if held == nil {
			held = map[*record]struct{}{}
			s.cancelled[c.RunnerID] = held
		}
		held[r] = struct{}{}
	}
	return true, nil
}

// CancelRequests implements store.RoutingStore.
func (s *Store) CancelRequests(_ context.Context, in store.CancelRequestsInput) ([]protocol.LeaseRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelRequests(in, s.now()), nil
}

// cancelRequests is CancelRequests at now, under s.mu.
func (s *Store) cancelRequests(in store.CancelRequestsInput, now int64) []protocol.LeaseRef {
	runnerID := in.RunnerID
	held := s.cancelled[runnerID]
	var live []*record
	for r := range held {
		if s.apply(r, now).dropped() || r.job.ClaimedBy == nil || r.job.ClaimedBy.RunnerID != runnerID {
			// No longer this runner's to stop; it cannot come back, since a
			// cancelled job is never granted again.
			delete(held, r)
			continue
		}
		if r.job.Proto == in.Proto && (in.Proto == store.Proto2 || r.job.State != store.Done) {
			live = append(live, r)
		}
	}
	out := []protocol.LeaseRef{}
	for _, r := range inOrder(live) {
		out = append(out, protocol.LeaseRef{JobID: r.job.ID, LeaseID: r.job.ClaimedBy.LeaseID})
	}
	return out
}

// Renew implements store.RoutingStore.
func (s *Store) Renew(_ context.Context, in store.RenewInput) (store.RenewResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renew(in, nil, s.now()), nil
}

// renew is Renew at now, under s.mu, of grants on jobs of sites only
// (nil for any: store.ServesSite).
func (s *Store) renew(in store.RenewInput, sites []string, now int64) store.RenewResult {
	res := store.RenewResult{Renewed: []store.Renewal{}, Lost: []protocol.LeaseRef{}}
	for _, l := range in.Leases {
		r, err := s.held(store.LeaseInput{Proto: in.Proto, SiteID: in.SiteID, JobID: l.JobID, RunnerID: in.RunnerID, LeaseID: l.LeaseID, Sites: sites}, now)
		if err != nil {
			res.Lost = append(res.Lost, l)
			continue
		}
		r.job.ClaimedBy.LeaseExpiresAt = now + in.LeaseMs
		s.leases.push(entry{at: r.job.ClaimedBy.LeaseExpiresAt, rec: r})
		res.Renewed = append(res.Renewed, store.Renewal{JobID: l.JobID, ExpiresAt: r.job.ClaimedBy.LeaseExpiresAt})
	}
	return res
}

// Pair implements store.RoutingStore.
func (s *Store) Pair(ctx context.Context, in store.PairInput) (store.Presence, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.admit(ctx, in.RunnerID, in.Admit); err != nil {
		return store.Presence{}, err
	}
	return s.pair(in, s.now()), nil
}

// pair is Pair at now, under s.mu.
func (s *Store) pair(in store.PairInput, now int64) store.Presence {
	p := s.presence[in.RunnerID]
	if p == nil {
		p = &store.Presence{RunnerID: in.RunnerID}
		s.presence[in.RunnerID] = p
		s.paired = append(s.paired, in.RunnerID)
	}
	p.Owner, p.Device, p.LastSeenAt = in.Owner, in.Device, now
	if in.Capabilities != nil {
		p.Capabilities = slices.Clone(in.Capabilities)
	}
	if in.Withheld != nil {
		p.Withheld = slices.Clone(in.Withheld)
	}
	return copyPresence(p)
}

// Heartbeat implements store.RoutingStore.
func (s *Store) Heartbeat(ctx context.Context, in store.HeartbeatInput) (store.HeartbeatResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.enter(ctx, in.RunnerID, in.Admit, in.Touch)
	if err != nil {
		return store.HeartbeatResult{}, err
	}
	res := store.HeartbeatResult{Swept: s.sweep(now), Cancel: []protocol.LeaseRef{}, Renewed: store.RenewResult{Renewed: []store.Renewal{}, Lost: []protocol.LeaseRef{}}}
	if in.Serving {
		res.Cancel = s.cancelRequests(store.CancelRequestsInput{Proto: in.Proto, RunnerID: in.RunnerID}, now)
		res.Renewed = s.renew(store.RenewInput{Proto: in.Proto, SiteID: in.SiteID, RunnerID: in.RunnerID, Leases: in.Leases, LeaseMs: in.LeaseMs}, in.Sites, now)
	}
	return res, nil
}

// Touch implements store.RoutingStore.
func (s *Store) Touch(ctx context.Context, in store.TouchInput) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.admit(ctx, in.RunnerID, in.Admit); err != nil {
		return false, err
	}
	return s.stamp(in.RunnerID, s.now()), nil
}

// stamp sets a paired runner's last-seen time and says whether the runner
// is paired; it never creates a presence.
func (s *Store) stamp(runnerID string, now int64) bool {
	p := s.presence[runnerID]
	if p == nil {
		return false
	}
	p.LastSeenAt = now
	return true
}

// Sweep implements store.RoutingStore.
func (s *Store) Sweep(context.Context) (store.SweepResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sweep(s.now()), nil
}

// sweep applies every deadline that is due, reporting requeued and expired
// jobs each in first-enqueue order.
func (s *Store) sweep(now int64) store.SweepResult {
	due := map[*record]struct{}{}
	for _, h := range []*timeHeap{&s.deadlines, &s.awaiting, &s.leases, &s.reoffers} {
		for _, r := range h.popDue(now) {
			due[r] = struct{}{}
		}
	}
	var requeued, expired, lapsed []*record
	for r := range due {
		if r.gone {
			// Dropped earlier by an operation that applied its deadline;
			// this sweep did not drop it and must not report it.
			continue
		}
		o := s.apply(r, now)
		switch {
		case o.dropped():
			expired = append(expired, r)
		case o != untouched:
			requeued = append(requeued, r)
		}
		if o == lapsed2 || o == evicted {
			lapsed = append(lapsed, r)
		}
	}
	return store.SweepResult{Requeued: idsInOrder(requeued), Expired: idsInOrder(expired), Lapsed: idsInOrder(lapsed)}
}

// Job implements store.RoutingStore.
func (s *Store) Job(_ context.Context, siteID, id string) (store.Job, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.jobs[jobKey{site: siteID, id: id}]
	if r == nil {
		return store.Job{}, false, nil
	}
	return copyJob(&r.job), true, nil
}

// Jobs implements store.RoutingStore.
func (s *Store) Jobs(_ context.Context, limit int) ([]store.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []store.Job{}
	for _, r := range s.order {
		if limit > 0 && len(out) >= limit {
			break
		}
		if !r.gone {
			out = append(out, copyJob(&r.job))
		}
	}
	return out, nil
}

// JobSummaries implements store.RoutingStore.
func (s *Store) JobSummaries(_ context.Context, limit int) ([]store.JobSummary, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []store.JobSummary{}
	for _, r := range s.order {
		if limit > 0 && len(out) >= limit {
			break
		}
		if r.gone {
			continue
		}
		// Sizes are the ciphertexts' (at least 1, so that a stored
		// envelope always shows).
		sum := store.JobSummary{Job: copyJob(&r.job)}
		if sum.Payload != nil {
			sum.PayloadBytes = max(1, int64(len(sum.Payload.Ciphertext)))
		}
		if sum.Result != nil {
			sum.ResultBytes = max(1, int64(len(sum.Result.Ciphertext)))
		}
		sum.Payload, sum.Result = nil, nil
		out = append(out, sum)
	}
	return out, nil
}

// Pending implements store.RoutingStore.
func (s *Store) Pending(_ context.Context, siteID string) ([]store.Job, error) {
	return s.siteJobs(siteID, func(j *store.Job) bool { return j.State == store.AwaitingPayload }), nil
}

// Results implements store.RoutingStore.
func (s *Store) Results(_ context.Context, siteID string) ([]store.Job, error) {
	jobs := s.siteJobs(siteID, func(j *store.Job) bool { return j.State == store.Done && j.Result != nil })
	for i := range jobs {
		jobs[i].Payload = nil
	}
	return jobs, nil
}

func (s *Store) siteJobs(siteID string, keep func(*store.Job) bool) []store.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var recs []*record
	for r := range s.listed[siteID] {
		if keep(&r.job) {
			recs = append(recs, r)
		}
	}
	slices.SortFunc(recs, bySeq)
	out := make([]store.Job, 0, len(recs))
	for _, r := range recs {
		out = append(out, copyJob(&r.job))
	}
	return out
}

// Presence implements store.RoutingStore.
func (s *Store) Presence(_ context.Context, runnerID string) (store.Presence, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.presence[runnerID]
	if p == nil {
		return store.Presence{}, false, nil
	}
	return copyPresence(p), true, nil
}

// Runners implements store.RoutingStore.
func (s *Store) Runners(_ context.Context, limit int) ([]store.Presence, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []store.Presence{}
	for _, id := range s.paired {
		if limit > 0 && len(out) >= limit {
			break
		}
		out = append(out, copyPresence(s.presence[id]))
	}
	return out, nil
}
