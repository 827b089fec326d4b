package workload

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

// The checker must find what it claims to find: each case builds the
// records a misbehaving relay would leave and expects exactly that kind.

const lease = 5000 // ms

func testRun(allow503 bool) *Run {
	return &Run{cfg: Config{ClockTolerance: time.Second, Allow503: allow503}, rec: newRecords(), st: newStats()}
}

// finishedJob adds a job that ran cleanly under one grant at t=100000.
func finishedJob(r *Run, id string) (*job, *grant) {
	j := &job{id: id, owner: "o", pendingDevice: map[string]protocol.PublicIdentity{}, enqueued: true, enqueueState: "queued"}
	r.rec.jobs[id] = j
	r.rec.order = append(r.rec.order, id)
	g := r.rec.addGrant(&grant{jobID: id, leaseID: id + "-L1", runner: "r1", source: "claim", leaseMs: lease,
		grantedAt: 100_000, expiresAt: 100_000 + lease, claimSent: 99_990, claimRecv: 100_010, sealed: true, fetched: true, accepted: true})
	j.accepted = []acceptance{{leaseID: g.leaseID, runner: "r1", recv: 100_200}}
	j.site = &siteResult{leaseID: g.leaseID, runner: "r1"}
	return j, g
}

func kinds(vs []Violation) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, v.Kind)
	}
	return out
}

func TestCheck_CleanRunHasNoViolations(t *testing.T) {
	r := testRun(false)
	finishedJob(r, "a")
	require.Empty(t, r.Check())
}

func TestCheck_SecondGrantUnderALiveLeaseIsADoubleGrant(t *testing.T) {
	r := testRun(false)
	j, _ := finishedJob(r, "a")
	r.rec.addGrant(&grant{jobID: j.id, leaseID: "L2", runner: "r2", source: "pending", grantedAt: 100_100, expiresAt: 100_100 + lease})
	require.Contains(t, kinds(r.Check()), DoubleGrant)
}

func TestCheck_RegrantAfterTheLeaseLapsedIsFine(t *testing.T) {
	r := testRun(false)
	j := &job{id: "a", pendingDevice: map[string]protocol.PublicIdentity{}, site: &siteResult{leaseID: "L2"}}
	r.rec.jobs["a"], r.rec.order = j, []string{"a"}
	r.rec.addGrant(&grant{jobID: "a", leaseID: "L1", runner: "r1", source: "pending", grantedAt: 100_000, expiresAt: 105_000, fetched: true, abandoned: true})
	r.rec.addGrant(&grant{jobID: "a", leaseID: "L2", runner: "r2", source: "pending", grantedAt: 105_000, expiresAt: 110_000, fetched: true, accepted: true})
	j.accepted = []acceptance{{leaseID: "L2", recv: 106_000}}
	require.Empty(t, r.Check())

	// But a renewal proven by a heartbeat keeps the first grant live.
	r.rec.leases["L1"].renewFloor = 107_000
	require.Equal(t, []string{DoubleGrant}, kinds(r.Check()))
}

func TestCheck_UnsealedGrantEndsWithItsSealingWindow(t *testing.T) {
	r := testRun(false)
	j := &job{id: "a", pendingDevice: map[string]protocol.PublicIdentity{}, site: &siteResult{leaseID: "L2"}}
	r.rec.jobs["a"], r.rec.order = j, []string{"a"}
	r.rec.addGrant(&grant{jobID: "a", leaseID: "L1", runner: "r1", source: "pending", grantedAt: 100_000, expiresAt: 160_000})
	r.rec.addGrant(&grant{jobID: "a", leaseID: "L2", runner: "r2", source: "pending", grantedAt: 100_000 + protocol.AwaitingPayloadMs, expiresAt: 170_000, accepted: true})
	require.Empty(t, r.Check(), "an unsealed grant goes back to the queue after the sealing window")

	r.rec.leases["L1"].sealed = true
	require.Equal(t, []string{DoubleGrant}, kinds(r.Check()), "a sealed grant does not")
}

func TestCheck_ReleaseEndsAGrantFromWhenItWasSent(t *testing.T) {
	r := testRun(false)
	j := &job{id: "a", pendingDevice: map[string]protocol.PublicIdentity{}, site: &siteResult{leaseID: "L2"}}
	r.rec.jobs["a"], r.rec.order = j, []string{"a"}
	r.rec.addGrant(&grant{jobID: "a", leaseID: "L1", runner: "r1", source: "pending", grantedAt: 100_000, expiresAt: 160_000, fetched: true, releasedAt: 101_000})
	r.rec.addGrant(&grant{jobID: "a", leaseID: "L2", runner: "r2", source: "pending", grantedAt: 101_000, expiresAt: 170_000, accepted: true})
	require.Empty(t, r.Check())
	r.rec.leases["L2"].grantedAt = 100_999
	require.Equal(t, []string{DoubleGrant}, kinds(r.Check()))
}

func TestCheck_GrantAfterTheResultWasAccepted(t *testing.T) {
	r := testRun(false)
	j, g := finishedJob(r, "a")
	g.expiresAt = 100_100 // lapsed, so only the finished job forbids a grant
	r.rec.addGrant(&grant{jobID: j.id, leaseID: "L2", runner: "r2", source: "pending", grantedAt: 100_300, expiresAt: 100_300 + lease})
	require.Equal(t, []string{DoubleGrant}, kinds(r.Check()))
}

func TestCheck_LostAndUncollected(t *testing.T) {
	r := testRun(false)
	j, _ := finishedJob(r, "a")
	j.site = nil
	require.Equal(t, []string{ResultNeverCollected}, kinds(r.Check()))
	j.accepted = nil
	require.Equal(t, []string{Lost}, kinds(r.Check()))
}

func TestCheck_TwoAcceptedResults(t *testing.T) {
	r := testRun(false)
	j, _ := finishedJob(r, "a")
	j.accepted = append(j.accepted, acceptance{leaseID: "other", recv: 100_000})
	require.Contains(t, kinds(r.Check()), ResultTwice)
}

func TestCheck_ReplayNotAnsweredDuplicate(t *testing.T) {
	r := testRun(false)
	j, g := finishedJob(r, "a")
	j.replays = []replay{{leaseID: g.leaseID, answer: protocol.ResultResponse{Accepted: false, Duplicate: true, State: "done"}}}
	require.Empty(t, r.Check())
	j.replays = append(j.replays, replay{leaseID: g.leaseID, answer: protocol.ResultResponse{Accepted: true, State: "done"}})
	require.Equal(t, []string{DuplicateNotAnswered}, kinds(r.Check()))
	j.replays = []replay{{leaseID: g.leaseID, err: "403", refused: true}}
	require.Equal(t, []string{DuplicateNotAnswered}, kinds(r.Check()))
	j.replays = []replay{{leaseID: g.leaseID, err: "503 or no answer"}}
	require.Empty(t, r.Check(), "a replay that got no answer says nothing either way")
}

func TestCheck_FirstSubmissionAnsweredDuplicateWithoutARetry(t *testing.T) {
	r := testRun(false)
	j, _ := finishedJob(r, "a")
	j.accepted[0].duplicate = true
	require.Equal(t, []string{Inconsistent}, kinds(r.Check()))
	j.accepted[0].retried = true
	require.Empty(t, r.Check())
}

func TestCheck_FirstEnqueueFindsTheJobOnlyAfterATryThatMayHaveCreatedIt(t *testing.T) {
	r := testRun(false)
	j, _ := finishedJob(r, "a")
	j.enqueueState = "awaiting-payload"
	require.Equal(t, []string{Inconsistent}, kinds(r.Check()))
	// The try before answered 503 or not at all: it may have created the
	// job, which a daemon then claimed.
	j.enqueueRetried = true
	require.Empty(t, r.Check())
}

func TestCheck_LeaseNotFromTheStoreClock(t *testing.T) {
	r := testRun(false)
	_, g := finishedJob(r, "a")
	g.grantedAt += 60_000 // a relay stamping leases with a clock 60 s fast
	g.expiresAt += 60_000
	require.Contains(t, kinds(r.Check()), LeaseClock)
}

// A lease handed back to its holder (RD-D14) by the first claim answer the
// daemon got: its claim round trip brackets the hand-back, not the first
// grant, which the site saw in pending.
func TestCheck_LeaseHandedBackByTheFirstAnswerTheDaemonGot(t *testing.T) {
	r := testRun(false)
	_, g := finishedJob(r, "a")
	regranted := g.grantedAt
	g.grantedAt -= 11_000 // first granted 11 s before the claim that answered
	require.Contains(t, kinds(r.Check()), LeaseClock)
	g.regrantedAt = regranted
	require.Empty(t, r.Check())
}

func TestCheck_ServerErrors(t *testing.T) {
	r := testRun(false)
	r.st.observeAttempt(attempt{endpoint: "claim", status: 503, code: "server-error", retryAfter: "1"})
	require.Equal(t, []string{ServerError}, kinds(r.Check()))

	r = testRun(true)
	r.st.observeAttempt(attempt{endpoint: "claim", status: 503, code: "server-error", retryAfter: "1"})
	require.Empty(t, r.Check(), "an expected outage's 503")
	r.st.observeAttempt(attempt{endpoint: "claim", status: 503, code: "server-error"})
	r.st.observeAttempt(attempt{endpoint: "fetch", status: 500, code: "server-error", retryAfter: "1"})
	require.Equal(t, []string{ServerError, ServerError}, kinds(r.Check()), "a 503 without Retry-After, and any 500")
}

// crossRun is a run with one "2" lane and one "0" daemon of owner o.
func crossRun() (*Run, *daemon, *lane) {
	r := testRun(false)
	ln := &lane{proto: ProtocolV2, siteID: "site_b"}
	d := &daemon{run: r, proto: ProtocolV0, dev: peer.DemoDevice{RunnerID: "r0", Owner: "o"}}
	return r, d, ln
}

func TestCheck_AJobOfTheOtherProtocolOfferedToADaemonIsCrossProtocol(t *testing.T) {
	r, d, ln := crossRun()
	key := jobKey(ln.siteID, "a")
	r.rec.jobs[key] = &job{key: key, id: "a", lane: ln, owner: "o", pendingDevice: map[string]protocol.PublicIdentity{}}
	r.rec.order = []string{key}
	d.recordGrant(claimedJob{key: key, id: "a", owner: "o", lease: protocol.Lease{ID: "L1", RunnerID: "r0", ExpiresAt: 105_000}}, lease, 99_990, 100_010, "h")
	vs := r.Check()
	require.Contains(t, kinds(vs), CrossProtocol)
	require.Contains(t, Summary(vs, 5), `site_b/a: a protocol "2" job was offered to r0, a protocol "0" daemon`)

	// The same grant to a "2" daemon is fine on that score.
	r2, d2, ln2 := crossRun()
	d2.proto = ProtocolV2
	r2.rec.jobs[key] = &job{key: key, id: "a", lane: ln2, owner: "o", pendingDevice: map[string]protocol.PublicIdentity{}}
	r2.rec.order = []string{key}
	d2.recordGrant(claimedJob{key: key, id: "a", owner: "o", lease: protocol.Lease{ID: "L1", RunnerID: "r0", ExpiresAt: 105_000}}, lease, 99_990, 100_010, "h")
	require.NotContains(t, kinds(r2.Check()), CrossProtocol)
}

func TestCheck_AClaimAnswerTheDaemonCannotReadIsCrossProtocol(t *testing.T) {
	r, d, _ := crossRun()
	d.noteUnreadable(errors.New("claim: no answer"))
	require.Empty(t, r.Check(), "a transport failure says nothing about the answer")
	d.noteUnreadable(fmt.Errorf("run: %w", &peer.DecodeError{Endpoint: "claim", Status: 200, Body: []byte(`{"jobs":[{"audience":"self"}]}`), Err: errors.New("bad audience")}))
	require.Equal(t, []string{CrossProtocol}, kinds(r.Check()))
}

func TestCheck_JobsOfTwoSitesUnderOneIDAreJudgedApart(t *testing.T) {
	r := testRun(false)
	for _, site := range []string{"site_a", "site_b"} {
		key := jobKey(site, "same")
		j := &job{key: key, id: "same", lane: &lane{proto: ProtocolV2, siteID: site}, pendingDevice: map[string]protocol.PublicIdentity{}, enqueued: true, enqueueState: "queued"}
		r.rec.jobs[key], r.rec.order = j, append(r.rec.order, key)
		g := r.rec.addGrant(&grant{jobID: key, leaseID: site + "-L1", runner: "r1", source: "pending", grantedAt: 100_000, expiresAt: 105_000, sealed: true, fetched: true, accepted: true})
		j.accepted = []acceptance{{leaseID: g.leaseID, runner: "r1", recv: 100_200}}
		if site == "site_a" {
			j.site = &siteResult{leaseID: g.leaseID, runner: "r1"}
		}
	}
	vs := r.Check()
	require.Len(t, vs, 1, Summary(vs, 5))
	require.Equal(t, ResultNeverCollected, vs[0].Kind)
	require.Equal(t, "site_b", vs[0].Site)
}

func TestDeviceProtocols_MixedGivesEveryOwnerBothWhereItCan(t *testing.T) {
	devs := func(owners ...string) []peer.DemoDevice {
		var out []peer.DemoDevice
		for _, o := range owners {
			out = append(out, peer.DemoDevice{Owner: o})
		}
		return out
	}
	cfg := Config{Protocol: ProtocolMixed, Keys: peer.DemoKeys{Devices: devs("a", "b", "a", "b")}, Daemons: 4}
	require.Equal(t, []string{"0", "2", "2", "0"}, deviceProtocols(cfg), "each owner has a daemon of each protocol")
	cfg = Config{Protocol: ProtocolMixed, Keys: peer.DemoKeys{Devices: devs("a", "b", "c")}, Daemons: 3}
	require.Equal(t, []string{"0", "2", "0"}, deviceProtocols(cfg), "owners of one device split between the protocols")
	cfg = Config{Protocol: ProtocolV2, Keys: peer.DemoKeys{Devices: devs("a", "b")}, Daemons: 2}
	require.Equal(t, []string{"2", "2"}, deviceProtocols(cfg))
}

func TestCheck_AnAnswerThePeerCannotReadIsInconsistentOncePerEndpoint(t *testing.T) {
	r := testRun(false)
	bad := &peer.DecodeError{Endpoint: "site/pending", Status: 200, Body: []byte(`{"jobs":null}`), Err: errors.New("jobs: not an array")}
	r.noteUnreadable("site/pending", errors.New("no answer"))
	require.Empty(t, r.Check())
	for range 3 {
		r.noteUnreadable("site/pending", fmt.Errorf("site/pending: %w", bad))
	}
	r.noteUnreadable("claim", bad)
	require.Equal(t, []string{Inconsistent}, kinds(r.Check()), "one per endpoint; claims are judged as cross-protocol apart")
	require.Equal(t, 3, r.rec.unreadable["site/pending"])
}

func TestCheck_AJobLeftUnsealedMustGoBackToItsClaimantOnly(t *testing.T) {
	build := func(second string, at int64) *Run {
		r := testRun(false)
		key := jobKey("site_a", "a")
		j := &job{key: key, id: "a", lane: &lane{proto: ProtocolV2, siteID: "site_a"}, pendingDevice: map[string]protocol.PublicIdentity{}, enqueued: true, enqueueState: "queued"}
		r.rec.jobs[key], r.rec.order = j, []string{key}
		r.rec.addGrant(&grant{jobID: key, leaseID: "L1", runner: "r1", source: "pending", grantedAt: 100_000, expiresAt: 160_000, unsealed: true})
		r.rec.addGrant(&grant{jobID: key, leaseID: "L2", runner: second, source: "pending", grantedAt: at, expiresAt: at + 60_000, sealed: true, fetched: true, accepted: true})
		j.accepted = []acceptance{{leaseID: "L2", runner: second, recv: at + 900}}
		j.site = &siteResult{leaseID: "L2", runner: second}
		return r
	}
	require.Empty(t, build("r1", 110_100).Check(), "back to the runner that let it lapse")
	vs := build("r2", 110_100).Check()
	require.Equal(t, []string{Reoffer}, kinds(vs), Summary(vs, 5))
	require.Empty(t, build("r2", 120_000).Check(), "anyone, once a sealing window passed after the lapse (P2-D8)")
}

// A result under a lease the site never saw is opened with a device pending
// showed for the same job under another lease (a payload sealed for one
// grant is taken for the next grant of that device), and with no other.
func TestSawPendingOnOnlyTheDevicesPendingNamedForTheJob(t *testing.T) {
	d1 := protocol.PublicIdentity{Identity: "device-1", Encryption: "enc-1", EncryptionSig: "sig-1"}
	d2 := protocol.PublicIdentity{Identity: "device-2", Encryption: "enc-2", EncryptionSig: "sig-2"}
	j := &job{id: "a", pendingDevice: map[string]protocol.PublicIdentity{"L1": d1}}
	got, ok := j.sawPendingOn(d1)
	require.True(t, ok)
	require.Equal(t, d1, got)
	_, ok = j.sawPendingOn(d2)
	require.False(t, ok, "a device pending never named for this job")
	_, ok = j.sawPendingOn(protocol.PublicIdentity{Identity: "device-1"})
	require.False(t, ok, "the whole identity must match, not the key alone")
}
