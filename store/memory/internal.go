package memory

import (
	"container/heap"
	"slices"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// outcome is what applying a job's deadlines did to it.
type outcome int

const (
	untouched outcome = iota
	requeued          // a lease or a proto-0 sealing window lapsed
	lapsed2           // a proto-2 sealing window lapsed, and the job is queued again
	gone              // its deadline passed
	evicted           // a proto-2 sealing window lapsed the last time it may
)

// dropped reports whether the job no longer exists.
func (o outcome) dropped() bool { return o == gone || o == evicted }

// apply enforces r's passed deadlines at now: past its deadline the job is
// deleted; past its sealing window, or past its lease while ready or running,
// it goes back to the queue (a proto-2 job with the bookkeeping of §4.5);
// past the end of a re-offer it becomes claimable by every runner.
func (s *Store) apply(r *record, now int64) outcome {
	if r.gone {
		return gone
	}
	j := &r.job
	switch {
	case j.Stub.DeadlineAt <= now:
		s.remove(r)
		return gone
	case j.State == store.AwaitingPayload && j.AwaitingUntil <= now:
		// A held job's site never saw it, so its lapse is no seal
		// attempt: a plain requeue (G-R16).
		if j.Proto == store.Proto2 && !r.held {
			return s.lapse(r, now)
		}
		s.requeue(r, now)
		return requeued
	case (j.State == store.Ready || j.State == store.Running) && j.ClaimedBy != nil && j.ClaimedBy.LeaseExpiresAt <= now:
		if s.holdForHolder(r, now) {
			return untouched
		}
		s.requeue(r, now)
		return requeued
	case r.queued != nil && r.queued.reofferTo != "" && !reofferOpen(j, now):
		s.dequeue(r)
		s.enqueueRecord(r, now)
	}
	return untouched
}

// lapse applies a proto-2 job's lapsed sealing window (spec protocol-2
// §4.5): the first runner to let one lapse is the one the job is re-offered
// to, for one sealing window after each lapse of its own grant (P2-D8), and
// the third consecutive lapse evicts the job.
func (s *Store) lapse(r *record, now int64) outcome {
	j := &r.job
	if j.ReofferTo == "" {
		j.ReofferTo = j.ClaimedBy.RunnerID
	}
	if j.ReofferTo == j.ClaimedBy.RunnerID {
		j.ReofferUntil = j.AwaitingUntil + protocol.AwaitingPayloadMs
	}
	j.SealAttempts++
	if j.SealAttempts >= store.SealAttemptsBeforeEviction {
		s.remove(r)
		return evicted
	}
	s.requeue(r, now)
	return lapsed2
}

// live returns the job under key after applying its deadlines, or nil.
func (s *Store) live(key jobKey, now int64) *record {
	r := s.jobs[key]
	if r == nil || s.apply(r, now).dropped() {
		return nil
	}
	return r
}

// resolve finds the job a holder-scoped call names, its deadlines applied,
// among the jobs of in.Proto: by (site, id) when the call names a site, else
// lease first (spec protocol-2 P2-R4.1.3): the job the lease is the current
// grant of, if its id is the one named, else the first job with that id the
// runner holds.
func (s *Store) resolve(in store.LeaseInput, now int64) *record {
	if in.SiteID != "" {
		r := s.live(jobKey{site: in.SiteID, id: in.JobID}, now)
		if r == nil || r.job.Proto != in.Proto {
			return nil
		}
		return r
	}
	if r := s.byLease[in.LeaseID]; r != nil && r.job.ID == in.JobID && r.job.Proto == in.Proto &&
		!s.apply(r, now).dropped() && s.byLease[in.LeaseID] == r {
		return r
	}
	// apply may delete jobs from the list being walked.
	for _, r := range slices.Clone(s.byID[in.JobID]) {
		if r.job.Proto != in.Proto || s.apply(r, now).dropped() {
			continue
		}
		if c := r.job.ClaimedBy; c != nil && c.RunnerID == in.RunnerID {
			return r
		}
	}
	return nil
}

// held returns the job a runner holds under the named grant, or the refusal
// that says why not, checked in the reference's order.
func (s *Store) held(in store.LeaseInput, now int64) (*record, error) {
	r := s.resolve(in, now)
	switch {
	case r == nil || r.returningTo != "": // a lapsed lease kept for a re-grant acts on nothing (RD-D14)
		return nil, store.Refuse(store.RefusedNotFound)
	case r.job.ClaimedBy == nil || r.job.ClaimedBy.RunnerID != in.RunnerID:
		return nil, store.Refuse(store.RefusedNotHolder)
	case r.job.ClaimedBy.LeaseID != in.LeaseID:
		return nil, store.Refuse(store.RefusedStaleLease)
	case !store.ServesSite(in.Sites, r.job.SiteID):
		return nil, store.Refuse(store.RefusedWithdrawn)
	}
	return r, nil
}

// requeue returns a job to its queue at its original place, dropping the
// grant and payload but keeping its result, refusals, cancellation and
// proto-2 bookkeeping.
func (s *Store) requeue(r *record, now int64) {
	j := &r.job
	if j.ClaimedBy != nil && s.byLease[j.ClaimedBy.LeaseID] == r {
		delete(s.byLease, j.ClaimedBy.LeaseID)
	}
	j.State = store.Queued
	j.ClaimedBy = nil
	j.AwaitingUntil = 0
	j.Payload = nil
	r.held = false
	s.relist(r)
	s.enqueueRecord(r, now)
}

// enqueueRecord puts a queued job into the queue it belongs in at now, in
// sequence order, unless it is cancelled: a cancelled job is never offered
// again.
func (s *Store) enqueueRecord(r *record, now int64) {
	if r.job.Cancelled || r.queued != nil {
		return
	}
	k := keyOf(&r.job, now)
	q := s.queues[k]
	i, found := slices.BinarySearchFunc(q, r, bySeq)
	if !found {
		s.queues[k] = slices.Insert(q, i, r)
	}
	r.queued = &k
	if k.reofferTo != "" {
		s.reoffers.push(entry{at: r.job.ReofferUntil, rec: r})
	}
}

// dequeue takes a job out of its queue, if it is in one.
func (s *Store) dequeue(r *record) {
	if r.queued == nil {
		return
	}
	k := *r.queued
	r.queued = nil
	q := s.queues[k]
	i, found := slices.BinarySearchFunc(q, r, bySeq)
	if !found {
		return
	}
	// A new slice, so that claim cursors holding the old one stay valid.
	q = slices.Concat(q[:i], q[i+1:])
	if len(q) == 0 {
		delete(s.queues, k)
		return
	}
	s.queues[k] = q
}

// remove deletes a job with everything it holds, payload and result included.
func (s *Store) remove(r *record) {
	s.dequeue(r)
	r.gone = true
	key := r.key()
	delete(s.jobs, key)
	s.byID[key.id] = slices.DeleteFunc(s.byID[key.id], func(o *record) bool { return o == r })
	if len(s.byID[key.id]) == 0 {
		delete(s.byID, key.id)
	}
	if c := r.job.ClaimedBy; c != nil {
		delete(s.cancelled[c.RunnerID], r)
		if s.byLease[c.LeaseID] == r {
			delete(s.byLease, c.LeaseID)
		}
	}
	r.job.State = ""
	s.relist(r)
	r.job = store.Job{ID: r.job.ID}
	s.deleted++
	if s.deleted > len(s.order)/2 {
		s.order = slices.DeleteFunc(s.order, func(r *record) bool { return r.gone })
		s.deleted = 0
	}
}

// relist keeps a job in its site's listing index exactly while Pending or
// Results would show it, so a poll reads those jobs and not every job of
// the site, and keeps the count of unsealed proto-2 jobs per route, so a
// claim skips a capped route without looking at its queue. Call it after
// every change of state.
func (s *Store) relist(r *record) {
	j := &r.job
	s.leaveReturning(r)
	if unsealed := j.Proto == store.Proto2 && j.State == store.AwaitingPayload; unsealed != r.unsealed {
		r.unsealed = unsealed
		rt := r.route()
		if unsealed {
			s.unsealed[rt]++
		} else if s.unsealed[rt]--; s.unsealed[rt] <= 0 {
			delete(s.unsealed, rt)
		}
	}
	if (j.State == store.AwaitingPayload && !r.held) || (j.State == store.Done && j.Result != nil) {
		m := s.listed[j.SiteID]
		if m == nil {
			m = map[*record]struct{}{}
			s.listed[j.SiteID] = m
		}
		m[r] = struct{}{}
		return
	}
	delete(s.listed[j.SiteID], r)
	if len(s.listed[j.SiteID]) == 0 {
		delete(s.listed, j.SiteID)
	}
}

func bySeq(a, b *record) int {
	switch {
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

func inOrder(recs []*record) []*record {
	slices.SortFunc(recs, bySeq)
	return recs
}

func idsInOrder(recs []*record) []string {
	slices.SortFunc(recs, bySeq)
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		ids = append(ids, r.job.ID)
	}
	return ids
}

// copyPresence returns a copy that shares no bytes with the store's own.
func copyPresence(p *store.Presence) store.Presence {
	c := *p
	c.Capabilities = slices.Clone(p.Capabilities)
	c.Withheld = slices.Clone(p.Withheld)
	return c
}

// copyJob returns a deep copy, so callers never hold the store's own records.
func copyJob(j *store.Job) store.Job {
	c := j.Clone()
	if c.RefusedBy == nil {
		c.RefusedBy = []string{}
	}
	return c
}

// entry is one deadline in a heap. Entries are never updated in place: a
// changed deadline pushes a new entry, and apply decides whether an old one
// still matters when it comes due.
type entry struct {
	at  int64
	rec *record
}

type timeHeap []entry

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *timeHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (h *timeHeap) push(e entry) { heap.Push(h, e) }

// popDue removes and returns the records of every entry due at now.
func (h *timeHeap) popDue(now int64) []*record {
	var due []*record
	for h.Len() > 0 && (*h)[0].at <= now {
		due = append(due, heap.Pop(h).(entry).rec)
	}
	return due
}
