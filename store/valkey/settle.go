package valkey

import (
	"context"
	"fmt"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// SettleGrants implements store.RoutingStore: one settleGrants script for
// the whole claim. It keeps no memo: a retry after a lost reply answers
// alike from the state the first run left (its entry in operations says alike).
func (s *Store) SettleGrants(ctx context.Context, in store.SettleGrantsInput) ([]protocol.LeaseRef, error) {
	parts, err := s.execWrite(ctx, s.newCall(settleGrantsArgs{Runner: in.RunnerID, Delay: max(in.RetryAfterMs, 0),
		Granted: len(in.Granted), Refused: len(in.Refused), Grants: leasePairs(in.Granted, in.Refused, in.Returned)}))
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
