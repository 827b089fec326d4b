package valkey

import (
	"context"
	"fmt"
	"strconv"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// SettleGrants implements store.RoutingStore: one settleGrants script for
// the whole claim. It keeps no memo: a retry after a lost reply answers
// alike from the state the first run left (answersAlike).
func (s *Store) SettleGrants(ctx context.Context, in store.SettleGrantsInput) ([]protocol.LeaseRef, error) {
	args := make([]string, 0, 4+2*(len(in.Granted)+len(in.Refused)+len(in.Returned)))
	args = append(args, in.RunnerID, strconv.FormatInt(max(in.RetryAfterMs, 0), 10),
		strconv.Itoa(len(in.Granted)), strconv.Itoa(len(in.Refused)))
	for _, list := range [][]protocol.LeaseRef{in.Granted, in.Refused, in.Returned} {
		for _, l := range list {
			args = append(args, l.JobID, l.LeaseID)
		}
	}
	parts, err := s.execWrite(ctx, s.newCall(store.OpSettleGrants, args...))
	if err != nil {
		return nil, err
	}
	if len(parts)%2 != 0 {
		return nil, fmt.Errorf("valkey store: %s: malformed answer", store.OpSettleGrants)
	}
	current := make([]protocol.LeaseRef, 0, len(parts)/2)
	for i := 0; i < len(parts); i += 2 {
		current = append(current, protocol.LeaseRef{JobID: parts[i], LeaseID: parts[i+1]})
	}
	return current, nil
}
