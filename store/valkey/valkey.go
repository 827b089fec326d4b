package valkey

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

const (
	// maxGrants caps one claim; the protocol asks for at most
	// protocol.MaxClaim.
	maxGrants = 1024
	// sweepBatch is how many due entries per deadline index one Sweep
	// settles: small enough that a claim queued behind a sweep of a large
	// backlog waits a millisecond or two, while the sweeper calls again
	// at once. claimSettleBudget is how many jobs one claim may settle in
	// all, its sweep share and the jobs it steps over together, so a
	// claim stays small however large an expired backlog is. Together
	// they keep claims under 5 ms p99 during a drain of 16,000 expiries/s
	// (docs/performance.md, "Bounded work").
	sweepBatch        = 32
	claimSettleBudget = 16
	// readPage is how many records one read script returns, so a large
	// listing never blocks the server for long.
	readPage = 500
	// mendRoutes is how many route counts a mending sweep checks against
	// their queues, and how many more routes' census it takes (sweep.lua).
	mendRoutes = 16
)

// mendEvery spaces the mending sweeps, by the store clock: every sweep
// settles what is due, but the mending of counts an older relay left
// (a dozen commands per route) rides on one sweep a second of the whole
// fleet, not on every site poll, each of which sweeps first.
const mendEvery = time.Second

// Store is the Valkey RoutingStore. It is safe for concurrent use.
type Store struct {
	client valkey.Client
	owned  bool
	prefix string
	keys   []string
	// opKeys are, per operation, the keys of keys its script reads.
	opKeys  map[store.Op][]string
	scripts map[store.Op]*script
	results *resultsCache
	// routeLists remembers the claims' route lists this replica stored.
	routeLists *routeLists
	// testClock is set on a store opened for tests: its scripts obey the
	// test clock lever at ClockKey.
	testClock bool

	// settleBudget, mendEvery and onCall are this package's test seams:
	// its tests set them on a store they built, so they are unexported
	// fields of that store rather than package variables, which tests
	// running in parallel would share.

	// settleBudget is claimSettleBudget; a test comparing this store with
	// one that settles without a budget (the memory store) lifts it.
	settleBudget int

	// mendEvery is the package's mendEvery; tests that count sweeps to a
	// census's end on a pinned clock set 0.
	mendEvery time.Duration

	// onCall, when set (by tests), sees every script call before it runs.
	onCall func(call)
	// onRetry, when set, is told of every retry through an outage.
	onRetry RetryObserver
	// replication makes writes wait for replicas (replication.go).
	replication replication
	// marksLeases is set on a bucket of the sharded layout: each lease id
	// it grants carries leaseByte, the bucket's number, as its first byte,
	// so that calls naming the lease alone find the bucket (sharded.go).
	marksLeases bool
	leaseByte   byte
}

var _ store.RoutingStore = (*Store)(nil)

// call is one script invocation with its full keys and arguments.
type call struct {
	op   store.Op
	keys []string
	args []string
	// charged says the call spends a rate request (its admission's
	// Charge), which a re-send must not spend again; its flag is
	// args[chargeAt].
	charged  bool
	chargeAt int
	// err is set on a call built against its operation's entry (build),
	// and unadmitted on an admitting write not passed through admitted:
	// exec sends neither.
	err        error
	unadmitted bool
}

// NewFromClient returns a store on an existing client under a key prefix
// (which must carry a hash tag). The caller keeps ownership of the client:
// Close does not close it. Call LoadScripts to load the scripts up front;
// they are also loaded on first use.
func NewFromClient(client valkey.Client, prefix string) (*Store, error) {
	return newFromClient(client, prefix, false)
}

// newFromClient opens the store; testClock builds it with the test clock
// lever (NewFromClientForTest).
func newFromClient(client valkey.Client, prefix string, testClock bool) (*Store, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	scripts, err := buildScripts(testClock)
	if err != nil {
		return nil, err
	}
	return onScripts(client, prefix, scripts, testClock), nil
}

// onScripts returns a store under prefix (already validated) that runs
// scripts, a build of buildScripts(testClock): stores of one layout share
// one build, which takes tens of milliseconds to make.
func onScripts(client valkey.Client, prefix string, scripts map[store.Op]*script, testClock bool) *Store {
	s := &Store{client: client, prefix: prefix, settleBudget: claimSettleBudget, mendEvery: mendEvery, scripts: scripts, testClock: testClock, results: newResultsCache(DefaultResultsCacheBytes),
		routeLists: newRouteLists()}
	for _, k := range declaredKeys(testClock) {
		s.keys = append(s.keys, prefix+keySuffix(k))
	}
	s.opKeys = make(map[store.Op][]string, len(scripts))
	for op, sc := range scripts {
		keys := make([]string, 0, len(sc.keyNames))
		for _, k := range sc.keyNames {
			keys = append(keys, prefix+keySuffix(k))
		}
		s.opKeys[op] = keys
	}
	return s
}

// ClockKey is the key under prefix through which tests move the clock of a
// store opened with NewFromClientForTest: a value "<n>" adds n milliseconds
// to TIME, a value "@<ms>" pins the clock at ms. A production store never
// reads it: its clock is Valkey's TIME.
func ClockKey(prefix string) string { return prefix + "clock" }

// Prefix returns the store's key prefix.
func (s *Store) Prefix() string { return s.prefix }

// Client returns the store's client, so that tools measuring the server
// beside the store (the benchmarks) can share its connections. Whoever
// owns the store's client still owns it; do not close it.
func (s *Store) Client() valkey.Client { return s.client }

// exec runs a call, through a short outage too (execRetrying), and
// returns its reply, or an error that is never a refusal: the store could
// not answer, and the caller may retry.
func (s *Store) exec(ctx context.Context, c call) (valkey.ValkeyMessage, error) {
	if c.err != nil {
		return valkey.ValkeyMessage{}, c.err
	}
	if c.unadmitted {
		return valkey.ValkeyMessage{}, fmt.Errorf("valkey store: %s: sent without its admission", c.op)
	}
	if s.onCall != nil {
		s.onCall(c)
	}
	return s.execRetrying(ctx, c)
}

// run sends a call once (valkey-go may re-send it; see loadScript).
func (s *Store) run(ctx context.Context, c call) (valkey.ValkeyMessage, error) {
	sc := s.scripts[c.op]
	run := sc.run
	if c.charged && sc.once != nil {
		run = sc.once
	}
	if s.replication.waitsFor(sc) {
		return s.runReplicated(ctx, run, c)
	}
	msg, err := run.Exec(ctx, s.client, c.keys, c.args).ToMessage()
	if err != nil && !valkey.IsValkeyNil(err) {
		return msg, fmt.Errorf("valkey store: %s: %w", c.op, err)
	}
	return msg, nil
}

// execWrite runs a write call whose reply is {'ok', ...} or
// {'refused', code[, state]} and returns the parts after the status.
func (s *Store) execWrite(ctx context.Context, c call) ([]string, error) {
	msg, err := s.exec(ctx, c)
	if err != nil {
		return nil, err
	}
	parts, err := msg.AsStrSlice()
	if err != nil || len(parts) == 0 {
		return nil, fmt.Errorf("valkey store: %s: unexpected reply %v", c.op, msg)
	}
	switch parts[0] {
	case "ok":
		return parts[1:], nil
	case "refused":
		if len(parts) < 2 {
			return nil, fmt.Errorf("valkey store: %s: refusal without a code", c.op)
		}
		return nil, refusalOf(c.op, parts[1:])
	}
	return nil, fmt.Errorf("valkey store: %s: unexpected reply status %q", c.op, parts[0])
}

// execAdmitted runs the write c with the admission a of runner's call
// (admitted).
func (s *Store) execAdmitted(ctx context.Context, c call, runner string, a *store.Admission) ([]string, error) {
	c, err := s.admitted(c, runner, a)
	if err != nil {
		return nil, err
	}
	return s.execWrite(ctx, c)
}

// refusalOf reads a script's refusal: its code, then the job's state
// (too-late) or the wait in microseconds (rate-limited).
func refusalOf(op store.Op, parts []string) error {
	r := &store.Refusal{Code: store.RefusalCode(parts[0])}
	if len(parts) < 2 {
		return r
	}
	if r.Code != store.RefusedRateLimited {
		r.Was = store.State(parts[1])
		return r
	}
	wait, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return fmt.Errorf("valkey store: %s: malformed wait %q: %w", op, parts[1], err)
	}
	r.RetryAfter = time.Duration(wait) * time.Microsecond
	return r
}

func wantParts(op store.Op, parts []string, n int) error {
	if len(parts) < n {
		return fmt.Errorf("valkey store: %s: reply has %d parts, want %d", op, len(parts), n)
	}
	return nil
}

// Close closes the client if the store opened it.
func (s *Store) Close() error {
	if s.owned {
		s.client.Close()
	}
	return nil
}

// Now reads the store clock.
func (s *Store) Now(ctx context.Context) (int64, error) {
	msg, err := s.exec(ctx, s.newCall(nowArgs{}))
	if err != nil {
		return 0, err
	}
	now, err := msg.AsInt64()
	if err != nil {
		return 0, fmt.Errorf("valkey store: now: %w", err)
	}
	return now, nil
}

// Enqueue implements store.RoutingStore.
func (s *Store) Enqueue(ctx context.Context, in store.EnqueueInput) (store.EnqueueResult, error) {
	c, err := enqueueCall(s, in)
	if err != nil {
		return store.EnqueueResult{}, err
	}
	parts, err := s.execWrite(ctx, c)
	if err != nil {
		return store.EnqueueResult{}, err
	}
	if err := wantParts(store.OpEnqueue, parts, 2); err != nil {
		return store.EnqueueResult{}, err
	}
	return store.EnqueueResult{State: store.State(parts[0]), Created: parts[1] == "1"}, nil
}

// enqueueCall builds the (admitted) enqueue call; the stub travels as the JSON Go
// reads back, and the fields a queue is chosen by travel beside it so the
// script never has to parse it.
func enqueueCall(s *Store, in store.EnqueueInput) (call, error) {
	stub, err := json.Marshal(in.Stub)
	if err != nil {
		return call{}, fmt.Errorf("valkey store: enqueue: encoding stub: %w", err)
	}
	return s.admitted(s.newWrite(in.SiteID, enqueueArgs{ID: in.Stub.ID, Site: in.SiteID, Stub: string(stub), Owner: in.Stub.Owner,
		Kind: in.Stub.Kind, OwnerOnly: store.OwnerOnly(in.Stub.Audience), Deadline: in.Stub.DeadlineAt, Proto: in.Proto}), "", in.Admit)
}

// proto is how a script reads a protocol tag.
func proto(p store.Proto) string { return strconv.Itoa(int(p)) }

// Claim implements store.RoutingStore.
func (s *Store) Claim(ctx context.Context, in store.ClaimInput) ([]protocol.ClaimedStub, error) {
	keyID, _ := protocol.KeyIDOf(in.Device.Identity)
	device, err := json.Marshal(grantedDevice{in.Device, keyID})
	if err != nil {
		return nil, fmt.Errorf("valkey store: claim: encoding device: %w", err)
	}
	n := min(max(in.Max, 0), maxGrants)
	leases := make([]string, n)
	for i := range leases {
		leases[i] = s.newLeaseID()
	}
	c, err := s.admitted(s.newWrite(in.RunnerID, claimArgs{Runner: in.RunnerID, Owner: in.Owner, Device: string(device),
		LeaseMs: in.LeaseMs, WindowMs: protocol.AwaitingPayloadMs, Max: n, SettleBudget: s.settleBudget, Touch: in.Touch,
		Proto: in.Proto, HasRoutes: len(in.Routes) > 0, Hold: in.Hold, Kinds: in.Kinds, Leases: leases}), in.RunnerID, in.Admit)
	if err != nil {
		return nil, err
	}
	parts, err := s.execClaim(ctx, c, in.Proto, in.Routes)
	if err != nil {
		return nil, err
	}
	if err := wantParts(store.OpClaim, parts, 1); err != nil {
		return nil, err
	}
	f, err := unframe(parts[0])
	if err != nil || len(f)%3 != 0 {
		return nil, fmt.Errorf("valkey store: claim: malformed answer")
	}
	out := make([]protocol.ClaimedStub, 0, len(f)/3)
	for i := 0; i < len(f); i += 3 {
		c := protocol.ClaimedStub{Lease: protocol.Lease{ID: f[i+1], RunnerID: in.RunnerID}}
		if err := json.Unmarshal([]byte(f[i]), &c.JobStub); err != nil {
			return nil, fmt.Errorf("valkey store: claim: decoding granted stub: %w", err)
		}
		if c.Lease.ExpiresAt, err = strconv.ParseInt(f[i+2], 10, 64); err != nil {
			return nil, fmt.Errorf("valkey store: claim: lease expiry: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// Fetch implements store.RoutingStore.
func (s *Store) Fetch(ctx context.Context, in store.LeaseInput) (protocol.SealedEnvelope, error) {
	parts, err := s.execAdmitted(ctx, s.newCall(fetchArgs{ID: in.JobID, Runner: in.RunnerID, Lease: in.LeaseID, Touch: in.Touch,
		Proto: in.Proto, Site: in.SiteID, Sites: sitesArg(in.Sites)}), in.RunnerID, in.Admit)
	if err != nil {
		return protocol.SealedEnvelope{}, err
	}
	if err := wantParts(store.OpFetch, parts, 1); err != nil {
		return protocol.SealedEnvelope{}, err
	}
	var env protocol.SealedEnvelope
	if err := json.Unmarshal([]byte(parts[0]), &env); err != nil {
		return protocol.SealedEnvelope{}, fmt.Errorf("valkey store: fetch: decoding payload: %w", err)
	}
	return env, nil
}

// Result implements store.RoutingStore.
func (s *Store) Result(ctx context.Context, in store.ResultInput) (store.ResultOutcome, error) {
	env, err := json.Marshal(in.Envelope)
	if err != nil {
		return store.ResultOutcome{}, fmt.Errorf("valkey store: result: encoding result: %w", err)
	}
	parts, err := s.execAdmitted(ctx, s.newWrite(in.RunnerID, resultArgs{ID: in.JobID, Runner: in.RunnerID, Lease: in.LeaseID,
		Result: string(env), Disposition: in.Disposition, Touch: in.Touch, Sender: in.Envelope.SenderKeyID, Proto: in.Proto,
		Site: in.SiteID, Sites: sitesArg(in.Sites)}), in.RunnerID, in.Admit)
	if err != nil {
		return store.ResultOutcome{}, err
	}
	if err := wantParts(store.OpResult, parts, 1); err != nil {
		return store.ResultOutcome{}, err
	}
	return store.ResultOutcome{Duplicate: parts[0] == "1"}, nil
}

// Release implements store.RoutingStore.
func (s *Store) Release(ctx context.Context, in store.ReleaseInput) ([]string, error) {
	parts, err := s.execAdmitted(ctx, s.newWrite(in.RunnerID, releaseArgs{Runner: in.RunnerID, Reason: in.Reason, Proto: in.Proto,
		Site: in.SiteID, Delay: max(in.RetryAfterMs, 0), Touch: in.Touch, Grants: leasePairs(in.Leases)}), in.RunnerID, in.Admit)
	if err != nil {
		return nil, err
	}
	return parts, nil
}

// Payload implements store.RoutingStore.
func (s *Store) Payload(ctx context.Context, in store.PayloadInput) error {
	env, err := json.Marshal(in.Envelope)
	if err != nil {
		return fmt.Errorf("valkey store: payload: encoding payload: %w", err)
	}
	_, err = s.execAdmitted(ctx, s.newWrite(in.SiteID, payloadArgs{ID: in.JobID, Site: in.SiteID, Payload: string(env),
		Recipient: in.Envelope.RecipientKeyID}), "", in.Admit)
	return err
}

// Cancel implements store.RoutingStore.
func (s *Store) Cancel(ctx context.Context, in store.CancelInput) (bool, error) {
	parts, err := s.execAdmitted(ctx, s.newWrite(in.SiteID, cancelArgs{ID: in.JobID, Site: in.SiteID}), "", in.Admit)
	if err != nil {
		return false, err
	}
	if err := wantParts(store.OpCancel, parts, 1); err != nil {
		return false, err
	}
	return parts[0] == "1", nil
}

// CancelRequests implements store.RoutingStore.
func (s *Store) CancelRequests(ctx context.Context, in store.CancelRequestsInput) ([]protocol.LeaseRef, error) {
	parts, err := s.execWrite(ctx, s.newWrite(in.RunnerID, cancelRequestsArgs{Runner: in.RunnerID, Proto: in.Proto}))
	if err != nil {
		return nil, err
	}
	return grantsOf(store.OpCancelRequests, parts)
}

// grantsOf reads flat (job id, lease id) pairs.
func grantsOf(op store.Op, flat []string) ([]protocol.LeaseRef, error) {
	if len(flat)%2 != 0 {
		return nil, fmt.Errorf("valkey store: %s: malformed grants", op)
	}
	out := []protocol.LeaseRef{}
	for i := 0; i < len(flat); i += 2 {
		out = append(out, protocol.LeaseRef{JobID: flat[i], LeaseID: flat[i+1]})
	}
	return out, nil
}

// Renew implements store.RoutingStore.
func (s *Store) Renew(ctx context.Context, in store.RenewInput) (store.RenewResult, error) {
	parts, err := s.execWrite(ctx, s.newWrite(in.RunnerID, renewArgs{Runner: in.RunnerID, LeaseMs: in.LeaseMs, Proto: in.Proto,
		Site: in.SiteID, Grants: leasePairs(in.Leases)}))
	if err != nil {
		return store.RenewResult{}, err
	}
	if err := wantParts(store.OpRenew, parts, 1); err != nil {
		return store.RenewResult{}, err
	}
	return renewal(store.OpRenew, parts[0], in.Leases)
}

// renewal reads a framed renewal answer to leases.
func renewal(op store.Op, framed string, leases []protocol.LeaseRef) (store.RenewResult, error) {
	f, err := unframe(framed)
	if err != nil || len(f) != 3*len(leases) {
		return store.RenewResult{}, fmt.Errorf("valkey store: %s: malformed renewal", op)
	}
	res := store.RenewResult{Renewed: []store.Renewal{}, Lost: []protocol.LeaseRef{}}
	for i := 0; i < len(f); i += 3 {
		if f[i+1] != "renewed" {
			res.Lost = append(res.Lost, leases[i/3])
			continue
		}
		at, err := strconv.ParseInt(f[i+2], 10, 64)
		if err != nil {
			return store.RenewResult{}, fmt.Errorf("valkey store: %s: expiry: %w", op, err)
		}
		res.Renewed = append(res.Renewed, store.Renewal{JobID: f[i], ExpiresAt: at})
	}
	return res, nil
}

// Heartbeat implements store.RoutingStore.
func (s *Store) Heartbeat(ctx context.Context, in store.HeartbeatInput) (store.HeartbeatResult, error) {
	parts, err := s.execAdmitted(ctx, s.newWrite(in.RunnerID, heartbeatArgs{Runner: in.RunnerID, Proto: in.Proto, Site: in.SiteID,
		Touch: in.Touch, Serving: in.Serving, LeaseMs: in.LeaseMs, Batch: sweepBatch, Sites: sitesArg(in.Sites),
		Grants: leasePairs(in.Leases)}), in.RunnerID, in.Admit)
	if err != nil {
		return store.HeartbeatResult{}, err
	}
	if err := wantParts(store.OpHeartbeat, parts, 5); err != nil {
		return store.HeartbeatResult{}, err
	}
	res := store.HeartbeatResult{Cancel: []protocol.LeaseRef{}, Renewed: store.RenewResult{Renewed: []store.Renewal{}, Lost: []protocol.LeaseRef{}}}
	if res.Swept, err = sweepResult(store.OpHeartbeat, parts[:3]); err != nil {
		return store.HeartbeatResult{}, err
	}
	if !in.Serving {
		return res, nil
	}
	cancel, err := unframe(parts[3])
	if err == nil {
		res.Cancel, err = grantsOf(store.OpHeartbeat, cancel)
	}
	if err != nil {
		return store.HeartbeatResult{}, fmt.Errorf("valkey store: heartbeat: cancel: %w", err)
	}
	res.Renewed, err = renewal(store.OpHeartbeat, parts[4], in.Leases)
	return res, err
}

// Pair implements store.RoutingStore.
func (s *Store) Pair(ctx context.Context, in store.PairInput) (store.Presence, error) {
	device, err := json.Marshal(in.Device)
	if err != nil {
		return store.Presence{}, fmt.Errorf("valkey store: pair: encoding device: %w", err)
	}
	parts, err := s.execAdmitted(ctx, s.newWrite(in.RunnerID, pairArgs{Runner: in.RunnerID, Owner: in.Owner, Device: string(device),
		Caps: string(in.Capabilities), CapsGiven: in.Capabilities != nil, Withheld: string(in.Withheld),
		WithheldGiven: in.Withheld != nil}), in.RunnerID, in.Admit)
	if err != nil {
		return store.Presence{}, err
	}
	if err := wantParts(store.OpPair, parts, 1); err != nil {
		return store.Presence{}, err
	}
	p, err := decodePresence(in.RunnerID, parts[0])
	if err != nil {
		return store.Presence{}, fmt.Errorf("valkey store: pair: %w", err)
	}
	return p, nil
}

// flag is how a script reads a boolean argument.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Touch implements store.RoutingStore.
func (s *Store) Touch(ctx context.Context, in store.TouchInput) (bool, error) {
	parts, err := s.execAdmitted(ctx, s.newWrite(in.RunnerID, touchArgs{Runner: in.RunnerID}), in.RunnerID, in.Admit)
	if err != nil {
		return false, err
	}
	if err := wantParts(store.OpTouch, parts, 1); err != nil {
		return false, err
	}
	return parts[0] == "1", nil
}

// Sweep implements store.RoutingStore. It settles at most a batch of due
// entries per deadline index; call it again while it reports work.
func (s *Store) Sweep(ctx context.Context) (store.SweepResult, error) {
	parts, err := s.execWrite(ctx, s.newCall(sweepArgs{Batch: sweepBatch, Mend: mendRoutes, MendEvery: s.mendEvery.Milliseconds()}))
	if err != nil {
		return store.SweepResult{}, err
	}
	if err := wantParts(store.OpSweep, parts, 3); err != nil {
		return store.SweepResult{}, err
	}
	return sweepResult(store.OpSweep, parts)
}

// sweepResult reads a sweep's framed requeued, expired and lapsed ids.
func sweepResult(op store.Op, parts []string) (store.SweepResult, error) {
	requeued, err1 := unframe(parts[0])
	expired, err2 := unframe(parts[1])
	lapsed, err3 := unframe(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return store.SweepResult{}, fmt.Errorf("valkey store: %s: sweep: %w", op, err)
	}
	return store.SweepResult{Requeued: requeued, Expired: expired, Lapsed: lapsed}, nil
}

// nullable reads a reply element that may be nil.
func nullable(m valkey.ValkeyMessage) (*string, error) {
	if m.IsNil() {
		return nil, nil
	}
	v, err := m.ToString()
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// jobsFrom decodes flat (id, record, payload, result) groups, skipping ids
// whose record vanished and, in lists, records this code cannot read.
func jobsFrom(op store.Op, ms []valkey.ValkeyMessage, skipUnreadable bool) ([]store.Job, error) {
	if len(ms)%4 != 0 {
		return nil, fmt.Errorf("valkey store: %s: reply of %d elements", op, len(ms))
	}
	out := make([]store.Job, 0, len(ms)/4)
	for i := 0; i < len(ms); i += 4 {
		var parts [4]*string
		for k := range parts {
			v, err := nullable(ms[i+k])
			if err != nil {
				return nil, fmt.Errorf("valkey store: %s: %w", op, err)
			}
			parts[k] = v
		}
		if parts[0] == nil || parts[1] == nil {
			continue
		}
		j, err := decodeJob(*parts[0], *parts[1], parts[2], parts[3])
		if err != nil {
			if skipUnreadable && errors.Is(err, errUnreadable) {
				continue
			}
			return nil, fmt.Errorf("valkey store: %s: %w", op, err)
		}
		out = append(out, j)
	}
	return out, nil
}

// Job implements store.RoutingStore.
func (s *Store) Job(ctx context.Context, siteID, id string) (store.Job, bool, error) {
	msg, err := s.exec(ctx, s.newCall(jobArgs{Site: siteID, ID: id}))
	if err != nil {
		return store.Job{}, false, err
	}
	ms, err := msg.ToArray()
	if err != nil {
		return store.Job{}, false, fmt.Errorf("valkey store: job: %w", err)
	}
	jobs, err := jobsFrom(store.OpJob, ms, false)
	if err != nil || len(jobs) == 0 || jobs[0].SiteID != siteID {
		return store.Job{}, false, err
	}
	return jobs[0], true, nil
}

// Jobs implements store.RoutingStore, reading in pages of bounded size.
func (s *Store) Jobs(ctx context.Context, limit int) ([]store.Job, error) {
	return scorePages(ctx, s, store.OpJobs, limit, 5, func(ms []valkey.ValkeyMessage) ([]store.Job, error) {
		flat := make([]valkey.ValkeyMessage, 0, len(ms)/5*4)
		for i := 0; i < len(ms); i += 5 {
			flat = append(flat, ms[i], ms[i+2], ms[i+3], ms[i+4])
		}
		return jobsFrom(store.OpJobs, flat, true)
	})
}

// JobSummaries implements store.RoutingStore: a job's payload and result
// are read as their stored lengths, never their bytes.
func (s *Store) JobSummaries(ctx context.Context, limit int) ([]store.JobSummary, error) {
	return scorePages(ctx, s, store.OpJobSummaries, limit, 5, func(ms []valkey.ValkeyMessage) ([]store.JobSummary, error) {
		out := make([]store.JobSummary, 0, len(ms)/5)
		for i := 0; i < len(ms); i += 5 {
			id, err1 := ms[i].ToString()
			raw, err2 := nullable(ms[i+2])
			payload, err3 := ms[i+3].AsInt64()
			result, err4 := ms[i+4].AsInt64()
			if err := errors.Join(err1, err2, err3, err4); err != nil {
				return nil, fmt.Errorf("valkey store: %s: %w", store.OpJobSummaries, err)
			}
			if raw == nil {
				continue
			}
			j, err := decodeJob(id, *raw, nil, nil)
			if errors.Is(err, errUnreadable) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("valkey store: %s: %w", store.OpJobSummaries, err)
			}
			out = append(out, store.JobSummary{Job: j, PayloadBytes: payload, ResultBytes: result})
		}
		return out, nil
	})
}

// scorePages reads up to limit values (all when limit <= 0) from a listing
// ordered by a sequence score, in pages of at most readPage entries (and,
// for jobs, at most listPageBytes). Each
// entry is width reply elements, the second of them its score; decode
// turns one page of entries into values, leaving out those it cannot read.
func scorePages[T any](ctx context.Context, s *Store, op store.Op, limit, width int, decode func([]valkey.ValkeyMessage) ([]T, error)) ([]T, error) {
	out := []T{}
	after := ""
	for limit <= 0 || len(out) < limit {
		n := readPage
		if limit > 0 {
			n = min(n, limit-len(out))
		}
		var args opArgs
		switch op {
		case store.OpJobs:
			args = jobsArgs{After: after, Page: n, Cap: listPageBytes}
		case store.OpJobSummaries:
			args = jobSummariesArgs{After: after, Page: n}
		default:
			args = runnersArgs{After: after, Page: n}
		}
		msg, err := s.exec(ctx, s.newCall(args))
		if err != nil {
			return nil, err
		}
		ms, err := msg.ToArray()
		if err != nil || len(ms)%width != 0 {
			return nil, fmt.Errorf("valkey store: %s: unexpected reply", op)
		}
		if len(ms) == 0 {
			break
		}
		if after, err = ms[len(ms)-width+1].ToString(); err != nil {
			return nil, fmt.Errorf("valkey store: %s: %w", op, err)
		}
		values, err := decode(ms)
		if err != nil {
			return nil, err
		}
		out = append(out, values...)
		// A jobs page may be cut short by its byte cap; only an empty one
		// then says the listing is over.
		if len(ms)/width < n && op != store.OpJobs {
			break
		}
	}
	return out, nil
}

// Pending implements store.RoutingStore.
func (s *Store) Pending(ctx context.Context, siteID string) ([]store.Job, error) {
	return s.siteJobs(ctx, store.OpPending, siteID)
}

// siteJobs reads a per-site listing in pages bounded in count and bytes.
func (s *Store) siteJobs(ctx context.Context, op store.Op, siteID string) ([]store.Job, error) {
	out := []store.Job{}
	last := ""
	for {
		msg, err := s.exec(ctx, s.newCall(pendingArgs{Site: siteID, After: last, Page: readPage, Cap: listPageBytes}))
		if err != nil {
			return nil, err
		}
		ms, err := msg.ToArray()
		if err != nil || len(ms) < 2 {
			return nil, fmt.Errorf("valkey store: %s: unexpected reply", op)
		}
		last, err = ms[0].ToString()
		more, err2 := ms[1].ToString()
		if err := errors.Join(err, err2); err != nil {
			return nil, fmt.Errorf("valkey store: %s: %w", op, err)
		}
		jobs, err := jobsFrom(op, ms[2:], true)
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
		if more != "1" {
			return out, nil
		}
	}
}

// Presence implements store.RoutingStore.
func (s *Store) Presence(ctx context.Context, runnerID string) (store.Presence, bool, error) {
	msg, err := s.exec(ctx, s.newCall(presenceArgs{Runner: runnerID}))
	if err != nil {
		return store.Presence{}, false, err
	}
	raw, err := nullable(msg)
	if err != nil {
		return store.Presence{}, false, fmt.Errorf("valkey store: presence: %w", err)
	}
	if raw == nil {
		return store.Presence{}, false, nil
	}
	p, err := decodePresence(runnerID, *raw)
	if err != nil {
		return store.Presence{}, false, fmt.Errorf("valkey store: presence: %w", err)
	}
	return p, true, nil
}

// Runners implements store.RoutingStore, reading in pages of bounded size.
func (s *Store) Runners(ctx context.Context, limit int) ([]store.Presence, error) {
	return scorePages(ctx, s, store.OpRunners, limit, 3, func(ms []valkey.ValkeyMessage) ([]store.Presence, error) {
		var out []store.Presence
		for i := 0; i < len(ms); i += 3 {
			runner, err1 := ms[i].ToString()
			raw, err2 := nullable(ms[i+2])
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("valkey store: runners: %w", err)
			}
			if raw == nil {
				continue
			}
			p, err := decodePresence(runner, *raw)
			if err != nil {
				continue // a record of a format this code does not read
			}
			out = append(out, p)
		}
		return out, nil
	})
}

// newLeaseID returns a fresh lease id: a random UUID, whose first byte
// names the store's bucket when it is one (marksLeases).
func (s *Store) newLeaseID() string {
	if !s.marksLeases {
		return newUUID()
	}
	return uuidStartingWith(s.leaseByte, true)
}

// newUUID returns a random lowercase UUID (version 4) from crypto/rand.
func newUUID() string { return uuidStartingWith(0, false) }

// uuidStartingWith returns a random lowercase UUID (version 4) from
// crypto/rand, its first byte set to first when set is true: still a
// version-4 UUID, with 114 random bits instead of 122.
func uuidStartingWith(first byte, set bool) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	if set {
		b[0] = first
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hexd = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexd[c>>4], hexd[c&0x0f])
	}
	return string(out)
}
