package valkeytest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ClusterOptions shapes a binary-started cluster.
type ClusterOptions struct {
	// Primaries is the number of primaries (3 when zero).
	Primaries int
	// ReplicasPerPrimary gives each primary that many replicas, which
	// replicate asynchronously, as Valkey does by default.
	ReplicasPerPrimary int
	// NodeTimeout is cluster-node-timeout: how long a primary may be
	// unreachable before its replica takes over (5 s when zero).
	NodeTimeout time.Duration
	// Persist gives every node AOF persistence, as Options.Persist does,
	// so that Stop and Restart keep the cluster's data.
	Persist bool
}

// StartClusterWith returns a cluster shaped by o for t, always started
// from the server binary on PATH (VALKEY_CLUSTER_ADDRS, which StartCluster
// honours, names a cluster of its own shape). Addrs lists the primaries
// first.
func StartClusterWith(t testing.TB, o ClusterOptions) *Server {
	t.Helper()
	if o.Primaries == 0 {
		o.Primaries = 3
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = defaultNodeTimeout
	}
	bin := serverBinary()
	if bin == "" {
		unavailable(t, "a Valkey-protocol server binary to build a cluster from")
		return nil
	}
	s := &Server{Cluster: true, Source: "binary"}
	for range o.Primaries * (1 + o.ReplicasPerPrimary) {
		p := startProcess(t, bin, Options{Persist: o.Persist}, clusterArgs(o.NodeTimeout))
		s.procs = append(s.procs, p)
		s.Addrs = append(s.Addrs, p.addr)
	}
	s.Addr = s.Addrs[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := formWithReplicas(ctx, s.Addrs, o.Primaries); err != nil {
		t.Fatalf("valkeytest: forming a cluster: %v", err)
	}
	return s
}

// formWithReplicas gives the first primaries nodes of addrs the slots and
// makes each later node a replica of one of them, in turn, then waits
// until every replica's link to its primary is up.
func formWithReplicas(ctx context.Context, addrs []string, primaries int) error {
	if err := formCluster(ctx, addrs[:primaries]); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(addrs[0])
	if err != nil {
		return err
	}
	for _, a := range addrs[primaries:] {
		if _, err := command(ctx, a, "CLUSTER", "MEET", host, port); err != nil {
			return fmt.Errorf("CLUSTER MEET from %s: %w", a, err)
		}
	}
	if err := waitClusterOK(ctx, addrs, 30*time.Second); err != nil {
		return err
	}
	for i, a := range addrs[primaries:] {
		id, err := command(ctx, addrs[i%primaries], "CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("CLUSTER MYID on %s: %w", addrs[i%primaries], err)
		}
		if _, err := command(ctx, a, "CLUSTER", "REPLICATE", id); err != nil {
			return fmt.Errorf("CLUSTER REPLICATE on %s: %w", a, err)
		}
	}
	for _, a := range addrs[primaries:] {
		if err := waitFor(ctx, 30*time.Second, func() bool {
			info, err := command(ctx, a, "INFO", "replication")
			return err == nil && strings.Contains(info, "master_link_status:up")
		}); err != nil {
			return fmt.Errorf("replica %s never linked to its primary: %w", a, err)
		}
	}
	return nil
}

// KillPrimaryOf kills (SIGKILL) the primary serving key's slot and returns
// its address. Its replica takes over once NodeTimeout has passed; see
// WaitFailover.
func (s *Server) KillPrimaryOf(t testing.TB, key string) string {
	t.Helper()
	addr, err := s.primaryOf(context.Background(), key)
	if err != nil {
		t.Fatalf("valkeytest: finding the primary of %q: %v", key, err)
	}
	for _, p := range s.procs {
		if p.addr == addr {
			p.stop()
			return addr
		}
	}
	t.Fatalf("valkeytest: the primary %s of %q was not started here", addr, key)
	return ""
}

// WaitFailover waits until a node other than dead serves key's slot as a
// primary and the surviving nodes report the cluster healthy.
func (s *Server) WaitFailover(t testing.TB, key, dead string, within time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var now string
	err := waitFor(ctx, within, func() bool {
		addr, err := s.primaryOf(ctx, key, dead)
		if err != nil || addr == dead {
			return false
		}
		info, err := command(ctx, addr, "CLUSTER", "INFO")
		now = addr
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
	if err != nil {
		t.Fatalf("valkeytest: no failover of %q's slot from %s within %s: %v", key, dead, within, err)
	}
	return now
}

// primaryOf asks a live node (not one of skip) which node is the primary
// for key's slot, from CLUSTER NODES.
func (s *Server) primaryOf(ctx context.Context, key string, skip ...string) (string, error) {
	var last error
	for _, a := range s.Addrs {
		if slices.Contains(skip, a) {
			continue
		}
		slotText, err := command(ctx, a, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			last = err
			continue
		}
		slot, err := strconv.Atoi(slotText)
		if err != nil {
			return "", fmt.Errorf("CLUSTER KEYSLOT answered %q", slotText)
		}
		nodes, err := command(ctx, a, "CLUSTER", "NODES")
		if err != nil {
			last = err
			continue
		}
		if addr, ok := servingPrimary(nodes, slot); ok {
			return addr, nil
		}
		last = fmt.Errorf("%s knows no live primary for slot %d", a, slot)
	}
	return "", last
}

// servingPrimary finds, in a CLUSTER NODES reply, the live primary whose
// slot ranges hold slot.
func servingPrimary(nodes string, slot int) (string, bool) {
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && l <= slot && slot <= h {
				addr, _, _ := strings.Cut(f[1], "@")
				return addr, true
			}
		}
	}
	return "", false
}

// waitFor polls ok every 50 ms until it holds or within has passed.
func waitFor(ctx context.Context, within time.Duration, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// RestartNode starts the node at addr, killed by KillPrimaryOf, again on
// its port and its cluster state file: it rejoins the cluster as a
// replica of the primary that took its slots over, as a restarted pod
// would.
func (s *Server) RestartNode(t testing.TB, addr string) {
	t.Helper()
	for _, p := range s.procs {
		if p.addr != addr {
			continue
		}
		if err := p.restart(); err != nil {
			t.Fatalf("valkeytest: restarting %s: %v", addr, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := waitFor(ctx, 30*time.Second, func() bool {
			info, err := command(ctx, addr, "INFO", "replication")
			return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
		}); err != nil {
			t.Fatalf("valkeytest: %s did not rejoin as a replica: %v", addr, err)
		}
		return
	}
	t.Fatalf("valkeytest: no node at %s was started here", addr)
}
