package memory

import (
	"context"
	"slices"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// SettleGrants implements store.RoutingStore.
func (s *Store) SettleGrants(_ context.Context, in store.SettleGrantsInput) ([]protocol.LeaseRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	current := []protocol.LeaseRef{}
	for _, l := range in.Granted {
		r := s.settleable(in.RunnerID, l, now)
		if r == nil {
			continue
		}
		if r.held {
			r.held = false
			r.job.AwaitingUntil = now + protocol.AwaitingPayloadMs
			s.awaiting.push(entry{at: r.job.AwaitingUntil, rec: r})
			s.relist(r)
		}
		current = append(current, l)
	}
	for _, l := range in.Refused {
		if r := s.settleable(in.RunnerID, l, now); r != nil {
			if !slices.Contains(r.job.RefusedBy, in.RunnerID) {
				r.job.RefusedBy = append(r.job.RefusedBy, in.RunnerID)
			}
			s.requeue(r, now)
		}
	}
	for _, l := range in.Returned {
		if r := s.settleable(in.RunnerID, l, now); r != nil {
			if in.RetryAfterMs > 0 {
				if r.job.RetryAfter == nil {
					r.job.RetryAfter = map[string]int64{}
				}
				r.job.RetryAfter[in.RunnerID] = now + in.RetryAfterMs
			}
			s.requeue(r, now)
		}
	}
	return current, nil
}

// settleable is the proto-2 job runner holds under l's lease, live and not
// done, or nil.
func (s *Store) settleable(runner string, l protocol.LeaseRef, now int64) *record {
	r, err := s.held(store.LeaseInput{Proto: store.Proto2, JobID: l.JobID, RunnerID: runner, LeaseID: l.LeaseID}, now)
	if err != nil || r.job.State == store.Done {
		return nil
	}
	return r
}
