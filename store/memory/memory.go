// Package memory is the embedded RoutingStore: all routing state in one
// process, for a relay that runs as a single replica with nothing else
// installed. It keeps the same indexes a shared store would (FIFO queues per
// route and kind, heaps of deadlines), so claim and sweep cost what they
// grant or find due, not what is stored.
package memory

import (
	"context"
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

	mu        sync.Mutex
	nextSeq   uint64
	jobs      map[string]*record
	order     []*record // every job ever created, in creation order; deleted ones are skipped
	deleted   int       // how many of order are deleted, to know when to compact
	queues    map[queueKey][]*record
	deadlines timeHeap                        // job deadlines
	awaiting  timeHeap                        // sealing windows
	leases    timeHeap                        // lease expiries of ready and running jobs
	listed    map[string]map[*record]struct{} // by site: jobs the site's listings show (awaiting a payload, or done with a result)
	cancelled map[string]map[*record]struct{} // by holder: cancelled jobs held
	presence  map[string]*store.Presence
	paired    []string // runner ids in first-pair order
}

var _ store.RoutingStore = (*Store)(nil)

// New returns an empty store stamping time from c.
func New(c clock.Clock) *Store {
	return &Store{
		clock:     c,
		jobs:      map[string]*record{},
		queues:    map[queueKey][]*record{},
		listed:    map[string]map[*record]struct{}{},
		cancelled: map[string]map[*record]struct{}{},
		presence:  map[string]*store.Presence{},
	}
}

type record struct {
	seq  uint64
	job  store.Job
	gone bool
}

// queueKey names one FIFO queue: the queued, uncancelled jobs of one site,
// owner and kind, with "self" jobs kept apart because only the owner's own
// devices may take them.
type queueKey struct {
	site, owner, kind string
	self              bool
}

func keyOf(j *store.Job) queueKey {
	return queueKey{site: j.SiteID, owner: j.Stub.Owner, kind: j.Stub.Kind, self: j.Stub.Audience == protocol.AudienceSelf}
}

func (s *Store) now() int64 { return clock.UnixMilli(s.clock) }

// Now reads the store clock.
func (s *Store) Now(context.Context) (int64, error) { return s.now(), nil }

// Limiter returns an in-process limiter of rate on the store's clock: a
// relay on the memory store is one replica, so its buckets need no
// sharing. The clock only measures waits, so a shifted test clock changes
// nothing a caller sees.
func (s *Store) Limiter(rate ratelimit.Rate) (ratelimit.Limiter, error) {
	l, err := ratelimit.NewMemory(rate, s.clock)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Ping always succeeds: the store is in this process.
func (s *Store) Ping(context.Context) error { return nil }

// Close does nothing; the state goes with the process.
func (s *Store) Close() error { return nil }

// Enqueue implements store.RoutingStore.
func (s *Store) Enqueue(_ context.Context, in store.EnqueueInput) (store.EnqueueResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if r := s.live(in.Stub.ID, now); r != nil {
		if r.job.SiteID != in.SiteID {
			return store.EnqueueResult{}, store.Refuse(store.RefusedIDTaken)
		}
		return store.EnqueueResult{State: r.job.State}, nil
	}
	s.nextSeq++
	r := &record{seq: s.nextSeq, job: store.Job{ID: in.Stub.ID, SiteID: in.SiteID, Stub: in.Stub, State: store.Queued, RefusedBy: []string{}}}
	s.jobs[r.job.ID] = r
	s.order = append(s.order, r)
	s.deadlines.push(entry{at: in.Stub.DeadlineAt, rec: r})
	s.enqueueRecord(r)
	return store.EnqueueResult{State: store.Queued, Created: true}, nil
}

// Claim implements store.RoutingStore.
func (s *Store) Claim(_ context.Context, in store.ClaimInput) ([]protocol.ClaimedStub, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if in.Touch {
		s.stamp(in.RunnerID, now)
	}
	s.sweep(now)
	granted := []protocol.ClaimedStub{}
	if in.Max <= 0 {
		return granted, nil
	}
	heads := s.candidateQueues(in)
	for len(granted) < in.Max {
		r := s.nextCandidate(heads, in.RunnerID)
		if r == nil {
			break
		}
		s.dequeue(r)
		claim := store.Claim{RunnerID: in.RunnerID, Owner: in.Owner, Device: in.Device, LeaseID: uuid.NewString(), LeaseExpiresAt: now + in.LeaseMs}
		r.job.State = store.AwaitingPayload
		r.job.ClaimedBy = &claim
		r.job.AwaitingUntil = now + protocol.AwaitingPayloadMs
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
}

// candidateQueues lists the queues a claim may draw from: every route and
// kind, plus the route owner's "self" queue when the device is theirs.
func (s *Store) candidateQueues(in store.ClaimInput) []*cursor {
	seen := map[queueKey]bool{}
	var out []*cursor
	add := func(k queueKey) {
		if seen[k] {
			return
		}
		seen[k] = true
		if q := s.queues[k]; len(q) > 0 {
			out = append(out, &cursor{queue: q})
		}
	}
	for _, rt := range in.Routes {
		for _, kind := range in.Kinds {
			add(queueKey{site: rt.SiteID, owner: rt.Owner, kind: kind})
			if rt.Owner == in.Owner {
				add(queueKey{site: rt.SiteID, owner: rt.Owner, kind: kind, self: true})
			}
		}
	}
	return out
}

// nextCandidate returns the earliest-enqueued job across the cursors that
// runner has not refused, advancing past it. Cursors hold snapshots, so
// dequeuing the winner does not disturb the walk.
func (s *Store) nextCandidate(cursors []*cursor, runner string) *record {
	for {
		var best *cursor
		for _, c := range cursors {
			if c.pos < len(c.queue) && (best == nil || c.queue[c.pos].seq < best.queue[best.pos].seq) {
				best = c
			}
		}
		if best == nil {
			return nil
		}
		r := best.queue[best.pos]
		best.pos++
		if !slices.Contains(r.job.RefusedBy, runner) {
			return r
		}
	}
}

// Fetch implements store.RoutingStore.
func (s *Store) Fetch(_ context.Context, in store.LeaseInput) (protocol.SealedEnvelope, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if in.Touch {
		s.stamp(in.RunnerID, now)
	}
	r, err := s.held(in, now)
	if err != nil {
		return protocol.SealedEnvelope{}, err
	}
	switch {
	case r.job.State == store.Done:
		return protocol.SealedEnvelope{}, store.Refuse(store.RefusedFinished)
	case r.job.Payload == nil:
		return protocol.SealedEnvelope{}, store.Refuse(store.RefusedNotReady)
	}
	r.job.State = store.Running
	s.relist(r)
	return *r.job.Payload, nil
}

// Result implements store.RoutingStore.
func (s *Store) Result(_ context.Context, in store.ResultInput) (store.ResultOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if in.Touch {
		s.stamp(in.RunnerID, now)
	}
	r := s.live(in.JobID, now)
	switch {
	case r == nil:
		return store.ResultOutcome{}, store.Refuse(store.RefusedNotFound)
	case r.job.ClaimedBy == nil || r.job.ClaimedBy.RunnerID != in.RunnerID:
		return store.ResultOutcome{}, store.Refuse(store.RefusedNotHolder)
	case r.job.ClaimedBy.LeaseID != in.LeaseID:
		return store.ResultOutcome{}, store.Refuse(store.RefusedStaleLease)
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
	// A finished job is never named in cancel (G11), so it leaves the index.
	delete(s.cancelled[r.job.ClaimedBy.RunnerID], r)
	return store.ResultOutcome{}, nil
}

// Release implements store.RoutingStore.
func (s *Store) Release(_ context.Context, in store.ReleaseInput) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	released := []string{}
	for _, l := range in.Leases {
		r, err := s.held(store.LeaseInput{JobID: l.JobID, RunnerID: in.RunnerID, LeaseID: l.LeaseID}, now)
		if err != nil || r.job.State == store.Done {
			continue
		}
		if in.Reason == protocol.ReasonRefused && !slices.Contains(r.job.RefusedBy, in.RunnerID) {
			r.job.RefusedBy = append(r.job.RefusedBy, in.RunnerID)
		}
		s.requeue(r)
		released = append(released, r.job.ID)
	}
	return released, nil
}

// Payload implements store.RoutingStore.
func (s *Store) Payload(_ context.Context, in store.PayloadInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.live(in.JobID, s.now())
	if r == nil || r.job.SiteID != in.SiteID {
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
	r.job.AwaitingUntil = 0
	s.relist(r)
	s.leases.push(entry{at: r.job.ClaimedBy.LeaseExpiresAt, rec: r})
	return nil
}

// Cancel implements store.RoutingStore.
func (s *Store) Cancel(_ context.Context, in store.CancelInput) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.live(in.JobID, s.now())
	if r == nil || r.job.SiteID != in.SiteID {
		return false, nil
	}
	if r.job.Cancelled {
		return true, nil
	}
	r.job.Cancelled = true
	if r.job.State == store.Queued {
		s.dequeue(r)
	}
	if c := r.job.ClaimedBy; c != nil {
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
	runnerID := in.RunnerID
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	held := s.cancelled[runnerID]
	var live []*record
	for r := range held {
		if s.apply(r, now) == gone || r.job.ClaimedBy == nil || r.job.ClaimedBy.RunnerID != runnerID {
			// No longer this runner's to stop; it cannot come back, since a
			// cancelled job is never granted again.
			delete(held, r)
			continue
		}
		if r.job.State != store.Done {
			live = append(live, r)
		}
	}
	out := []protocol.LeaseRef{}
	for _, r := range inOrder(live) {
		out = append(out, protocol.LeaseRef{JobID: r.job.ID, LeaseID: r.job.ClaimedBy.LeaseID})
	}
	return out, nil
}

// Renew implements store.RoutingStore.
func (s *Store) Renew(_ context.Context, in store.RenewInput) (store.RenewResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	res := store.RenewResult{Renewed: []store.Renewal{}, Lost: []protocol.LeaseRef{}}
	for _, l := range in.Leases {
		r, err := s.held(store.LeaseInput{JobID: l.JobID, RunnerID: in.RunnerID, LeaseID: l.LeaseID}, now)
		if err != nil {
			res.Lost = append(res.Lost, l)
			continue
		}
		r.job.ClaimedBy.LeaseExpiresAt = now + in.LeaseMs
		s.leases.push(entry{at: r.job.ClaimedBy.LeaseExpiresAt, rec: r})
		res.Renewed = append(res.Renewed, store.Renewal{JobID: l.JobID, ExpiresAt: r.job.ClaimedBy.LeaseExpiresAt})
	}
	return res, nil
}

// Pair implements store.RoutingStore.
func (s *Store) Pair(_ context.Context, in store.PairInput) (store.Presence, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.presence[in.RunnerID]
	if p == nil {
		p = &store.Presence{RunnerID: in.RunnerID}
		s.presence[in.RunnerID] = p
		s.paired = append(s.paired, in.RunnerID)
	}
	p.Owner, p.Device, p.LastSeenAt = in.Owner, in.Device, s.now()
	return *p, nil
}

// Touch implements store.RoutingStore.
func (s *Store) Touch(_ context.Context, runnerID string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stamp(runnerID, s.now()), nil
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
	for _, h := range []*timeHeap{&s.deadlines, &s.awaiting, &s.leases} {
		for _, r := range h.popDue(now) {
			due[r] = struct{}{}
		}
	}
	var requeued, expired []*record
	for r := range due {
		if r.gone {
			// Dropped earlier by an operation that applied its deadline;
			// this sweep did not drop it and must not report it.
			continue
		}
		switch s.apply(r, now) {
		case requeue:
			requeued = append(requeued, r)
		case gone:
			expired = append(expired, r)
		}
	}
	return store.SweepResult{Requeued: idsInOrder(requeued), Expired: idsInOrder(expired)}
}

// Job implements store.RoutingStore.
func (s *Store) Job(_ context.Context, siteID, id string) (store.Job, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.jobs[id]
	if r == nil || r.job.SiteID != siteID {
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
	return *p, true, nil
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
		out = append(out, *s.presence[id])
	}
	return out, nil
}
