package valkey

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"
)

// The test clock lever exists only in a store opened with
// NewFromClientForTest: its scripts are built with testclock.lua's
// clock_now, which reads ClockKey ("<n>" adds n milliseconds to TIME,
// "@<ms>" replaces it). A production store's scripts read TIME alone and
// are not even given the key, so whoever can write it moves nothing.

//go:embed testclock.lua
var testClockLua string

// errNoTestClock is what the test clock helpers answer on a production store.
var errNoTestClock = errors.New("valkey store: this store has no test clock: open it with NewFromClientForTest")

// withTestClock returns defs with each clock (clock_now, clock_us)
// replaced by its lever-reading twin of testclock.lua.
func withTestClock(defs []helper) []helper {
	twins := map[string]helper{}
	for _, h := range splitHelpers(testClockLua) {
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
	return out
}

// NewFromClientForTest is NewFromClient for tests: the store's scripts (and
// its Limiter) obey the test clock lever that PinClockForTest and
// AdvanceClockForTest set. Production code never opens a store this way.
func NewFromClientForTest(client valkey.Client, prefix string) (*Store, error) {
	return newFromClient(client, prefix, true)
}

// PinClockForTest stops this store's clock at its current reading, so tests
// can assert exact stamps. For tests only.
func (s *Store) PinClockForTest(ctx context.Context) error {
	if !s.testClock {
		return errNoTestClock
	}
	now, err := s.Now(ctx)
	if err != nil {
		return err
	}
	return s.setClockLever(ctx, "@"+strconv.FormatInt(now, 10))
}

// AdvanceClockForTest moves this store's clock forward by d, pinned or not.
// For tests only.
func (s *Store) AdvanceClockForTest(ctx context.Context, d time.Duration) error {
	if !s.testClock {
		return errNoTestClock
	}
	key := ClockKey(s.prefix)
	v, err := s.client.Do(ctx, s.client.B().Get().Key(key).Build()).ToString()
	if err != nil && !valkey.IsValkeyNil(err) {
		return fmt.Errorf("reading the test clock: %w", err)
	}
	if pinned, ok := strings.CutPrefix(v, "@"); ok {
		at, err := strconv.ParseInt(pinned, 10, 64)
		if err != nil {
			return fmt.Errorf("reading the test clock: %w", err)
		}
		return s.setClockLever(ctx, "@"+strconv.FormatInt(at+d.Milliseconds(), 10))
	}
	if err := s.client.Do(ctx, s.client.B().Incrby().Key(key).Increment(d.Milliseconds()).Build()).Error(); err != nil {
		return fmt.Errorf("advancing the test clock: %w", err)
	}
	return nil
}

func (s *Store) setClockLever(ctx context.Context, v string) error {
	if err := s.client.Do(ctx, s.client.B().Set().Key(ClockKey(s.prefix)).Value(v).Build()).Error(); err != nil {
		return fmt.Errorf("setting the test clock: %w", err)
	}
	return nil
}
