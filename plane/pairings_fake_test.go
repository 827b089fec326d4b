package plane_test

import (
	"context"
	"sync"

	"github.com/byollm/relayd/store"
)

// pairingsOf is the Pairings the relay on s uses: the store's own when it
// keeps pending codes, otherwise a stand-in in this process on s's clock,
// one per store, so that the codec's tests do not wait for the stores'.
func pairingsOf(s store.RoutingStore) store.Pairings {
	if p, ok := s.(store.Pairings); ok {
		return p
	}
	standInsMu.Lock()
	defer standInsMu.Unlock()
	if p, ok := standIns[s]; ok {
		return p
	}
	p := &standInPairings{clock: s}
	standIns[s] = p
	return p
}

var (
	standInsMu sync.Mutex
	standIns   = map[store.RoutingStore]*standInPairings{}
)

// standInPairings keeps pending codes in order, with the put rule of
// store.Pairings.
type standInPairings struct {
	clock interface {
		Now(ctx context.Context) (int64, error)
	}
	mu      sync.Mutex
	pending []store.PendingPairing
}

func (p *standInPairings) live(ctx context.Context) ([]store.PendingPairing, int64, error) {
	now, err := p.clock.Now(ctx)
	if err != nil {
		return nil, 0, err
	}
	var out []store.PendingPairing
	for _, c := range p.pending {
		if c.ExpiresAt > now {
			out = append(out, c)
		}
	}
	return out, now, nil
}

func (p *standInPairings) StartPairing(ctx context.Context, in store.StartPairingInput) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	live, now, err := p.live(ctx)
	if err != nil {
		return 0, err
	}
	kept := live[:0]
	for _, c := range live {
		if c.Device.Identity != in.Pending.Device.Identity {
			kept = append(kept, c)
		}
	}
	p.pending = kept
	if len(kept) >= in.Capacity {
		return 0, store.Refuse(store.RefusedAtCapacity)
	}
	c := in.Pending
	c.ExpiresAt = now + in.TTLMs
	p.pending = append(p.pending, c)
	return c.ExpiresAt, nil
}

func (p *standInPairings) find(ctx context.Context, match func(store.PendingPairing) bool) (store.PendingPairing, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	live, _, err := p.live(ctx)
	if err != nil {
		return store.PendingPairing{}, false, err
	}
	for _, c := range live {
		if match(c) {
			return c, true, nil
		}
	}
	return store.PendingPairing{}, false, nil
}

func (p *standInPairings) PairingByDeviceCode(ctx context.Context, code string) (store.PendingPairing, bool, error) {
	return p.find(ctx, func(c store.PendingPairing) bool { return c.DeviceCode == code })
}

func (p *standInPairings) PairingByUserCode(ctx context.Context, code string) (store.PendingPairing, bool, error) {
	return p.find(ctx, func(c store.PendingPairing) bool { return c.UserCode == code })
}

func (p *standInPairings) DropPairing(_ context.Context, code string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.pending {
		if c.DeviceCode == code {
			p.pending = append(p.pending[:i], p.pending[i+1:]...)
			break
		}
	}
	return nil
}
