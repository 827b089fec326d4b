// Package clock provides an injectable source of time, so that code which
// stamps or compares deadlines can be driven by a manual clock in tests.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock reports the current time.
type Clock interface {
	Now() time.Time
}

// System is the real wall clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// UnixMilli returns c's current time as milliseconds since the epoch, the
// unit every wire timestamp uses.
func UnixMilli(c Clock) int64 { return c.Now().UnixMilli() }

// Manual is a clock that moves only when told to. It is safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a manual clock set to start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock forward by d (or back, for a negative d).
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
}

// Set moves the clock to t.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = t
}

// Offset is a clock that runs a fixed distance from another clock; tests use
// it to give one replica a skewed local clock.
type Offset struct {
	Base  Clock
	Delta time.Duration
}

// Now returns the base clock's time plus Delta.
func (o Offset) Now() time.Time { return o.Base.Now().Add(o.Delta) }

// Sleep waits d, or until ctx ends, whichever comes first; it returns
// ctx's error when it was cut short. Pollers use it so that a cancelled
// caller never waits out a whole interval.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
