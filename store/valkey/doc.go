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
// in schema.go; the loader generates its Lua definitions into the
// library's top level, before the helpers, and each operation's function
// binds its keys at entry.
//
// # Two layouts
//
// Store is the one-slot layout: every key under the prefix's one hash
// tag, every method one script. Sharded (sharded.go, docs/sharding.md) is
// the site-sharded layout: buckets that are each a whole Store under a
// tag of its own, runner groups and a global tag on one client, so that a
// cluster spreads one relay over its primaries; a job's life is still one
// bucket's scripts, and what spans buckets is a sequence of them.
//
// # One Functions library per build
//
// The scripts are not sent one by one but loaded as one Valkey Functions
// library (FUNCTION LOAD; functions.go) in which each operation is a
// function, called by FCALL or FCALL_RO: the helpers are then defined once
// per load, not again on every call, which was about a fifth of a job's
// server time (docs/performance.md). A library is server state, managed
// here: its name and its functions' names carry a digest of its text, so
// two relay versions of a rolling upgrade each load and call their own;
// it is loaded on every node at open, and again by the first call that
// finds its function missing (a server restored or restarted without it,
// a node that took a slot over, FUNCTION FLUSH), which is then sent again.
// Replicas get it from their primary. An operator deletes the libraries
// of versions no longer running (docs/operations.md). Redis 7.0 has
// Functions too.
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
