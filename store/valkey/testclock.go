package valkey

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"
)

// The scripts read Valkey TIME and then add the test clock lever kept at
// ClockKey: "<n>" adds n milliseconds to TIME, "@<ms>" replaces it. Only
// tests set it; production never does, and an absent key changes nothing.

// PinClockForTest stops this store's clock at its current reading, so tests
// can assert exact stamps. For tests only.
func (s *Store) PinClockForTest(ctx context.Context) error {
	now, err := s.Now(ctx)
	if err != nil {
		return err
	}
	return s.setClockLever(ctx, "@"+strconv.FormatInt(now, 10))
}

// AdvanceClockForTest moves this store's clock forward by d, pinned or not.
// For tests only.
func (s *Store) AdvanceClockForTest(ctx context.Context, d time.Duration) error {
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
