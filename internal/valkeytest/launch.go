package valkeytest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// clusterArgs make a started node a cluster node that takes a silent
// primary for failed after nodeTimeout.
func clusterArgs(nodeTimeout time.Duration) []string {
	return []string{"--cluster-enabled", "yes", "--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10)}
}

// defaultNodeTimeout is the clusters' cluster-node-timeout unless a test
// asks for another (ClusterOptions.NodeTimeout).
const defaultNodeTimeout = 5 * time.Second

// Launch starts a cluster of the given number of primaries (no replicas)
// from the preferred server binary on PATH, outside any test: for the
// benchmarks, which measure each primary's CPU. One primary is a cluster
// of one node owning every slot, so that each count runs the same client
// code. Its files go under dir; Close stops it.
func Launch(ctx context.Context, dir string, primaries int) (*Server, error) {
	if primaries < 1 {
		return nil, fmt.Errorf("valkeytest: a cluster of %d primaries", primaries)
	}
	bin := serverBinary()
	if bin == "" {
		return nil, errors.New("valkeytest: no valkey-server or redis-server on PATH")
	}
	s := &Server{Cluster: true, Source: "binary"}
	for range primaries {
		p, err := launch(dir, bin, Options{}, clusterArgs(defaultNodeTimeout))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("valkeytest: starting %s: %w", bin, err)
		}
		s.procs = append(s.procs, p)
		s.Addrs = append(s.Addrs, p.addr)
	}
	s.Addr = s.Addrs[0]
	if err := formCluster(ctx, s.Addrs); err != nil {
		s.Close()
		return nil, fmt.Errorf("valkeytest: forming a cluster of %d: %w", primaries, err)
	}
	return s, nil
}

// Close stops the nodes this package started (a server from VALKEY_ADDR
// or Docker is left alone: its test's cleanup stops it).
func (s *Server) Close() {
	for _, p := range s.procs {
		p.stop()
	}
}

// RequireBinary skips t (or fails it in CI) unless Launch can find a
// server binary on PATH.
func RequireBinary(t testing.TB) {
	t.Helper()
	if serverBinary() == "" {
		unavailable(t, "a Valkey-protocol server binary for Launch")
	}
}
