package memory_test

import (
	"testing"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/ratelimit/limitertest"
	"github.com/byollm/relayd/store/memory"
	"github.com/byollm/relayd/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		c := clock.NewManual(time.UnixMilli(1_750_000_000_000))
		s := memory.New(c)
		return storetest.Harness{
			Store:   s,
			Advance: func(_ *testing.T, d time.Duration) { c.Advance(d) },
			Allow:   limitertest.Allower(s.Limiter),
		}
	})
}
