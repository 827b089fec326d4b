package replicas_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/internal/workload"
)

// shardedBuckets is the sharded layout's bucket count in these tests:
// enough that the rigs' sites and runners spread over a cluster's three
// primaries, few enough that a heartbeat's and a sweep's visits stay
// quick under -race.
const shardedBuckets = 12

// The sharded tests run the mixed workload only: it has "0" and "2" sites
// and daemons at once, so one run covers both protocols' placement (the
// "0" site's bucket, the "2" runners' groups), at a third of the time
// every protocol apart would take.

// The race of TestRace_ClusterOfThreePrimaries on the sharded layout
// (docs/sharding.md): each site's jobs in their own bucket, protocol-"2"
// admissions on their runners' groups, claims and heartbeats over
// buckets. The same promises hold: no job granted twice under live
// leases, none lost, every result collected once.
func TestSharded_RaceOnAClusterOfThreePrimaries(t *testing.T) {
	proto := workload.ProtocolMixed
	r := protoRig(t, proto, rigOptions{valkey: valkeytest.StartCluster(t), buckets: shardedBuckets})
	rep := requireClean(t, r.runWorkload(workload.Config{Protocol: proto, Jobs: sizeFor(proto, clusterJobs(t), 2), ReplayFraction: 0.1}))
	requireEveryProtocolServed(t, proto, rep)
}

// The kill -9 test on the sharded layout over a cluster of three
// primaries.
func TestSharded_Kill9OnAClusterOfThreePrimaries(t *testing.T) {
	testKill9(t, workload.ProtocolMixed, rigOptions{valkey: valkeytest.StartCluster(t), buckets: shardedBuckets})
}

// The Valkey restart test on the sharded layout over a cluster of three
// primaries: every node stopped at once, as a power cut would, and
// started again on its data and its cluster state; the cluster forms
// again, every bucket, runner group and the global tag are as they were,
// and the replicas recover by themselves.
func TestSharded_ValkeyRestartOnAClusterOfThreePrimaries(t *testing.T) {
	srv := valkeytest.StartClusterWith(t, valkeytest.ClusterOptions{Persist: true})
	testValkeyRestart(t, srv, workload.ProtocolMixed, shardedBuckets)
}

// The sharded layout spreads the rig's keys over its buckets' tags: a
// store opened on it finds the jobs of the run, and the relays' marker
// names the layout.
func TestSharded_MarkerNamesTheLayout(t *testing.T) {
	srv := valkeytest.Start(t)
	r := protoRig(t, workload.ProtocolV2, rigOptions{valkey: srv, buckets: shardedBuckets})
	requireClean(t, r.runWorkload(workload.Config{Protocol: workload.ProtocolV2, Jobs: 40}))
	c := srv.Client(t)
	marker, err := c.Do(r.ctx, c.B().Get().Key(r.prefix+"format").Build()).ToString()
	require.NoError(t, err)
	require.Regexp(t, `^[0-9]+/sharded/12/spread\+hints$`, marker)
	jobs, err := r.store().Jobs(r.ctx, 0)
	require.NoError(t, err)
	require.Len(t, jobs, 40)
}
