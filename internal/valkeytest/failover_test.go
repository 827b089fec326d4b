package valkeytest

import (
	"testing"
	"time"
)

// TestFailoverPromotesTheReplicaWithWhatWasReplicated kills the primary of
// a key's slot on a cluster with one replica per primary: another node
// takes the slot over and still holds the key, written and confirmed
// replicated (WAIT) before the kill.
func TestFailoverPromotesTheReplicaWithWhatWasReplicated(t *testing.T) {
	s := StartClusterWith(t, ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1, NodeTimeout: time.Second})
	if len(s.Addrs) != 6 {
		t.Fatalf("want 6 nodes, have %d", len(s.Addrs))
	}
	const key = "{failover}:kept"
	primary, err := s.primaryOf(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := command(t.Context(), primary, "SET", key, "v"); err != nil {
		t.Fatal(err)
	}
	if n, err := command(t.Context(), primary, "WAIT", "1", "5000"); err != nil || n != "1" {
		t.Fatalf("WAIT 1 answered %q, %v", n, err)
	}
	dead := s.KillPrimaryOf(t, key)
	if dead != primary {
		t.Fatalf("killed %s, the primary was %s", dead, primary)
	}
	now := s.WaitFailover(t, key, dead, 30*time.Second)
	if now == dead {
		t.Fatalf("the slot is still on %s", dead)
	}
	if v, err := command(t.Context(), now, "GET", key); err != nil || v != "v" {
		t.Fatalf("after failover to %s, GET answered %q, %v", now, v, err)
	}
	// The old primary comes back as the new one's replica, and WAIT is
	// answered again.
	s.RestartNode(t, dead)
	if _, err := command(t.Context(), now, "SET", key, "w"); err != nil {
		t.Fatal(err)
	}
	if n, err := command(t.Context(), now, "WAIT", "1", "5000"); err != nil || n != "1" {
		t.Fatalf("WAIT 1 on the new primary answered %q, %v", n, err)
	}
	if v, err := command(t.Context(), dead, "GET", key); err == nil || v == "w" {
		// A replica answers a read of its primary's slot with MOVED.
		t.Fatalf("the restarted node answered GET itself (%q): it is not a replica", v)
	}
}
