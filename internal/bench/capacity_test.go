package bench

import (
	"strconv"
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

// TestCapacityBucketsBoundSpreadsOverPrimaries runs the bound of a
// site-sharded layout on three primaries: the sites' buckets sit in slots
// of different primaries, so more than one primary carries the work.
func TestCapacityBucketsBoundSpreadsOverPrimaries(t *testing.T) {
	requireSpread(t, CapacityOptions{Layout: LayoutBucketsBound, Primaries: 3, Workers: 6, Sites: 6, Buckets: 12, Duration: 300 * time.Millisecond})
}

// TestCapacityShardedSpreadsOverPrimaries: the store's sharded layout,
// the protocol-"2" mix, spreads over the primaries as its bound does.
func TestCapacityShardedSpreadsOverPrimaries(t *testing.T) {
	requireSpread(t, CapacityOptions{Layout: LayoutSharded, Protocol: 2, Primaries: 3, Workers: 6, Sites: 6, Buckets: 12, Duration: 300 * time.Millisecond})
}

// requireSpread runs o and asserts that more than one primary carried a
// fair share of the work.
func requireSpread(t *testing.T, o CapacityOptions) {
	t.Helper()
	valkeytest.RequireBinary(t)
	c, err := MeasureCapacity(t.Context(), o)
	require.NoError(t, err)
	require.Equal(t, o.Layout, c.Layout)
	require.Equal(t, 12, c.Buckets)
	require.Equal(t, strconv.Itoa(o.Protocol), c.Protocol)
	require.Positive(t, c.Jobs)
	loaded := 0
	for _, us := range c.PrimaryCPUUsPerJob {
		if us > c.ServerCPUUsPerJob/4 {
			loaded++
		}
	}
	require.Greater(t, loaded, 1, "the buckets spread over the primaries: %v", c.PrimaryCPUUsPerJob)
}

// TestBucketOfIsStableAndInRange: a site always lands in the same bucket,
// one of the n.
func TestBucketOfIsStableAndInRange(t *testing.T) {
	seen := map[int]bool{}
	for i := range 200 {
		site := "site-" + strconv.Itoa(i)
		b := bucketOf(site, 16)
		require.Equal(t, b, bucketOf(site, 16))
		require.GreaterOrEqual(t, b, 0)
		require.Less(t, b, 16)
		seen[b] = true
	}
	require.Len(t, seen, 16, "200 sites reach every one of 16 buckets")
	require.Zero(t, bucketOf("any", 1))
}

func TestCapacityRefusesWhatNoLayoutRuns(t *testing.T) {
	_, err := MeasureCapacity(t.Context(), CapacityOptions{Layout: LayoutBucketsBound, Primaries: 1, Workers: 1, Sites: 1, Buckets: -1})
	require.ErrorContains(t, err, "bucket")
	_, err = MeasureCapacity(t.Context(), CapacityOptions{Layout: LayoutSharded, Primaries: 1, Workers: 1, Sites: 1, Buckets: 4})
	require.ErrorContains(t, err, "protocol 2")
	_, err = MeasureCapacity(t.Context(), CapacityOptions{Layout: "striped", Primaries: 1, Workers: 1, Sites: 1, Buckets: 4})
	require.ErrorContains(t, err, "unknown layout")
}
