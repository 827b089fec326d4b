package valkey

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/store/lua"
)

// The test clock lever exists only in a store opened with
// NewFromClientForTest: its scripts are built with the test clock's
// clock_now (lua.TestClock), which reads ClockKey ("<n>" adds n
// milliseconds to TIME, "@<ms>" replaces it). A production store's scripts
// read TIME alone and are not even given the key, so whoever can write it
// moves nothing.

// errNoTestClock is what TestClockOf answers for a production store.
var errNoTestClock = errors.New("valkey store: this store has no test clock: open it with NewFromClientForTest")

// withTestClock returns defs with each clock (clock_now, clock_us)
// replaced by its lever-reading twin of the test clock.
func withTestClock(defs []helper) ([]helper, error) {
	src, err := lua.TestClock()
	if err != nil {
		return nil, fmt.Errorf("valkey store: %w", err)
	}
	twins := map[string]helper{}
	for _, h := range splitHelpers(src) {
		twins[h.names[0]] = h
	}
	out := make([]helper, 0, len(defs))
	for _, d := range defs {
		if twin, ok := twins[d.names[0]]; ok && len(d.names) == 1 {
			out = append(out, twin)
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

// NewFromClientForTest is NewFromClient for tests: the store's scripts (and
// its Limiter) obey the test clock lever that its TestClock (TestClockOf)
// sets. Production code never opens a store this way.
func NewFromClientForTest(client valkey.Client, prefix string) (*Store, error) {
	return newFromClient(client, prefix, true)
}

// TestClock moves the clock of a store opened with NewFromClientForTest.
// It is kept off Store so that the production store carries no test
// levers. For tests only.
type TestClock struct{ s *Store }

// TestClockOf returns the test clock of s, or errNoTestClock when s is a
// production store, whose scripts ignore the lever.
func TestClockOf(s *Store) (*TestClock, error) {
	if !s.testClock {
		return nil, errNoTestClock
	}
	return &TestClock{s: s}, nil
}

// Pin stops the store's clock at its current reading, so tests can assert
// exact stamps.
func (c *TestClock) Pin(ctx context.Context) error {
	now, err := c.s.Now(ctx)
	if err != nil {
		return err
	}
	return c.set(ctx, "@"+strconv.FormatInt(now, 10))
}

// Advance moves the store's clock forward by d, pinned or not.
func (c *TestClock) Advance(ctx context.Context, d time.Duration) error {
	client := c.s.client
	key := ClockKey(c.s.prefix)
	v, err := client.Do(ctx, client.B().Get().Key(key).Build()).ToString()
	if err != nil && !valkey.IsValkeyNil(err) {
		return fmt.Errorf("reading the test clock: %w", err)
	}
	if pinned, ok := strings.CutPrefix(v, "@"); ok {
		at, err := strconv.ParseInt(pinned, 10, 64)
		if err != nil {
			return fmt.Errorf("reading the test clock: %w", err)
		}
		return c.set(ctx, "@"+strconv.FormatInt(at+d.Milliseconds(), 10))
	}
	if err := client.Do(ctx, client.B().Incrby().Key(key).Increment(d.Milliseconds()).Build()).Error(); err != nil {
		return fmt.Errorf("advancing the test clock: %w", err)
	}
	return nil
}

// set writes v to the lever.
func (c *TestClock) set(ctx context.Context, v string) error {
	client := c.s.client
	if err := client.Do(ctx, client.B().Set().Key(ClockKey(c.s.prefix)).Value(v).Build()).Error(); err != nil {
		return fmt.Errorf("setting the test clock: %w", err)
	}
	return nil
}
