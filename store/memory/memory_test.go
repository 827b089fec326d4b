package memory_test

import (
	"testing"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/store/memory"
	"github.com/byollm/relayd/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		c := clock.NewManual(time.UnixMilli(1_750_000_000_000))
		return storetest.Harness{
			Store:   memory.New(c),
			Advance: func(_ *testing.T, d time.Duration) { c.Advance(d) },
		}
	})
}
