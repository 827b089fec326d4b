// Package replicas holds the tests that prove many relayd replicas sharing
// one Valkey behave as one relay: real relayd processes (internal/fleet),
// a real Valkey-protocol server or cluster (internal/valkeytest), and the
// Go site and daemons driving the full sealed lifecycle through them
// (internal/workload). It has no code of its own; see docs/replicas.md for
// what each test proves and how to run the large versions.
package replicas
