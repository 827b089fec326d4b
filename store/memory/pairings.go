package memory

import (
	"container/heap"
	"context"
	"slices"
	"sync"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/store"
)

// Pairings is the in-memory store.Pairings: the pending device codes of a
// relay that runs as one replica. Each index the contract reads by has a
// map, and expiry a heap, so no operation walks every code.
type Pairings struct {
	clock clock.Clock

	mu         sync.Mutex
	byDevice   map[string]store.PendingPairing
	byIdentity map[string][]string // device identity -> its device codes, first started first
	byUser     map[string][]string // user code -> device codes, first started first
	expiries   expiryHeap          // may hold dropped codes; they are skipped
}

var _ store.Pairings = (*Pairings)(nil)

// NewPairings returns an empty code store judging expiry by c, which
// should be the routing store's clock.
func NewPairings(c clock.Clock) *Pairings {
	return &Pairings{
		clock:      c,
		byDevice:   map[string]store.PendingPairing{},
		byIdentity: map[string][]string{},
		byUser:     map[string][]string{},
	}
}

// StartPairing implements store.Pairings.
func (p *Pairings) StartPairing(_ context.Context, in store.StartPairingInput) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := clock.UnixMilli(p.clock)
	p.purge(now)
	identity := in.Pending.Device.Identity
	for _, code := range slices.Clone(p.byIdentity[identity]) {
		if p.byDevice[code].Origin == in.Pending.Origin {
			p.drop(code)
		}
	}
	if in.PerDevice > 0 && len(p.byIdentity[identity]) >= in.PerDevice {
		return 0, store.Refuse(store.RefusedAtCapacity)
	}
	if len(p.byDevice) >= in.Capacity {
		return 0, store.Refuse(store.RefusedAtCapacity)
	}
	pending := in.Pending
	pending.Capabilities = slices.Clone(pending.Capabilities)
	pending.ExpiresAt = now + in.TTLMs
	pending.Approved, pending.LiveCodes = false, 0
	p.byDevice[pending.DeviceCode] = pending
	p.byIdentity[identity] = append(p.byIdentity[identity], pending.DeviceCode)
	p.byUser[pending.UserCode] = append(p.byUser[pending.UserCode], pending.DeviceCode)
	heap.Push(&p.expiries, expiry{at: pending.ExpiresAt, deviceCode: pending.DeviceCode})
	return pending.ExpiresAt, nil
}

// PairingByDeviceCode implements store.Pairings.
func (p *Pairings) PairingByDeviceCode(_ context.Context, deviceCode string) (store.PendingPairing, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	got, ok := p.live(deviceCode, clock.UnixMilli(p.clock))
	return got, ok, nil
}

// PairingByUserCode implements store.Pairings.
func (p *Pairings) PairingByUserCode(_ context.Context, userCode string) (store.PendingPairing, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := clock.UnixMilli(p.clock)
	for _, deviceCode := range p.byUser[userCode] {
		if got, ok := p.live(deviceCode, now); ok {
			return got, true, nil
		}
	}
	return store.PendingPairing{}, false, nil
}

// ApprovePairing implements store.Pairings.
func (p *Pairings) ApprovePairing(_ context.Context, userCode, identity string) (store.PendingPairing, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := clock.UnixMilli(p.clock)
	for _, deviceCode := range p.byUser[userCode] {
		got, ok := p.live(deviceCode, now)
		if !ok || got.Device.Identity != identity {
			continue
		}
		stored := p.byDevice[deviceCode]
		stored.Approved = true
		p.byDevice[deviceCode] = stored
		got.Approved = true
		return got, true, nil
	}
	return store.PendingPairing{}, false, nil
}

// DropPairing implements store.Pairings.
func (p *Pairings) DropPairing(_ context.Context, deviceCode string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	got, ok := p.byDevice[deviceCode]
	if !ok {
		return nil
	}
	for _, code := range slices.Clone(p.byIdentity[got.Device.Identity]) {
		p.drop(code)
	}
	return nil
}

// live returns a copy of the code if it has not expired at now: a code
// dies at ExpiresAt itself.
func (p *Pairings) live(deviceCode string, now int64) (store.PendingPairing, bool) {
	got, ok := p.byDevice[deviceCode]
	if !ok || got.ExpiresAt <= now {
		return store.PendingPairing{}, false
	}
	got.Capabilities = slices.Clone(got.Capabilities)
	got.LiveCodes = 0
	for _, code := range p.byIdentity[got.Device.Identity] {
		if p.byDevice[code].ExpiresAt > now {
			got.LiveCodes++
		}
	}
	return got, true
}

// purge drops every code whose expiry has come.
func (p *Pairings) purge(now int64) {
	for len(p.expiries) > 0 && p.expiries[0].at <= now {
		e := heap.Pop(&p.expiries).(expiry)
		// A dropped code, or one whose code string was started again,
		// is not this entry's to drop.
		if got, ok := p.byDevice[e.deviceCode]; ok && got.ExpiresAt == e.at {
			p.drop(e.deviceCode)
		}
	}
}

// drop removes a code from every index; its heap entry is left to purge.
func (p *Pairings) drop(deviceCode string) {
	got, ok := p.byDevice[deviceCode]
	if !ok {
		return
	}
	delete(p.byDevice, deviceCode)
	removeFrom(p.byIdentity, got.Device.Identity, deviceCode)
	removeFrom(p.byUser, got.UserCode, deviceCode)
}

// removeFrom takes deviceCode out of index[key], deleting an emptied key.
func removeFrom(index map[string][]string, key, deviceCode string) {
	rest := slices.DeleteFunc(index[key], func(c string) bool { return c == deviceCode })
	if len(rest) == 0 {
		delete(index, key)
	} else {
		index[key] = rest
	}
}

// expiry is when one code dies.
type expiry struct {
	at         int64
	deviceCode string
}

// expiryHeap orders codes by expiry, soonest first (container/heap).
type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
