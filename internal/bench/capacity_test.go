package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
)

// TestCapacityOneSlotLayoutLoadsOnePrimary runs the capacity scenario
// briefly on one and three primaries: jobs went through the whole per-job
// mix, every primary's CPU was read, and under the one-slot layout the
// busiest primary of three carries the work while the others only answer
// the cluster's own chatter, which is what sharding must change.
func TestCapacityOneSlotLayoutLoadsOnePrimary(t *testing.T) {
	valkeytest.RequireBinary(t)
	o := CapacityOptions{Primaries: 1, Workers: 4, Sites: 3, Duration: 300 * time.Millisecond}
	one, err := MeasureCapacity(t.Context(), o)
	require.NoError(t, err)
	require.Positive(t, one.Jobs)
	require.Len(t, one.PrimaryCPUUsPerJob, 1)
	require.Positive(t, one.ServerCPUUsPerJob)
	require.InDelta(t, 1e6/one.ServerCPUUsPerJob, one.ProjectedJobsPerSec, 1e-6)

	o.Primaries = 3
	three, err := MeasureCapacity(t.Context(), o)
	require.NoError(t, err)
	require.Equal(t, LayoutOneSlot, three.Layout)
	require.Len(t, three.PrimaryCPUUsPerJob, 3)
	loaded := 0
	for _, us := range three.PrimaryCPUUsPerJob {
		if us > three.ServerCPUUsPerJob/2 {
			loaded++
		}
	}
	require.Equal(t, 1, loaded, "one primary holds the one slot: %v", three.PrimaryCPUUsPerJob)

	_, err = MeasureCapacity(t.Context(), CapacityOptions{Primaries: 1, Sites: 1, Duration: time.Millisecond})
	require.Error(t, err)
}
