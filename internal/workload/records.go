package workload

import (
	"sort"
	"sync"
	"time"

	"github.com/byollm/relayd/protocol"
)

// Times in records are milliseconds since the epoch. Grant times come from
// the relay (the store's clock); send and receive times from this machine's
// clock. In these tests Valkey runs on the same machine, so the two are the
// same clock; Check relies on that only through lower bounds it can prove.

// grant is one lease on one job, as seen by the daemon that got it (from
// claim) or by the site (from pending, for grants whose claim answer never
// arrived, such as a retried claim that had already run).
type grant struct {
	jobID   string // the job's record key: (site, id)
	leaseID string
	runner  string
	// proto is the protocol of the daemon the claim answer went to; ""
	// when only seen in pending.
	proto   string
	source  string // "claim" or "pending"
	leaseMs int64  // 0 when only seen in pending
	// grantedAt is the store time of the claim; expiresAt the expiry it
	// granted (or, from pending, the latest expiry pending showed).
	grantedAt int64
	expiresAt int64
	// claimSent and claimRecv bracket the claim request on the local clock;
	// replica is the one that answered it (host:port).
	claimSent, claimRecv int64
	replica              string
	// renewFloor is the latest proven lower bound of a renewed expiry: a
	// heartbeat sent at S that did not report the lease lost renewed it at
	// some store time at or after S.
	renewFloor int64
	// sealed: the site's payload was accepted while this grant was provably
	// the holder. fetched and accepted: the daemon's fetch and result
	// under this lease succeeded.
	sealed, fetched, accepted bool
	// releasedAt is when the daemon sent a release that gave the lease
	// back; refusedAt the same for a release with reason refused.
	releasedAt int64
	refusedAt  int64
	sealState  int // sealNone, sealQueued or sealDone: the site's progress
	// unsealed: the site never seals this grant, on purpose, so that its
	// sealing window lapses (Config.UnsealedFraction).
	unsealed  bool
	abandoned bool
	lost      bool // a heartbeat reported it lost
	// returned: a claim handed this lease back to its holder after it
	// lapsed with its payload sealed (README RD-D14).
	returned bool
	// regrantedAt is the store time of that hand-back when it was the
	// first claim answer of this lease the daemon got (the first claim's
	// answer was lost or withheld, and the site saw the grant in pending);
	// claimSent and claimRecv then bracket the hand-back.
	regrantedAt int64
}

// claimedAt is the store time the claim that claimSent and claimRecv
// bracket stamped the lease with.
func (g *grant) claimedAt() int64 {
	if g.regrantedAt != 0 {
		return g.regrantedAt
	}
	return g.grantedAt
}

// The site's progress in sealing a grant's payload.
const (
	sealNone = iota
	sealQueued
	sealDone
)

// liveUntil is the earliest store time at which this grant can have ended
// without anyone misbehaving: until then, granting the job again is a
// violation. Each bound is one the relay's own rules prove.
func (g *grant) liveUntil() int64 {
	live := max(g.expiresAt, g.renewFloor)
	if !g.sealed && !g.fetched && !g.accepted {
		// An unsealed grant goes back to the queue when its sealing window
		// closes, lease or not.
		live = min(live, g.grantedAt+protocol.AwaitingPayloadMs)
	}
	if g.releasedAt > 0 {
		live = min(live, g.releasedAt)
	}
	return live
}

// acceptance is a result the relay accepted (or called a duplicate on a
// first submission that had been retried).
type acceptance struct {
	leaseID, runner string
	duplicate       bool
	retried         bool
	recv            int64 // when the answer arrived: the job was done by then
}

// replay is a deliberate second submission of an accepted result.
type replay struct {
	leaseID string
	answer  protocol.ResultResponse
	err     string
	refused bool // the relay answered with a 4xx refusal
}

// siteResult is the result the site collected for a job.
type siteResult struct {
	leaseID, runner string
	ciphertext      string
	at              int64
	// device is the identity the site opened it with: the one pending
	// showed for that lease.
	device protocol.PublicIdentity
	// changed is set once a later listing showed a different result.
	changed bool
}

// job is everything recorded about one job.
type job struct {
	key string // jobKey(site, id)
	id  string // as on the wire
	// lane is the site client that publishes, seals and collects it; its
	// protocol is the job's.
	lane       *lane
	owner      string
	deadlineAt int64
	payload    []byte // the plaintext the site sealed, compact JSON
	enqueued   bool
	enqueuedAt int64
	// enqueueState is the state the accepted enqueue answered;
	// enqueueRetried says an earlier try of it may have reached the relay
	// (a 5xx, no answer, or a retry on another replica), which may have
	// created the job already.
	enqueueState   string
	enqueueRetried bool

	// unsealedDecided: leaveUnsealed has chosen for this job.
	unsealedDecided bool

	grants        []*grant
	pendingDevice map[string]protocol.PublicIdentity // by lease id
	accepted      []acceptance
	replays       []replay
	site          *siteResult
	problems      []Violation // found while running
}

// siteID is the job's site ("" for a record built without a lane).
func (j *job) siteID() string {
	if j.lane == nil {
		return ""
	}
	return j.lane.siteID
}

// records is the run's shared memory of what happened, behind one lock.
type records struct {
	mu     sync.Mutex
	jobs   map[string]*job // by jobKey
	order  []string
	leases map[string]*grant
	// devices maps runner ids to the identity the fixture approved.
	devices map[string]protocol.PublicIdentity
	// general holds violations not tied to one job.
	general []Violation
	// unreadable counts, per endpoint, 2xx answers that did not parse.
	unreadable map[string]int
}

func newRecords() *records {
	return &records{jobs: map[string]*job{}, leases: map[string]*grant{}, devices: map[string]protocol.PublicIdentity{}, unreadable: map[string]int{}}
}

func nowMs() int64 { return time.Now().UnixMilli() }

// addGrant records a grant the first time its lease is seen and returns it.
func (r *records) addGrant(g *grant) *grant {
	if old, ok := r.leases[g.leaseID]; ok {
		if old.source == "claim" && g.source == "claim" && old.runner == g.runner {
			// The same lease from a second claim: the relay gave a sealed
			// job back to its holder (RD-D14), with a fresh expiry.
			old.returned = true
			old.expiresAt = max(old.expiresAt, g.expiresAt)
		}
		return old
	}
	r.leases[g.leaseID] = g
	if j := r.jobs[g.jobID]; j != nil {
		j.grants = append(j.grants, g)
	}
	return g
}

// sortedGrants returns a job's grants in grant order.
func (j *job) sortedGrants() []*grant {
	gs := append([]*grant(nil), j.grants...)
	sort.SliceStable(gs, func(a, b int) bool { return gs[a].grantedAt < gs[b].grantedAt })
	return gs
}
