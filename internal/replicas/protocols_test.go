package replicas_test

import (
	"testing"

	"github.com/byollm/relayd/internal/workload"
)

// The protocols every workload test runs under: "0" (the alpha.24
// clients), "2" (every published client) and mixed, where "0" and "2"
// sites and daemons share the relay at once.
var protocols = []string{workload.ProtocolV0, workload.ProtocolV2, workload.ProtocolMixed}

// eachProtocol runs test once per protocol, as a subtest named after it.
func eachProtocol(t *testing.T, test func(t *testing.T, proto string)) {
	for _, proto := range protocols {
		t.Run("protocol="+proto, func(t *testing.T) { test(t, proto) })
	}
}

// extraSites is how many sites beyond the main one a protocol's rig
// registers: "2" routes for every site, so its runs publish the same job
// ids from two sites at once.
func extraSites(proto string) int {
	if proto == workload.ProtocolV0 {
		return 0
	}
	return 1
}

// sizeFor scales a "0" test's job count for "2" and mixed. They run the
// same test again, so a fraction of the jobs keeps the added time modest
// (docs/replicas.md has the timings); the env variables still raise all.
func sizeFor(proto string, n, fraction int) int {
	if proto == workload.ProtocolV0 {
		return n
	}
	return max(n/fraction, 100)
}

// protoRig is a rig for a protocol's workload: "2" and mixed get an extra
// site, so that two sites publish under the same job ids.
func protoRig(t *testing.T, proto string, o rigOptions) *rig {
	t.Helper()
	o.extraSites = extraSites(proto)
	return newRig(t, o)
}
