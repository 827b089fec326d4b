package memory

import (
	"container/heap"
	"slices"

	"github.com/byollm/relayd/store"
)

// outcome is what applying a job's deadlines did to it.
type outcome int

const (
	untouched outcome = iota
	requeue
	gone
)

// apply enforces r's passed deadlines at now: past its deadline the job is
// deleted; past its sealing window, or past its lease while ready or running,
// it goes back to the queue.
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
		s.requeue(r)
		return requeue
	case (j.State == store.Ready || j.State == store.Running) && j.ClaimedBy != nil && j.ClaimedBy.LeaseExpiresAt <= now:
		s.requeue(r)
		return requeue
	}
	return untouched
}

// live returns the job with id after applying its deadlines, or nil.
func (s *Store) live(id string, now int64) *record {
	r := s.jobs[id]
	if r == nil || s.apply(r, now) == gone {
		return nil
	}
	return r
}

// held returns the job a runner holds under the named grant, or the refusal
// that says why not, checked in the reference's order.
func (s *Store) held(in store.LeaseInput, now int64) (*record, error) {
	r := s.live(in.JobID, now)
	switch {
	case r == nil:
		return nil, store.Refuse(store.RefusedNotFound)
	case r.job.ClaimedBy == nil || r.job.ClaimedBy.RunnerID != in.RunnerID:
		return nil, store.Refuse(store.RefusedNotHolder)
	case r.job.ClaimedBy.LeaseID != in.LeaseID:
		return nil, store.Refuse(store.RefusedStaleLease)
	}
	return r, nil
}

// requeue returns a job to its queue at its original place, dropping the
// grant and payload but keeping its result, refusals and cancellation.
func (s *Store) requeue(r *record) {
	j := &r.job
	j.State = store.Queued
	j.ClaimedBy = nil
	j.AwaitingUntil = 0
	j.Payload = nil
	s.relist(r)
	s.enqueueRecord(r)
}

// enqueueRecord puts a queued job into its queue in sequence order, unless
// it is cancelled: a cancelled job is never offered again.
func (s *Store) enqueueRecord(r *record) {
	if r.job.Cancelled {
		return
	}
	k := keyOf(&r.job)
	q := s.queues[k]
	i, found := slices.BinarySearchFunc(q, r, bySeq)
	if found {
		return
	}
	s.queues[k] = slices.Insert(q, i, r)
}

// dequeue takes a job out of its queue.
func (s *Store) dequeue(r *record) {
	k := keyOf(&r.job)
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
	if r.job.State == store.Queued {
		s.dequeue(r)
	}
	r.gone = true
	delete(s.jobs, r.job.ID)
	delete(s.listed[r.job.SiteID], r)
	if c := r.job.ClaimedBy; c != nil {
		delete(s.cancelled[c.RunnerID], r)
	}
	r.job = store.Job{ID: r.job.ID}
	s.deleted++
	if s.deleted > len(s.order)/2 {
		s.order = slices.DeleteFunc(s.order, func(r *record) bool { return r.gone })
		s.deleted = 0
	}
}

// relist keeps a job in its site's listing index exactly while Pending or
// Results would show it, so a poll reads those jobs and not every job of
// the site. Call it after every change of state.
func (s *Store) relist(r *record) {
	j := &r.job
	if j.State == store.AwaitingPayload || (j.State == store.Done && j.Result != nil) {
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
