package memory

import (
	"slices"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// A sealed job goes back to its holder (README RD-D14). When a protocol-"2"
// job's lease lapses with its payload sealed, the payload and the grant are
// kept and the job waits, in state ready, for its holder's next claim until
// store.HolderReturnMs after the lapse; that claim re-grants it under the
// same lease id. Past the window the job is requeued as before.

// holdForHolder starts the holder's window of a job whose lease lapsed at
// its LeaseExpiresAt, if it may have one: a protocol-"2" job with a sealed
// payload, not cancelled, not already in a window (whose end this lapse
// is), and not lapsed so long ago that its window is over by now.
func (s *Store) holdForHolder(r *record, now int64) bool {
	j := &r.job
	if r.returningTo != "" || j.Proto != store.Proto2 || j.Payload == nil || j.Cancelled ||
		j.ClaimedBy.LeaseExpiresAt+store.HolderReturnMs <= now {
		return false
	}
	j.State = store.Ready
	j.ClaimedBy.LeaseExpiresAt += store.HolderReturnMs
	r.returningTo = j.ClaimedBy.RunnerID
	m := s.returning[r.returningTo]
	if m == nil {
		m = map[*record]struct{}{}
		s.returning[r.returningTo] = m
	}
	m[r] = struct{}{}
	s.leases.push(entry{at: j.ClaimedBy.LeaseExpiresAt, rec: r})
	s.relist(r)
	return true
}

// leaveReturning takes a job off its holder's returning list once it is no
// longer ready there to be re-granted: fetched, finished, requeued, dropped.
func (s *Store) leaveReturning(r *record) {
	if r.returningTo != "" && (r.job.State != store.Ready || r.gone) {
		s.leaveReturningNow(r)
	}
}

// regrantToHolder re-grants, to the claiming runner, up to limit of the jobs
// waiting for it: same lease id, a fresh expiry, still ready. Only the
// device the payload was sealed to gets one, and only on a route the
// claim may still serve.
func (s *Store) regrantToHolder(in store.ClaimInput, now int64, limit int) []protocol.ClaimedStub {
	if in.Proto != store.Proto2 || limit <= 0 {
		return nil
	}
	var waiting []*record
	for r := range s.returning[in.RunnerID] {
		waiting = append(waiting, r)
	}
	var granted []protocol.ClaimedStub
	// In enqueue order, as the Valkey store's list is.
	for _, r := range inOrder(waiting) {
		if len(granted) == limit {
			break
		}
		if s.apply(r, now).dropped() || r.returningTo != in.RunnerID {
			continue
		}
		c := r.job.ClaimedBy
		if r.job.State != store.Ready || r.job.Cancelled || c.Device != in.Device || !slices.Contains(in.Routes, r.route()) {
			continue
		}
		s.leaveReturningNow(r)
		c.LeaseExpiresAt = now + in.LeaseMs
		s.leases.push(entry{at: c.LeaseExpiresAt, rec: r})
		granted = append(granted, store.ClaimedStub(r.job.Stub, *c))
	}
	return granted
}

// leaveReturningNow takes a job off its holder's list.
func (s *Store) leaveReturningNow(r *record) {
	m := s.returning[r.returningTo]
	delete(m, r)
	if len(m) == 0 {
		delete(s.returning, r.returningTo)
	}
	r.returningTo = ""
}
