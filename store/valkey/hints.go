package valkey

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/byollm/relayd/store"
)

// Route hints let a protocol-"2" claim over routes in several buckets
// visit only the buckets where its routes' owners may have work
// (docs/sharding.md, "Route hints"). An owner's hints are a sorted set of
// buckets on the owner's group, each scored by the store time until which
// the owner may have a job there that is not finished: a job is gone at
// its deadline (deadlineAt, a time the site gives), so an enqueue raises
// its bucket's hint to that deadline and hintMarginMs before it enqueues.
//
// A hint written ahead of every enqueue and kept past every deadline
// means a claim never misses a bucket where its routes have a live job;
// a hint left by an enqueue that did not land, or by jobs that finished
// early, costs each claim reading it one empty call to that bucket, which
// answers from its index of busy routes, until the hint's time passes.

// opHinted reads an owner's route hints (hinted.lua); held.lua writes
// them, as it writes a runner's list.
const opHinted store.Op = "hinted"

// hintMarginMs pads a hint past the deadline it covers: the deadline is
// judged on the bucket's primary's clock and the hint on the owner
// group's, and an enqueue lands after its hint was written.
const hintMarginMs = heldMarginMs

// hintQuantumMs is how far past what it needs an enqueue raises a hint,
// so that each replica writes a busy route's hint about once per quantum
// rather than once per job: later enqueues whose deadlines it covers find
// it in the replica's memory of hints it wrote (hintCache).
const hintQuantumMs = 10_000

// rememberedHints bounds a replica's memory of the hints it wrote.
const rememberedHints = 65536

// hintKey names one owner's hint for one bucket.
type hintKey struct {
	owner  string
	bucket int
}

// hintCache remembers, per owner and bucket, the time a hint this
// replica wrote was confirmed to hold until. Skipping a write it covers
// is safe without a clock: the store drops an entry only once its time
// is past, and then the deadline of any job it would have covered is past
// too. Emptied when full.
type hintCache struct {
	mu    sync.Mutex
	until map[hintKey]int64
}

func newHintCache() *hintCache { return &hintCache{until: map[hintKey]int64{}} }

// covers says whether a hint written by this replica holds until at
// least need.
func (c *hintCache) covers(k hintKey, need int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.until[k] >= need
}

// raise remembers that k's hint holds until at least until.
func (c *hintCache) raise(k hintKey, until int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.until) >= rememberedHints {
		clear(c.until)
	}
	c.until[k] = max(c.until[k], until)
}

// hintsKey is the key, under an owner's group, of the owner's hints.
func hintsKey(owner string) string { return "hint:" + owner }

// hintAhead writes the hint of a protocol-"2" enqueue's route before the
// enqueue runs, unless this replica already wrote one that covers the
// job's deadline. An enqueue whose hint cannot be written does not run:
// its job could be missed by every claim that reads hints.
func (s *Sharded) hintAhead(ctx context.Context, in store.EnqueueInput) error {
	if s.noHints || in.Proto != store.Proto2 {
		return nil
	}
	k := hintKey{owner: in.Stub.Owner, bucket: s.BucketOf(in.SiteID)}
	need := in.Stub.DeadlineAt + hintMarginMs
	if s.hints.covers(k, need) {
		return nil
	}
	until := need + hintQuantumMs
	g := s.runner(k.owner)
	if _, _, err := s.keepBuckets(ctx, g, hintsKey(k.owner), k.owner, nil, nil, map[int]int64{k.bucket: until}); err != nil {
		return fmt.Errorf("valkey store: enqueue: the route hint of owner %s: %w", k.owner, err)
	}
	s.hints.raise(k, until)
	return nil
}

// hintedRoutes narrows a claim's routes, grouped by bucket, to the
// buckets where their owners' hints are live. Hints are read one call
// per owner, so a claim whose routes span no more buckets than they have
// owners (one bucket, above all) reads none: visiting the buckets costs
// what reading them would. If a hint cannot be read, the routes stay as
// they are: a hint saves calls and never decides which jobs exist.
func (s *Sharded) hintedRoutes(ctx context.Context, routes map[int][]store.Route) map[int][]store.Route {
	if s.noHints || len(routes) < 2 {
		return routes
	}
	owners := []string{}
	for _, rs := range routes {
		for _, r := range rs {
			owners = append(owners, r.Owner)
		}
	}
	slices.Sort(owners)
	owners = slices.Compact(owners)
	if len(owners) >= len(routes) {
		// A read per owner would cost as many calls as it could save.
		return routes
	}
	live := map[hintKey]bool{}
	for _, o := range owners {
		g := s.runner(o)
		hinted, _, err := s.onBucketSet(ctx, g, g.newCall(hintedArgs{}), hintsKey(o))
		if err != nil {
			return routes
		}
		for _, b := range hinted {
			live[hintKey{owner: o, bucket: b}] = true
		}
	}
	out := map[int][]store.Route{}
	for b, rs := range routes {
		for _, r := range rs {
			if live[hintKey{owner: r.Owner, bucket: b}] {
				out[b] = append(out[b], r)
			}
		}
	}
	return out
}
