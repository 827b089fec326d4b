// Package valkey is the RoutingStore on Valkey (or any Valkey-protocol
// server such as Redis 7): thin Go around one Lua script per operation.
//
// Every operation is one atomic script. The scripts read the clock with
// TIME, so Valkey is the only clock: no Go clock is ever consulted for a
// deadline. Go builds the keys and arguments, generates lease ids and
// request ids, and decodes answers; it decides nothing a script should.
//
// The scripts live in store/lua, one file per operation named by its store.Op,
// with the helpers they share in sections under store/lua/common. The record schema (field
// positions, states, refusal codes, the record format) is written once,
// in schema.go; the loader generates its Lua definitions into each
// script's header, with the key bindings and only the helpers the script
// uses.
//
// # Scripts, not Functions
//
// The scripts are sent as EVALSHA, falling back to EVAL on NOSCRIPT, rather
// than loaded once as a Valkey Functions library (FUNCTION LOAD, FCALL).
// Functions would save the per-call cost of defining a script's helpers
// (a few microseconds of server time; see docs/performance.md) and do
// replicate to replicas. But a library is server state that someone must
// manage: it must be loaded on every primary, including a cluster node that
// takes over the slot later or a server restored without it; a rolling
// upgrade runs two relay versions at once, so the library name must carry
// its version and old versions must be deleted by someone. A script needs
// none of that: its digest is its version, and a server that lacks it
// (after a restart, a failover to a replica that never saw it, a reshard,
// SCRIPT FLUSH) is given it by the client within the same call. Both work
// on Redis 7.0, so support does not decide it; operating nothing does.
// Helper pruning keeps the per-call cost Functions would save small.
//
// Jobs are keyed by (site, id), since two sites may use one id, and tagged
// with the protocol they were enqueued under; each protocol has its own
// claim queues. Record format "2" keeps them under "f2:" keys; a sweep
// moves the jobs a format-"1" relay left into them (docs/operations.md).
// A marker key names the keyspace's record format; a store refuses to open
// a keyspace marked with a format it cannot read (format.go).
// Protocol 2's rules that a claim applies (the unsealed cap per route, the
// re-offer to one runner, not-before times) are kept in indexes of their
// own, so a claim's work does not grow with the jobs they hold back.
// Nor does it grow with the routes a claim names: the store keeps the set
// of routes holding work, and a claim names its route list, stored once
// under its digest (routes.go), to intersect with it in one call.
//
// All keys live under one prefix carrying a hash tag, so every call's keys
// share one slot and the store runs on standalone Valkey, Sentinel and
// Valkey Cluster alike (a cluster then gives failover, not sharding of one
// relay's routing state).
//
// Deploy with maxmemory-policy noeviction (an evicted index entry would
// lose a job) and AOF persistence. An asynchronous failover can lose the
// last writes: a job may return to an earlier state and be granted again
// under a new lease, but fencing by lease id means no result is ever
// accepted from a grant the store no longer holds.
package valkey
