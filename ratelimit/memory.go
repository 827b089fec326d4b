package ratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/byollm/relayd/clock"
)

// Memory is a Limiter holding its buckets in this process, on an
// injectable clock. It is safe for concurrent use.
type Memory struct {
	rate  Rate
	clock clock.Clock

	mu sync.Mutex
	// full holds, per key, the instant its bucket is full again. A key
	// whose instant has passed is the same as no key, and is pruned.
	full      map[string]time.Time
	nextPrune time.Time
}

var _ Limiter = (*Memory)(nil)

// NewMemory returns an in-process limiter of rate on clock c.
func NewMemory(rate Rate, c clock.Clock) (*Memory, error) {
	if err := rate.Validate(); err != nil {
		return nil, err
	}
	if !rate.Enabled() {
		return nil, ErrDisabled
	}
	return &Memory{rate: rate, clock: c, full: map[string]time.Time{}}, nil
}

// Allow implements Limiter.
func (m *Memory) Allow(_ context.Context, key string) (Decision, error) {
	if key == "" {
		return Decision{}, ErrEmptyKey
	}
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prune(now)
	full, ok := m.full[key]
	if !ok || full.Before(now) {
		full = now
	}
	if wait := full.Sub(now) - m.rate.slack(); wait > 0 {
		return Decision{RetryAfter: wait}, nil
	}
	m.full[key] = full.Add(m.rate.Every)
	return Decision{Allowed: true}, nil
}

// prune drops the buckets that are full again, at most once per time a
// bucket takes to fill, so memory follows the callers active lately and
// the cost of a pass is spread over the requests in between.
func (m *Memory) prune(now time.Time) {
	if now.Before(m.nextPrune) {
		return
	}
	for k, full := range m.full {
		if !full.After(now) {
			delete(m.full, k)
		}
	}
	m.nextPrune = now.Add(time.Duration(m.rate.Burst) * m.rate.Every)
}

// size is how many buckets are held, for tests.
func (m *Memory) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.full)
}
