package valkey

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// Sharded is the site-sharded RoutingStore of docs/sharding.md: a fixed
// number of buckets, each a whole one-slot store under its own hash tag,
// all on one client, so that a Valkey Cluster spreads the buckets over
// its primaries. Every job operation is one atomic script in its site's
// bucket, on that bucket's TIME; what spans buckets (a claim over many
// sites, a runner's heartbeat, the admin reads) is a sequence of such
// steps. Beside the buckets: runner groups, where a protocol-"2" runner's
// presence, rate bucket and list of buckets live, and the global tag,
// where pending pairings and the index of runners live. Protocol "0"
// lives whole in the bucket of the relay's protocol-"0" site, so its
// calls stay one script each.
//
// It is safe for concurrent use.
type Sharded struct {
	client  valkey.Client
	owned   bool
	base    string
	buckets []*Store
	runners []*Store
	global  *Store
	// proto0Site is the protocol-"0" site, in whose bucket protocol "0"
	// lives whole.
	proto0Site string
	// turn rotates where a claim over several buckets starts, so that
	// no bucket's work waits behind another's.
	turn atomic.Uint32
	// place, when set (by tests), puts sites in buckets instead of their
	// hash.
	place func(siteID string) int
	// indexed remembers the runners this replica has put in the global
	// index of runners, so that a presence stamp adds one call only once.
	indexed *seenSet
	// hints remembers the route hints this replica wrote (hints.go);
	// noHints, set by Sharding.NoRouteHints, writes and reads none.
	hints   *hintCache
	noHints bool
	// visits counts the bucket calls protocol-"2" claims made, which
	// the tests and the benchmark of route hints read.
	visits atomic.Int64
}

var _ store.RoutingStore = (*Sharded)(nil)

// Sharding says how a sharded keyspace is laid out.
type Sharding struct {
	// Buckets is the number of buckets (0 means DefaultBuckets); it is
	// fixed when the keyspace is made, and recorded in its marker.
	Buckets int
	// Proto0Site is the relay's protocol-"0" site (--site-id): every
	// protocol-"0" job, presence and rate bucket lives in its bucket.
	Proto0Site string
	// NoRouteHints makes a new keyspace one whose protocol-"2" claims
	// visit each bucket of their routes, writing and reading no route
	// hints: what the hints save is measured against it. The keyspace's
	// marker records the choice, and every relay opening it follows the
	// marker, whatever it was given.
	NoRouteHints bool
}

// heldMarginMs pads the time until which a runner's list of buckets
// keeps a bucket it was granted a job in: the job's deadline is judged on
// that bucket's primary's clock and the list's expiry on the runner
// group's, and a claim in flight when the list is read must find its
// bucket still there.
const heldMarginMs = int64(time.Minute / time.Millisecond)

// NewSharded connects to Valkey and opens the sharded layout under
// o.KeyPrefix (which must hold exactly one hash tag): it claims the
// keyspace's marker for this layout, or refuses one of another layout
// or bucket count.
func NewSharded(ctx context.Context, o Options, sh Sharding) (*Sharded, error) {
	client, err := o.dial()
	if err != nil {
		return nil, err
	}
	s, err := newSharded(client, cmp.Or(o.KeyPrefix, DefaultPrefix), sh, false)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.owned = true
	for _, st := range s.stores() {
		st.onRetry = o.OnRetry
		if o.WaitReplicas > 0 {
			st.replication = replication{replicas: int64(o.WaitReplicas), timeout: cmp.Or(o.WaitTimeout, DefaultWaitTimeout)}
		}
	}
	if o.ResultsCacheBytes != 0 {
		s.shareResults(newResultsCache(max(o.ResultsCacheBytes, 0)))
	}
	if o.Logger != nil {
		s.buckets[0].results.logger = o.Logger
	}
	if err := s.open(ctx); err != nil {
		client.Close()
		return nil, err
	}
	return s, nil
}

// NewShardedForTest is NewSharded on an existing client for tests: every
// group's scripts obey the test clock lever (ShardedTestClockOf), and
// the marker is claimed at once. The caller keeps the client.
func NewShardedForTest(ctx context.Context, client valkey.Client, prefix string, sh Sharding) (*Sharded, error) {
	s, err := newSharded(client, prefix, sh, true)
	if err != nil {
		return nil, err
	}
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func newSharded(client valkey.Client, prefix string, sh Sharding, testClock bool) (*Sharded, error) {
	n := cmp.Or(sh.Buckets, DefaultBuckets)
	if n < 1 || n > MaxBuckets {
		return nil, fmt.Errorf("valkey store: %d buckets: the sharded layout takes 1 to %d", n, MaxBuckets)
	}
	tags, err := splitTag(prefix)
	if err != nil {
		return nil, err
	}
	scripts, err := buildScripts(testClock)
	if err != nil {
		return nil, err
	}
	s := &Sharded{client: client, base: prefix, proto0Site: sh.Proto0Site, indexed: newSeenSet(rememberedRunners),
		hints: newHintCache(), noHints: sh.NoRouteHints}
	for i := range n {
		b := onScripts(client, tags.bucketPrefix(i, n), scripts, testClock)
		b.marksLeases, b.leaseByte = true, byte(i)
		s.buckets = append(s.buckets, b)
		s.runners = append(s.runners, onScripts(client, tags.runnerPrefix(i, n), scripts, testClock))
	}
	s.global = onScripts(client, tags.globalPrefix(), scripts, testClock)
	s.shareResults(newResultsCache(DefaultResultsCacheBytes))
	return s, nil
}

// shareResults gives every bucket one cache of results listings: a site
// lives in one bucket, and the bound is the replica's, not a bucket's.
func (s *Sharded) shareResults(c *resultsCache) {
	for _, b := range s.buckets {
		b.results = c
	}
}

// open checks the server, loads the library of scripts and claims the
// marker.
func (s *Sharded) open(ctx context.Context) error {
	if err := s.global.open(ctx); err != nil {
		return err
	}
	hinted, err := checkLayout(ctx, s.client, s.base, len(s.buckets), !s.noHints)
	s.noHints = !hinted
	return err
}

// stores lists every group's store.
func (s *Sharded) stores() []*Store {
	return slices.Concat(s.buckets, s.runners, []*Store{s.global})
}

// Buckets is the number of buckets.
func (s *Sharded) Buckets() int { return len(s.buckets) }

// BucketOf is the bucket a site's jobs live in.
func (s *Sharded) BucketOf(siteID string) int {
	if s.place != nil {
		return s.place(siteID)
	}
	return shardOf(siteID, len(s.buckets))
}

// BucketPrefix is bucket i's key prefix, whose hash tag places it.
func (s *Sharded) BucketPrefix(i int) string { return s.buckets[i].prefix }

// site is the store of a site's bucket.
func (s *Sharded) site(siteID string) *Store { return s.buckets[s.BucketOf(siteID)] }

// runner is the store of a runner's group.
func (s *Sharded) runner(runnerID string) *Store { return s.runners[shardOf(runnerID, len(s.runners))] }

// forLease is the bucket a lease id names, if it names one.
func (s *Sharded) forLease(leaseID string) (int, bool) {
	if len(leaseID) < 2 {
		return 0, false
	}
	b, err := hex.DecodeString(leaseID[:2])
	if err != nil || int(b[0]) >= len(s.buckets) {
		return 0, false
	}
	return int(b[0]), true
}

// Client returns the client the groups share. Whoever owns it still does.
func (s *Sharded) Client() valkey.Client { return s.client }

// Close closes the client if the store opened it.
func (s *Sharded) Close() error {
	if s.owned {
		s.client.Close()
	}
	return nil
}

// Ping implements store.RoutingStore.
func (s *Sharded) Ping(ctx context.Context) error { return s.global.Ping(ctx) }

// Now implements store.RoutingStore: the global tag's clock. Each job
// runs on its own bucket's.
func (s *Sharded) Now(ctx context.Context) (int64, error) { return s.global.Now(ctx) }

// Pairings returns the pending device codes, kept under the global tag.
func (s *Sharded) Pairings() store.Pairings { return s.global.Pairings() }

// ResultsCacheCounts reports the replica's one cache of results listings.
func (s *Sharded) ResultsCacheCounts() ResultsCacheCounts { return s.buckets[0].ResultsCacheCounts() }

// admitApart passes a protocol-"2" daemon call's admission on its
// runner's group before the operation runs in a bucket: the charge, then
// the presence stamp, as one script. A refusal stops the call there,
// with nothing spent and nothing stamped; once admitted, the token stays
// spent and the stamp written whatever the operation answers.
func (s *Sharded) admitApart(ctx context.Context, runnerID string, a *store.Admission) error {
	if a == nil {
		return nil
	}
	g := s.runner(runnerID)
	if a.Pair == nil {
		if a.Paired != nil || a.Charge == nil {
			return fmt.Errorf("valkey store: a protocol-\"2\" admission of runner calls carries a presence stamp and a charge only")
		}
		return chargeOn(ctx, g, *a.Charge)
	}
	if a.Paired != nil {
		return fmt.Errorf("valkey store: a protocol-\"2\" admission of runner calls carries a presence stamp and a charge only")
	}
	in := *a.Pair
	in.RunnerID, in.Admit = runnerID, &store.Admission{Charge: a.Charge}
	if _, err := g.Pair(ctx, in); err != nil {
		return err
	}
	return s.index(ctx, runnerID)
}

// chargeOn takes one request from the bucket c names under st.
func chargeOn(ctx context.Context, st *Store, c store.Charge) error {
	d, err := (&Limiter{store: st, rate: ratelimit.Rate{Every: c.Every, Burst: c.Burst}}).Allow(ctx, c.Key)
	if err != nil {
		return err
	}
	if !d.Allowed {
		return &store.Refusal{Code: store.RefusedRateLimited, RetryAfter: d.RetryAfter}
	}
	return nil
}

// Enqueue implements store.RoutingStore, in the site's bucket.
func (s *Sharded) Enqueue(ctx context.Context, in store.EnqueueInput) (store.EnqueueResult, error) {
	if err := s.hintAhead(ctx, in); err != nil {
		return store.EnqueueResult{}, err
	}
	return s.site(in.SiteID).Enqueue(ctx, in)
}

// Payload implements store.RoutingStore, in the site's bucket.
func (s *Sharded) Payload(ctx context.Context, in store.PayloadInput) error {
	return s.site(in.SiteID).Payload(ctx, in)
}

// Cancel implements store.RoutingStore, in the site's bucket.
func (s *Sharded) Cancel(ctx context.Context, in store.CancelInput) (bool, error) {
	return s.site(in.SiteID).Cancel(ctx, in)
}

// Job implements store.RoutingStore, in the site's bucket.
func (s *Sharded) Job(ctx context.Context, siteID, id string) (store.Job, bool, error) {
	return s.site(siteID).Job(ctx, siteID, id)
}

// Pending implements store.RoutingStore, in the site's bucket.
func (s *Sharded) Pending(ctx context.Context, siteID string) ([]store.Job, error) {
	return s.site(siteID).Pending(ctx, siteID)
}

// Results implements store.RoutingStore, in the site's bucket.
func (s *Sharded) Results(ctx context.Context, siteID string) ([]store.Job, error) {
	return s.site(siteID).Results(ctx, siteID)
}

// Claim implements store.RoutingStore. A protocol-"0" claim is one
// script in its bucket. A protocol-"2" claim passes its admission on the
// runner's group, writes ahead every bucket its routes live in to the
// runner's list, then claims in each of them in turn from a start that
// rotates, with what is left of Max, and lastly keeps each bucket that
// granted on the list until the latest deadline granted there. A bucket
// that cannot answer is skipped; the claim fails only when none granted
// and one failed.
func (s *Sharded) Claim(ctx context.Context, in store.ClaimInput) ([]protocol.ClaimedStub, error) {
	if in.Proto == store.Proto0 {
		return s.site(s.proto0Site).Claim(ctx, in)
	}
	routes := map[int][]store.Route{}
	for _, r := range in.Routes {
		b := s.BucketOf(r.SiteID)
		routes[b] = append(routes[b], r)
	}
	if in.Max > 0 {
		routes = s.hintedRoutes(ctx, routes)
	}
	order := slices.Sorted(maps.Keys(routes))
	if in.Max <= 0 {
		order = nil
	}
	_, now, err := s.holdBuckets(ctx, in.RunnerID, in.Admit, order, nil)
	if err != nil {
		return nil, err
	}
	if len(order) == 0 {
		return []protocol.ClaimedStub{}, nil
	}
	start := int(s.turn.Add(1) % uint32(len(order)))
	out := []protocol.ClaimedStub{}
	deadlines := map[int]int64{}
	var failed error
	for i := range order {
		left := in.Max - len(out)
		if left <= 0 {
			break
		}
		b := order[(start+i)%len(order)]
		sub := in
		sub.Routes, sub.Max, sub.Admit, sub.Touch = routes[b], left, nil, false
		s.visits.Add(1)
		got, err := s.buckets[b].Claim(ctx, sub)
		if err != nil {
			failed = cmp.Or(failed, err)
			continue
		}
		for _, c := range got {
			// Kept past a deadline the write ahead does not reach.
			if at := c.DeadlineAt + heldMarginMs; at > now+heldAheadMs {
				deadlines[b] = max(deadlines[b], at)
			}
		}
		out = append(out, got...)
	}
	if len(out) == 0 && failed != nil {
		return nil, failed
	}
	if len(deadlines) > 0 {
		// A failure here must not hide grants that exist: their buckets
		// stay listed for heldAheadMs, and a heartbeat naming a lease
		// visits its bucket whatever the list says.
		_, _, _ = s.holdBuckets(ctx, in.RunnerID, nil, nil, deadlines)
	}
	return out, nil
}

// opHeld keeps a protocol-"2" runner's list of buckets (held.lua).
const opHeld store.Op = "held"

// heldAheadMs is how long a bucket stays on a runner's list after a
// claim there: a claim writes it ahead for this long, and only a grant
// whose deadline (and heldMarginMs) lies beyond costs the claim one more
// call to keep the bucket listed that long. Longer means fewer such calls
// and more empty visits by heartbeats of runners that stopped working a
// bucket.
const heldAheadMs = int64(time.Hour / time.Millisecond)

// holdBuckets passes a runner's admission (nil admits) and writes its
// list of buckets: each of ahead until heldAheadMs past now, each of
// until until its time, never lowering what an entry holds, and drops
// the entries past. It answers the list and the runner group's now. The
// list is what a heartbeat and the runner's cancel requests visit: a
// runner can hold a grant, or a cancel request, only in a bucket that
// granted it a job whose deadline is not past.
func (s *Sharded) holdBuckets(ctx context.Context, runnerID string, a *store.Admission, ahead []int, until map[int]int64) (held []int, now int64, err error) {
	held, now, err = s.keepBuckets(ctx, s.runner(runnerID), "held:"+runnerID, runnerID, a, ahead, until)
	if err != nil {
		if store.RefusalOf(err) != "" {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("valkey store: the buckets of runner %s: %w", runnerID, err)
	}
	if a != nil && a.Pair != nil {
		err = s.index(ctx, runnerID)
	}
	return held, now, err
}

// keepBuckets runs held.lua on g over the sorted set of buckets under
// key (a runner's list, or an owner's route hints): it passes the
// admission a made by who (nil admits), raises each of ahead to
// heldAheadMs past now and each of until to its time, drops the entries
// past, and answers the buckets left and g's now.
func (s *Sharded) keepBuckets(ctx context.Context, g *Store, key, who string, a *store.Admission, ahead []int, until map[int]int64) (kept []int, now int64, err error) {
	pairs := []string{}
	for _, b := range ahead {
		pairs = append(pairs, "0", strconv.Itoa(b))
	}
	for b, at := range until {
		pairs = append(pairs, strconv.FormatInt(at, 10), strconv.Itoa(b))
	}
	c, err := g.admitted(g.newCall(heldArgs{Ahead: heldAheadMs, Pairs: pairs}), who, a)
	if err != nil {
		return nil, 0, err
	}
	return s.onBucketSet(ctx, g, c, key)
}

// onBucketSet sends c, a call of held.lua or hinted.lua, with the sorted
// set under key on g as its K.held, and reads the reply both give: g's
// now and the buckets, skipping any that names no bucket of this layout.
func (s *Sharded) onBucketSet(ctx context.Context, g *Store, c call, key string) (buckets []int, now int64, err error) {
	c.keys = append(slices.Clip(c.keys), g.prefix+key)
	parts, err := g.execWrite(ctx, c)
	if err != nil {
		return nil, 0, err
	}
	if len(parts) == 0 {
		return nil, 0, fmt.Errorf("reply without a time")
	}
	if now, err = strconv.ParseInt(parts[0], 10, 64); err != nil {
		return nil, 0, fmt.Errorf("the reply's time: %w", err)
	}
	buckets = []int{}
	for _, h := range parts[1:] {
		if b, err := strconv.Atoi(h); err == nil && b >= 0 && b < len(s.buckets) {
			buckets = append(buckets, b)
		}
	}
	return buckets, now, nil
}

// heldBuckets reads a runner's list of buckets.
func (s *Sharded) heldBuckets(ctx context.Context, runnerID string) ([]int, error) {
	held, _, err := s.holdBuckets(ctx, runnerID, nil, nil, nil)
	return held, err
}

// SettleGrants implements store.RoutingStore, in each bucket the leases
// name. A bucket that cannot answer leaves its grants held until their
// window, when they go back to the queue as plain requeues; the answer
// lists the grants the other buckets confirmed (docs/sharding.md).
func (s *Sharded) SettleGrants(ctx context.Context, in store.SettleGrantsInput) ([]protocol.LeaseRef, error) {
	parts := map[int]*store.SettleGrantsInput{}
	part := func(b int) *store.SettleGrantsInput {
		if parts[b] == nil {
			parts[b] = &store.SettleGrantsInput{RunnerID: in.RunnerID, RetryAfterMs: in.RetryAfterMs}
		}
		return parts[b]
	}
	for _, l := range in.Granted {
		if b, ok := s.forLease(l.LeaseID); ok {
			part(b).Granted = append(part(b).Granted, l)
		}
	}
	for _, l := range in.Refused {
		if b, ok := s.forLease(l.LeaseID); ok {
			part(b).Refused = append(part(b).Refused, l)
		}
	}
	for _, l := range in.Returned {
		if b, ok := s.forLease(l.LeaseID); ok {
			part(b).Returned = append(part(b).Returned, l)
		}
	}
	confirmed := map[protocol.LeaseRef]bool{}
	var failed error
	for _, b := range slices.Sorted(maps.Keys(parts)) {
		got, err := s.buckets[b].SettleGrants(ctx, *parts[b])
		if err != nil {
			failed = cmp.Or(failed, err)
			continue
		}
		for _, l := range got {
			confirmed[l] = true
		}
	}
	if len(confirmed) == 0 && failed != nil {
		return nil, failed
	}
	out := []protocol.LeaseRef{}
	for _, l := range in.Granted {
		if confirmed[l] {
			out = append(out, l)
			delete(confirmed, l)
		}
	}
	return out, nil
}

// onLease runs a lease call: in its site's bucket when it names one
// (protocol "0" always does), else, once a protocol-"2" call's admission
// passed, in the bucket its lease names, and where that finds no job
// (a lease of no bucket, or of none of this job's), in each other bucket
// on the runner's list, as the lease-first resolution falls back to the
// first job of that id the runner holds (P2-R4.1.3). Those other
// buckets can only refuse: a lease id names the bucket that granted it.
func onLease[T any](ctx context.Context, s *Sharded, in *store.LeaseInput, run func(b *Store) (T, error)) (T, error) {
	var none T
	if in.Proto == store.Proto0 {
		return run(s.site(s.proto0Site))
	}
	if err := s.admitApart(ctx, in.RunnerID, in.Admit); err != nil {
		return none, err
	}
	in.Admit, in.Touch = nil, false
	if in.SiteID != "" {
		return run(s.site(in.SiteID))
	}
	named, ok := s.forLease(in.LeaseID)
	if ok {
		v, err := run(s.buckets[named])
		if store.RefusalOf(err) != store.RefusedNotFound {
			return v, err
		}
	}
	held, err := s.heldBuckets(ctx, in.RunnerID)
	if err != nil {
		return none, err
	}
	for _, b := range held {
		if ok && b == named {
			continue
		}
		// Another bucket can only refuse this lease (a lease names the
		// bucket that granted it), so one that cannot answer is passed
		// over rather than turning a refusal into an outage.
		v, err := run(s.buckets[b])
		if code := store.RefusalOf(err); code != "" && code != store.RefusedNotFound {
			return v, err
		}
	}
	return none, store.Refuse(store.RefusedNotFound)
}

// Fetch implements store.RoutingStore.
func (s *Sharded) Fetch(ctx context.Context, in store.LeaseInput) (protocol.SealedEnvelope, error) {
	return onLease(ctx, s, &in, func(b *Store) (protocol.SealedEnvelope, error) { return b.Fetch(ctx, in) })
}

// Result implements store.RoutingStore.
func (s *Sharded) Result(ctx context.Context, in store.ResultInput) (store.ResultOutcome, error) {
	return onLease(ctx, s, &in.LeaseInput, func(b *Store) (store.ResultOutcome, error) { return b.Result(ctx, in) })
}

// byBucket splits leases by the bucket each names, in the order the
// buckets first appear; leases naming none are left out.
func (s *Sharded) byBucket(leases []protocol.LeaseRef) (order []int, parts map[int][]protocol.LeaseRef) {
	parts = map[int][]protocol.LeaseRef{}
	for _, l := range leases {
		b, ok := s.forLease(l.LeaseID)
		if !ok {
			continue
		}
		if _, seen := parts[b]; !seen {
			order = append(order, b)
		}
		parts[b] = append(parts[b], l)
	}
	return order, parts
}

// Release implements store.RoutingStore: a protocol-"2" release runs in
// each bucket its leases name, and answers in request order.
func (s *Sharded) Release(ctx context.Context, in store.ReleaseInput) ([]string, error) {
	if in.Proto == store.Proto0 {
		return s.site(s.proto0Site).Release(ctx, in)
	}
	if err := s.admitApart(ctx, in.RunnerID, in.Admit); err != nil {
		return nil, err
	}
	// A bucket answers the job ids it released, in its part's order. So
	// that each answer maps back to its leases exactly, a part never
	// names one job id twice: a second lease of that id (two sites' jobs
	// of one id in one bucket) starts another part of the bucket.
	type part struct {
		bucket int
		leases []protocol.LeaseRef
		ids    map[string]bool
	}
	parts := []*part{}
	last := map[int]*part{}
	of := make([]*part, len(in.Leases))
	for i, l := range in.Leases {
		b, ok := s.forLease(l.LeaseID)
		if !ok {
			continue
		}
		p := last[b]
		if p == nil || p.ids[l.JobID] {
			p = &part{bucket: b, ids: map[string]bool{}}
			parts, last[b] = append(parts, p), p
		}
		p.leases, p.ids[l.JobID], of[i] = append(p.leases, l), true, p
	}
	released := map[*part]map[string]bool{}
	for _, p := range parts {
		sub := in
		sub.Leases, sub.Admit, sub.Touch = p.leases, nil, false
		ids, err := s.buckets[p.bucket].Release(ctx, sub)
		if err != nil {
			return nil, err
		}
		released[p] = map[string]bool{}
		for _, id := range ids {
			released[p][id] = true
		}
	}
	out := []string{}
	for i, l := range in.Leases {
		if p := of[i]; p != nil && released[p][l.JobID] {
			out = append(out, l.JobID)
		}
	}
	return out, nil
}

// Renew implements store.RoutingStore, per bucket as Release.
func (s *Sharded) Renew(ctx context.Context, in store.RenewInput) (store.RenewResult, error) {
	if in.Proto == store.Proto0 {
		return s.site(s.proto0Site).Renew(ctx, in)
	}
	return s.renewEach(in.Leases, func(b int, leases []protocol.LeaseRef) (store.RenewResult, error) {
		sub := in
		sub.Leases = leases
		return s.buckets[b].Renew(ctx, sub)
	})
}

// renewEach renews leases bucket by bucket and answers in request order;
// a lease naming no bucket is lost.
func (s *Sharded) renewEach(leases []protocol.LeaseRef, renew func(b int, leases []protocol.LeaseRef) (store.RenewResult, error)) (store.RenewResult, error) {
	order, parts := s.byBucket(leases)
	renewed := map[protocol.LeaseRef]store.Renewal{}
	for _, b := range order {
		res, err := renew(b, parts[b])
		if err != nil {
			return store.RenewResult{}, err
		}
		// A bucket answers its leases in their order: its renewals are
		// those of its leases not lost, in turn.
		lost := map[protocol.LeaseRef]int{}
		for _, l := range res.Lost {
			lost[l]++
		}
		next := 0
		for _, l := range parts[b] {
			if lost[l] > 0 {
				lost[l]--
				continue
			}
			if next < len(res.Renewed) {
				renewed[l] = res.Renewed[next]
				next++
			}
		}
	}
	out := store.RenewResult{Renewed: []store.Renewal{}, Lost: []protocol.LeaseRef{}}
	for _, l := range leases {
		if r, ok := renewed[l]; ok {
			out.Renewed = append(out.Renewed, r)
			continue
		}
		out.Lost = append(out.Lost, l)
	}
	return out, nil
}

// CancelRequests implements store.RoutingStore: a protocol-"2" runner's
// are those of every bucket on its list.
func (s *Sharded) CancelRequests(ctx context.Context, in store.CancelRequestsInput) ([]protocol.LeaseRef, error) {
	if in.Proto == store.Proto0 {
		return s.site(s.proto0Site).CancelRequests(ctx, in)
	}
	held, err := s.heldBuckets(ctx, in.RunnerID)
	if err != nil {
		return nil, err
	}
	out := []protocol.LeaseRef{}
	var failed error
	for _, b := range held {
		got, err := s.buckets[b].CancelRequests(ctx, in)
		if err != nil {
			// One bucket down keeps the others' requests flowing; the
			// next call asks it again.
			failed = cmp.Or(failed, err)
			continue
		}
		out = append(out, got...)
	}
	if len(out) == 0 && failed != nil {
		return nil, failed
	}
	return out, nil
}

// Heartbeat implements store.RoutingStore. A protocol-"2" heartbeat
// passes its admission on the runner's group, then runs in every bucket
// on the runner's list or named by one of its leases, each with that
// bucket's leases: a sweep share there, the cancel requests, the
// renewals, merged in request order.
func (s *Sharded) Heartbeat(ctx context.Context, in store.HeartbeatInput) (store.HeartbeatResult, error) {
	if in.Proto == store.Proto0 {
		return s.site(s.proto0Site).Heartbeat(ctx, in)
	}
	held, _, err := s.holdBuckets(ctx, in.RunnerID, in.Admit, nil, nil)
	if err != nil {
		return store.HeartbeatResult{}, err
	}
	order, parts := s.byBucket(in.Leases)
	for _, b := range held {
		if _, named := parts[b]; !named {
			order = append(order, b)
		}
	}
	res := store.HeartbeatResult{Cancel: []protocol.LeaseRef{}, Swept: store.SweepResult{}}
	answered := map[int]store.RenewResult{}
	var failed error
	for _, b := range order {
		sub := in
		sub.Leases, sub.Admit, sub.Touch = parts[b], nil, false
		got, err := s.buckets[b].Heartbeat(ctx, sub)
		if err != nil {
			// Every other bucket still renews its leases. A bucket only
			// listed, named by no lease, owes this heartbeat its cancel
			// requests alone, which the next one hears.
			if _, named := parts[b]; named {
				failed = cmp.Or(failed, err)
			}
			continue
		}
		res.Swept = mergeSweeps(res.Swept, got.Swept)
		res.Cancel = append(res.Cancel, got.Cancel...)
		answered[b] = got.Renewed
	}
	if failed != nil {
		return store.HeartbeatResult{}, failed
	}
	if !in.Serving {
		res.Renewed = store.RenewResult{Renewed: []store.Renewal{}, Lost: []protocol.LeaseRef{}}
		return res, nil
	}
	res.Renewed, err = s.renewEach(in.Leases, func(b int, _ []protocol.LeaseRef) (store.RenewResult, error) { return answered[b], nil })
	return res, err
}

// mergeSweeps appends one bucket's sweep to another's.
func mergeSweeps(a, b store.SweepResult) store.SweepResult {
	return store.SweepResult{
		Requeued: slices.Concat(a.Requeued, b.Requeued),
		Expired:  slices.Concat(a.Expired, b.Expired),
		Lapsed:   slices.Concat(a.Lapsed, b.Lapsed),
	}
}

// Sweep implements store.RoutingStore: a batch in each bucket, from a
// start that rotates.
func (s *Sharded) Sweep(ctx context.Context) (store.SweepResult, error) {
	out := store.SweepResult{}
	start := int(s.turn.Add(1) % uint32(len(s.buckets)))
	var failed []error
	for i := range s.buckets {
		got, err := s.buckets[(start+i)%len(s.buckets)].Sweep(ctx)
		if err != nil {
			// A bucket down holds up no other bucket's sweep.
			failed = append(failed, err)
			continue
		}
		out = mergeSweeps(out, got)
	}
	return out, errors.Join(failed...)
}

// SweepSite implements store.SiteSweeper: a site's reads see its bucket
// alone, so a read's sweep need not visit the others.
func (s *Sharded) SweepSite(ctx context.Context, siteID string) (store.SweepResult, error) {
	return s.site(siteID).Sweep(ctx)
}

var _ store.SiteSweeper = (*Sharded)(nil)

// Pair implements store.RoutingStore: a protocol-"0" presence in the
// protocol-"0" bucket, a protocol-"2" one in the runner's group.
func (s *Sharded) Pair(ctx context.Context, in store.PairInput) (store.Presence, error) {
	at := s.runner(in.RunnerID)
	if in.Proto == store.Proto0 {
		at = s.site(s.proto0Site)
	}
	p, err := at.Pair(ctx, in)
	if err != nil {
		return store.Presence{}, err
	}
	return p, s.index(ctx, in.RunnerID)
}

// Touch implements store.RoutingStore: only protocol "0" touches.
func (s *Sharded) Touch(ctx context.Context, in store.TouchInput) (bool, error) {
	return s.site(s.proto0Site).Touch(ctx, in)
}

// Presence implements store.RoutingStore: of a runner id both protocols
// use, the presence seen last.
func (s *Sharded) Presence(ctx context.Context, runnerID string) (store.Presence, bool, error) {
	p2, ok2, err := s.runner(runnerID).Presence(ctx, runnerID)
	if err != nil {
		return store.Presence{}, false, err
	}
	p0, ok0, err := s.site(s.proto0Site).Presence(ctx, runnerID)
	if err != nil {
		return store.Presence{}, false, err
	}
	if ok0 && (!ok2 || p0.LastSeenAt > p2.LastSeenAt) {
		return p0, true, nil
	}
	return p2, ok2, nil
}

// Runners implements store.RoutingStore, in first-pair order across the
// keyspace (the global index), each runner's presence read apart.
func (s *Sharded) Runners(ctx context.Context, limit int) ([]store.Presence, error) {
	key := s.global.prefix + "runners"
	out := []store.Presence{}
	for from := int64(0); limit <= 0 || len(out) < limit; from += readPage {
		ids, err := s.client.Do(ctx, s.client.B().Zrange().Key(key).Min(strconv.FormatInt(from, 10)).Max(strconv.FormatInt(from+readPage-1, 10)).Build()).AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("valkey store: runners: %w", err)
		}
		for _, id := range ids {
			p, ok, err := s.Presence(ctx, id)
			if err != nil {
				return nil, err
			}
			if ok && (limit <= 0 || len(out) < limit) {
				out = append(out, p)
			}
		}
		if len(ids) < readPage {
			break
		}
	}
	return out, nil
}

// index puts a runner in the global index of runners, once per replica.
func (s *Sharded) index(ctx context.Context, runnerID string) error {
	if s.indexed.has(runnerID) {
		return nil
	}
	p := s.global.prefix
	if err := indexScript.Exec(ctx, s.client, []string{p + "runners", p + "runnerseq"}, []string{runnerID}).Error(); err != nil {
		return fmt.Errorf("valkey store: indexing runner %s: %w", runnerID, err)
	}
	s.indexed.add(runnerID)
	return nil
}

// indexScript: KEYS[1] the index (runner id, scored by the sequence at
// its first pairing), KEYS[2] the sequence; ARGV[1] the runner.
var indexScript = valkey.NewLuaScript(`
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), ARGV[1])
return 1
`)

// Jobs implements store.RoutingStore: bucket after bucket, each in
// first-enqueue order.
func (s *Sharded) Jobs(ctx context.Context, limit int) ([]store.Job, error) {
	return eachBucket(s, limit, func(b *Store, n int) ([]store.Job, error) { return b.Jobs(ctx, n) })
}

// JobSummaries implements store.RoutingStore, as Jobs.
func (s *Sharded) JobSummaries(ctx context.Context, limit int) ([]store.JobSummary, error) {
	return eachBucket(s, limit, func(b *Store, n int) ([]store.JobSummary, error) { return b.JobSummaries(ctx, n) })
}

// eachBucket reads up to limit values (all when limit <= 0) bucket after
// bucket.
func eachBucket[T any](s *Sharded, limit int, read func(b *Store, n int) ([]T, error)) ([]T, error) {
	out := []T{}
	for _, b := range s.buckets {
		n := 0
		if limit > 0 {
			if n = limit - len(out); n <= 0 {
				break
			}
		}
		got, err := read(b, n)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// Limiter returns a limiter of rate whose buckets live where the
// admissions charging the same keys keep theirs: a site's in its bucket,
// a runner's in the protocol-"0" bucket, any other key's under the
// global tag. A runner's key is protocol "0"'s because only its codec
// charges runners both ways; a protocol-"2" runner is charged by its
// admissions alone, in its group, unless its device is revoked, and
// then by the limiter alone, just before the refusal.
func (s *Sharded) Limiter(rate ratelimit.Rate) (ratelimit.Limiter, error) {
	if err := rate.Validate(); err != nil {
		return nil, err
	}
	if !rate.Enabled() {
		return nil, ratelimit.ErrDisabled
	}
	return shardedLimiter{s: s, rate: rate}, nil
}

type shardedLimiter struct {
	s    *Sharded
	rate ratelimit.Rate
}

// Allow implements ratelimit.Limiter.
func (l shardedLimiter) Allow(ctx context.Context, key string) (ratelimit.Decision, error) {
	at := l.s.global
	if site, ok := strings.CutPrefix(key, "site:"); ok {
		at = l.s.site(site)
	} else if strings.HasPrefix(key, "runner:") {
		at = l.s.site(l.s.proto0Site)
	}
	return (&Limiter{store: at, rate: l.rate}).Allow(ctx, key)
}

// seenSet is a bounded set of names, emptied when full.
type seenSet struct {
	mu    sync.Mutex
	limit int
	names map[string]bool
}

// rememberedRunners bounds a replica's memory of indexed runners.
const rememberedRunners = 65536

func newSeenSet(limit int) *seenSet { return &seenSet{limit: limit, names: map[string]bool{}} }

func (s *seenSet) has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names[name]
}

func (s *seenSet) add(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.names) >= s.limit {
		clear(s.names)
	}
	s.names[name] = true
}

// ShardedTestClock moves the clocks of a sharded store opened with
// NewShardedForTest: every group's lever alike, so that a job, its
// runner's presence and the global tag agree on the time. For tests only.
type ShardedTestClock struct{ s *Sharded }

// ShardedTestClockOf returns the test clock of s, or an error when s is
// a production store.
func ShardedTestClockOf(s *Sharded) (*ShardedTestClock, error) {
	if !s.global.testClock {
		return nil, errNoTestClock
	}
	return &ShardedTestClock{s: s}, nil
}

// Pin stops every group's clock at the global tag's current reading.
func (c *ShardedTestClock) Pin(ctx context.Context) error {
	now, err := c.s.Now(ctx)
	if err != nil {
		return err
	}
	for _, st := range c.s.stores() {
		if err := (&TestClock{s: st}).set(ctx, "@"+strconv.FormatInt(now, 10)); err != nil {
			return err
		}
	}
	return nil
}

// Advance moves every group's clock forward by d.
func (c *ShardedTestClock) Advance(ctx context.Context, d time.Duration) error {
	for _, st := range c.s.stores() {
		if err := (&TestClock{s: st}).Advance(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// BucketStore is bucket i's store, for tests that reach into a bucket.
func (s *Sharded) BucketStore(i int) *Store { return s.buckets[i] }
