package memory_test

import (
	"testing"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
	"github.com/byollm/relayd/store/storetest"
)

func TestPairingsContract(t *testing.T) {
	storetest.RunPairings(t, func(t *testing.T) storetest.PairingsHarness {
		c := clock.NewManual(time.UnixMilli(1_750_000_000_000))
		return storetest.PairingsHarness{
			Pairings: memory.NewPairings(c),
			Now:      func(*testing.T) int64 { return clock.UnixMilli(c) },
			Advance:  func(_ *testing.T, d time.Duration) { c.Advance(d) },
		}
	})
}

func BenchmarkPairings(b *testing.B) {
	storetest.BenchPairings(b, []int{100, 10_000, 100_000}, func(*testing.B) store.Pairings {
		return memory.NewPairings(clock.NewManual(time.UnixMilli(1_750_000_000_000)))
	})
}
