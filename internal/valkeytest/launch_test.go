package valkeytest

import (
	"strconv"
	"strings"
	"testing"
)

// TestLaunchFormsClustersOfOneAndThree starts each size outside a test's
// cleanup, as the benchmarks do: every node reports a healthy cluster of
// that size, and Close stops them all.
func TestLaunchFormsClustersOfOneAndThree(t *testing.T) {
	RequireBinary(t)
	for _, n := range []int{1, 3} {
		s, err := Launch(t.Context(), t.TempDir(), n)
		if err != nil {
			t.Fatalf("Launch(%d): %v", n, err)
		}
		if len(s.Addrs) != n || !s.Cluster {
			s.Close()
			t.Fatalf("Launch(%d) gave %d nodes, cluster %v", n, len(s.Addrs), s.Cluster)
		}
		for _, a := range s.Addrs {
			info, err := command(t.Context(), a, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_size:"+strconv.Itoa(n)) {
				s.Close()
				t.Fatalf("node %s of %d: %v %q", a, n, err, info)
			}
		}
		s.Close()
		for _, a := range s.Addrs {
			if _, err := command(t.Context(), a, "PING"); err == nil {
				t.Fatalf("node %s still answers after Close", a)
			}
		}
	}
	if _, err := Launch(t.Context(), t.TempDir(), 0); err == nil {
		t.Fatal("Launch(0) started something")
	}
}
