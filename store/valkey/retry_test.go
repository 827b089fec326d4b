package valkey

import (
	"bytes"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// dropProxy is a TCP proxy in front of a real server. Once armed with a
// needle, it lets the next command carrying the needle reach the server,
// holds back the server's reply until the test lets go, then drops the
// connection instead of forwarding it: a network that fails after the
// write ran. valkey-go then re-sends the command on a new connection.
type dropProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	trap  *trap
	sends int // commands seen carrying the current needle
}

// trap is one armed drop.
type trap struct {
	needle []byte
	sprung bool
	held   chan struct{} // signalled once the reply is withheld
	drop   chan struct{} // closed by the test: drop the connection
}

func startDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &dropProxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

// arm makes the next command carrying needle the one whose reply is lost.
func (p *dropProxy) arm(needle string) *trap {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trap = &trap{needle: []byte(needle), held: make(chan struct{}, 1), drop: make(chan struct{})}
	p.sends = 0
	return p.trap
}

func (p *dropProxy) sent() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sends
}

// spring returns the trap when chunk is the first command to carry its
// needle, and counts every command that does.
func (p *dropProxy) spring(chunk []byte) *trap {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.trap == nil || !bytes.Contains(chunk, p.trap.needle) {
		return nil
	}
	p.sends++
	if p.trap.sprung {
		return nil
	}
	p.trap.sprung = true
	return p.trap
}

func (p *dropProxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	var sprung atomic.Pointer[trap]
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if tr := p.spring(buf[:n]); tr != nil {
					sprung.Store(tr)
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = client.Close()
		_ = server.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if tr := sprung.Load(); n > 0 && tr != nil {
			// The server ran the command and answered: lose the answer.
			tr.held <- struct{}{}
			<-tr.drop
			break
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = client.Close()
	_ = server.Close()
}

// lossyStores is a store reached through a dropProxy and the same store
// reached directly, for looking at the state between the first run and the
// retry.
type lossyStores struct {
	proxy  *dropProxy
	lossy  *Store
	direct *Store
}

func newLossyStores(t *testing.T) *lossyStores {
	t.Helper()
	return newLossyStoresOn(t, valkeytest.Start(t), nil)
}

// newLossyStoresOn is newLossyStores on srv; retries, when set, gives
// the lossy client the retries Options would (else valkey-go's own).
func newLossyStoresOn(t *testing.T, srv *valkeytest.Server, retries *Options) *lossyStores {
	t.Helper()
	if srv.Cluster {
		t.Skip("the drop proxy fronts one server")
	}
	p := startDropProxy(t, srv.Addr)
	// No background PING: its reply, arriving first, would be the one the
	// proxy withholds, before the server ran the call.
	opt := valkey.ClientOption{InitAddress: []string{p.ln.Addr().String()}, DisableCache: true, ForceSingleClient: true}
	if retries != nil {
		o := *retries
		o.Addrs = opt.InitAddress
		var err error
		opt, err = o.clientOption()
		require.NoError(t, err)
	}
	opt.Dialer.KeepAlive = -1
	client, err := valkey.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(client.Close)
	lossy := newTestStore(t, client)
	direct, err := NewFromClientForTest(srv.Client(t), lossy.prefix)
	require.NoError(t, err)
	// A script the server lacks is first refused NOSCRIPT: load them all,
	// so that the reply dropped is the one of the run.
	require.NoError(t, lossy.LoadScripts(t.Context()))
	return &lossyStores{proxy: p, lossy: lossy, direct: direct}
}

// dropReply runs act, which makes one store call carrying needle through
// the proxy, and loses that call's reply after the server ran it. Between
// the first run and the retry the store clock moves on, so that a re-run
// that stamped anything would show. It checks the call was re-sent and
// that the retry changed nothing, and returns act's error.
func (h *lossyStores) dropReply(t *testing.T, needle string, act func() error) error {
	t.Helper()
	tr := h.proxy.arm(needle)
	done := make(chan error, 1)
	go func() { done <- act() }()
	select {
	case <-tr.held:
	case err := <-done:
		t.Fatalf("the call answered (%v) before its reply was withheld", err)
	}
	advance(t, h.direct, time.Second)
	firstRun := dump(t, h.direct)
	close(tr.drop)
	err := <-done
	require.GreaterOrEqual(t, h.proxy.sent(), 2, "valkey-go re-sent the call after the lost reply")
	require.Equal(t, firstRun, dump(t, h.direct), "the retry changed nothing")
	return err
}

// heldBy pairs runner as alice's device, enqueues job id and has runner
// claim it, all directly, and returns the grant.
func (h *lossyStores) heldBy(t *testing.T, runner, id string) protocol.ClaimedStub {
	t.Helper()
	ctx := t.Context()
	_, err := h.direct.Pair(ctx, store.PairInput{RunnerID: runner, Owner: "alice", Device: testDevice})
	require.NoError(t, err)
	_, err = h.direct.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: testStub(t, h.direct, id)})
	require.NoError(t, err)
	return mustClaim(t, h.direct, runner, 1)[0]
}

// refusal is the refusal code of err, or "" when it is none.
func refusal(err error) store.RefusalCode {
	var r *store.Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

// TestRetryAfterALostReplyGetsTheFirstAnswer drops the reply of each
// write after the server ran it and checks the answer the caller gets
// from valkey-go's retry is the one the first run gave.
func TestRetryAfterALostReplyGetsTheFirstAnswer(t *testing.T) {
	ctx := t.Context()
	h := newLossyStores(t)
	s := h.lossy

	var enq store.EnqueueResult
	err := h.dropReply(t, `"drop-enqueue"`, func() (err error) {
		enq, err = s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: testStub(t, s, "drop-enqueue")})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, store.EnqueueResult{State: store.Queued, Created: true}, enq, "enqueue: the retry says it created the job")

	var granted []protocol.ClaimedStub
	require.NoError(t, h.dropReply(t, "drop-claimer", func() (err error) {
		granted, err = s.Claim(ctx, claimInput("drop-claimer", 1))
		return err
	}))
	require.Len(t, granted, 1, "claim: the retry answers with the first grant")
	job, ok, err := s.Job(ctx, testSite, granted[0].ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, granted[0].Lease.ID, job.ClaimedBy.LeaseID, "claim: the grant answered is the one held")
	c := granted[0]

	var renewed store.RenewResult
	require.NoError(t, h.dropReply(t, c.Lease.ID, func() (err error) {
		renewed, err = s.Renew(ctx, store.RenewInput{RunnerID: "drop-claimer", Leases: []protocol.LeaseRef{{JobID: c.ID, LeaseID: c.Lease.ID}}, LeaseMs: 60_000})
		return err
	}))
	job, _, err = s.Job(ctx, testSite, c.ID)
	require.NoError(t, err)
	require.Equal(t, []store.Renewal{{JobID: c.ID, ExpiresAt: job.ClaimedBy.LeaseExpiresAt}}, renewed.Renewed, "renew: the retry answers the expiry the first run set")

	err = h.dropReply(t, "drop-enqueue", func() error {
		return s.Payload(ctx, store.PayloadInput{JobID: c.ID, SiteID: testSite, Envelope: env(protocol.DirectionPayload, "p")})
	})
	require.NoError(t, err, "payload: the retry answers the seal was stored, not too-late")

	var res store.ResultOutcome
	err = h.dropReply(t, c.Lease.ID, func() (err error) {
		res, err = s.Result(ctx, store.ResultInput{LeaseInput: leaseOf(c), Envelope: env(protocol.DirectionResult, "r"), Disposition: "ok"})
		return err
	})
	require.NoError(t, err)
	require.False(t, res.Duplicate, "result: the retry answers a first delivery")

	var cancelled bool
	require.NoError(t, h.dropReply(t, "drop-enqueue", func() (err error) {
		cancelled, err = s.Cancel(ctx, store.CancelInput{JobID: c.ID, SiteID: testSite})
		return err
	}))
	require.True(t, cancelled, "cancel: the retry answers the job exists")
}

// TestRetryOfReleaseAndCancelRequestsGetsTheFirstAnswer covers the writes
// that settle a grant: a release that requeued and the cancel requests
// that settled a lapsed window.
func TestRetryOfReleaseAndCancelRequestsGetsTheFirstAnswer(t *testing.T) {
	ctx := t.Context()
	h := newLossyStores(t)
	s := h.lossy
	mustEnqueue(t, s, "a", "b")
	granted := mustClaim(t, s, "r1", 2)
	require.Len(t, granted, 2)

	var released []string
	require.NoError(t, h.dropReply(t, granted[0].Lease.ID, func() (err error) {
		released, err = s.Release(ctx, store.ReleaseInput{RunnerID: "r1", Leases: []protocol.LeaseRef{{JobID: granted[0].ID, LeaseID: granted[0].Lease.ID}}, Reason: "refused"})
		return err
	}))
	require.Equal(t, []string{granted[0].ID}, released, "release: the retry names the job the first run requeued")

	_, err := s.Cancel(ctx, store.CancelInput{JobID: granted[1].ID, SiteID: testSite})
	require.NoError(t, err)
	var requests []protocol.LeaseRef
	require.NoError(t, h.dropReply(t, "r1", func() (err error) {
		requests, err = s.CancelRequests(ctx, store.CancelRequestsInput{RunnerID: "r1"})
		return err
	}))
	require.Equal(t, []protocol.LeaseRef{{JobID: granted[1].ID, LeaseID: granted[1].Lease.ID}}, requests, "cancelRequests: the retry lists the first run's grants")
}

// TestRetryOfPresenceAndPairingWritesGetsTheFirstAnswer covers pair,
// touch and a pairing start, whose re-runs would stamp a later time.
func TestRetryOfPresenceAndPairingWritesGetsTheFirstAnswer(t *testing.T) {
	ctx := t.Context()
	h := newLossyStores(t)
	s := h.lossy

	var paired store.Presence
	require.NoError(t, h.dropReply(t, "drop-runner", func() (err error) {
		paired, err = s.Pair(ctx, store.PairInput{RunnerID: "drop-runner", Owner: "alice", Device: testDevice})
		return err
	}))
	stored, ok, err := s.Presence(ctx, "drop-runner")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, stored, paired, "pair: the retry answers the presence the first run stored")

	var known bool
	require.NoError(t, h.dropReply(t, "drop-runner", func() (err error) {
		known, err = s.Touch(ctx, store.TouchInput{RunnerID: "drop-runner"})
		return err
	}))
	require.True(t, known, "touch: the retry answers the runner is known")

	pending := store.PendingPairing{DeviceCode: "drop-device-code", UserCode: "DROPCODE", Device: testDevice}
	var expiresAt int64
	require.NoError(t, h.dropReply(t, "drop-device-code", func() (err error) {
		expiresAt, err = s.Pairings().StartPairing(ctx, store.StartPairingInput{Pending: pending, TTLMs: 600_000, Capacity: 10})
		return err
	}))
	got, ok, err := s.Pairings().PairingByDeviceCode(ctx, "drop-device-code")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, got.ExpiresAt, expiresAt, "startPairing: the retry answers the expiry the first run stored")
}

// TestP2_D11_RetriedRefusalsOfAnotherDeviceAreTheFirstAnswer: a refusal is an
// answer too, so a retried seal to another device and a retried result
// from another device are refused again, from the memo, changing nothing.
func TestP2_D11_RetriedRefusalsOfAnotherDeviceAreTheFirstAnswer(t *testing.T) {
	ctx := t.Context()
	h := newLossyStores(t)
	s := h.lossy
	mustEnqueue(t, s, "d11")
	c := mustClaim(t, s, "r1", 1)[0]

	stale := env(protocol.DirectionPayload, "stale")
	stale.RecipientKeyID = "an-earlier-holder"
	err := h.dropReply(t, "an-earlier-holder", func() error {
		return s.Payload(ctx, store.PayloadInput{JobID: c.ID, SiteID: testSite, Envelope: stale})
	})
	require.Equal(t, store.RefusedOtherDevice, refusal(err), "payload: %v", err)

	require.NoError(t, s.Payload(ctx, store.PayloadInput{JobID: c.ID, SiteID: testSite, Envelope: env(protocol.DirectionPayload, "p")}))
	forged := env(protocol.DirectionResult, "forged")
	forged.SenderKeyID = "another-device"
	err = h.dropReply(t, "another-device", func() error {
		_, err := s.Result(ctx, store.ResultInput{LeaseInput: leaseOf(c), Envelope: forged, Disposition: "ok"})
		return err
	})
	require.Equal(t, store.RefusedOtherDevice, refusal(err), "result: %v", err)
}

// TestRetryOfOneCallFindsItsAnswerAfterTheCallersNextCall: a site seals
// two jobs at once; the first call's reply is lost and the second runs
// before the first is retried. The retry still gets the first call's own
// answer, because the memo keeps a caller's newest answers per operation,
// not only its last.
func TestRetryOfOneCallFindsItsAnswerAfterTheCallersNextCall(t *testing.T) {
	ctx := t.Context()
	h := newLossyStores(t)
	mustEnqueue(t, h.direct, "first", "second")
	granted := mustClaim(t, h.direct, "r1", 2)
	require.Len(t, granted, 2)

	tr := h.proxy.arm("first")
	done := make(chan error, 1)
	go func() {
		done <- h.lossy.Payload(ctx, store.PayloadInput{JobID: "first", SiteID: testSite, Envelope: env(protocol.DirectionPayload, "1")})
	}()
	<-tr.held
	require.NoError(t, h.direct.Payload(ctx, store.PayloadInput{JobID: "second", SiteID: testSite, Envelope: env(protocol.DirectionPayload, "2")}),
		"the site's second seal, between the first's run and its retry")
	close(tr.drop)
	require.NoError(t, <-done, "the first seal's retry answers it was stored")
	require.GreaterOrEqual(t, h.proxy.sent(), 2)
}

// TestRetryOfASiteWriteFindsItsAnswerAfterManyOthers: a busy site goes on
// writing while valkey-go re-sends one of its lost calls, here 200 enqueues
// (more than a memo of 32 kept) between the first run and the retry; the
// retry still answers its first answer, and the job is not granted twice.
func TestRetryOfASiteWriteFindsItsAnswerAfterManyOthers(t *testing.T) {
	ctx := t.Context()
	h := newLossyStores(t)
	tr := h.proxy.arm("first")
	type answer struct {
		res store.EnqueueResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := h.lossy.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: testStub(t, h.lossy, "first")})
		done <- answer{res, err}
	}()
	<-tr.held
	require.Len(t, mustClaim(t, h.direct, "r1", 1), 1, "the job is claimed between its enqueue and the retry")
	for i := range 200 {
		mustEnqueue(t, h.direct, "other-"+strconv.Itoa(i))
	}
	close(tr.drop)
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, store.EnqueueResult{State: store.Queued, Created: true}, got.res, "the retry answers the first run's answer")
	require.GreaterOrEqual(t, h.proxy.sent(), 2)
}

// TestMemoKeepsACallersNewestAnswersInOneKey: a re-run finds its answer
// while fewer than the caller's memo depth of later calls of the operation
// ran, and only then; however many calls, the memo is one key per caller
// and operation, which expires rememberFor after the caller's last call.
func TestMemoKeepsACallersNewestAnswersInOneKey(t *testing.T) {
	ctx := t.Context()
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	var first *call
	s.onCall = func(c call) {
		if first == nil {
			first = &c
		}
	}
	known, err := s.Touch(ctx, store.TouchInput{RunnerID: "r1"})
	require.NoError(t, err)
	require.False(t, known)
	s.onCall = nil
	rerunTouch := func() string {
		msg, err := s.exec(ctx, *first)
		require.NoError(t, err)
		parts, err := msg.AsStrSlice()
		require.NoError(t, err)
		return parts[1]
	}

	_, err = s.Pair(ctx, store.PairInput{RunnerID: "r1", Owner: "alice", Device: testDevice})
	require.NoError(t, err)
	for range memoAnswers["r"] - 1 {
		known, err := s.Touch(ctx, store.TouchInput{RunnerID: "r1"})
		require.NoError(t, err)
		require.True(t, known)
	}
	require.Equal(t, "0", rerunTouch(), "the re-run gets its first answer while it is among the newest")
	_, err = s.Touch(ctx, store.TouchInput{RunnerID: "r1"})
	require.NoError(t, err)
	require.Equal(t, "1", rerunTouch(), "past the memo's depth the call runs again")
	require.Len(t, memoReplies(t, s, s.memoKey(store.OpTouch, "r1")), memoAnswers["r"], "the memo holds its depth of answers, no more")

	keys, err := s.client.Do(ctx, s.client.B().Keys().Pattern(globEscape(s.prefix+memoKeyPrefix)+"*").Build()).AsStrSlice()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{s.memoKey(store.OpTouch, "r1"), s.memoKey(store.OpPair, "r1")}, keys, "one memo per caller and operation")
	ttl, err := s.client.Do(ctx, s.client.B().Pttl().Key(s.memoKey(store.OpTouch, "r1")).Build()).AsInt64()
	require.NoError(t, err)
	require.Positive(t, ttl)
	require.LessOrEqual(t, ttl, rememberFor.Milliseconds())
}

// TestEveryWriteIsRememberedOrAnswersAlike keeps a new write from
// answering retries from the new state unnoticed: each write script either
// keeps a memo, is listed as answering alike, or is never re-sent: one of
// the three.
func TestEveryWriteIsRememberedOrAnswersAlike(t *testing.T) {
	scripts, err := loadScripts()
	require.NoError(t, err)
	for _, op := range scripted() {
		sc := scripts[op]
		if sc.readOnly {
			require.False(t, sc.remembers, "%s reads, and keeps no memo", op)
			continue
		}
		kinds := 0
		for _, is := range []bool{sc.remembers, operations[op].alike != "", operations[op].neverResent} {
			if is {
				kinds++
			}
		}
		require.Equal(t, 1, kinds, "%s must keep a memo, answer alike or never be re-sent", op)
		if sc.remembers {
			require.Contains(t, memoAnswers, operations[op].memo, "%s: its caller kind has a memo depth", op)
		}
	}
}

// TestRetriedAdmissionAnswersFirstAndChargesOnce drops the reply of
// admitted calls: the retry answers as the first run did, a grant and
// then a rate-limit refusal with the first run's wait, and the bucket is
// charged once (dropReply checks the retry changed nothing, bucket
// included).
func TestRetriedAdmissionAnswersFirstAndChargesOnce(t *testing.T) {
	ctx := t.Context()
	h := newLossyStores(t)
	s := h.lossy
	_, err := h.direct.Pair(ctx, store.PairInput{RunnerID: "drop-admitted", Owner: "alice", Device: testDevice})
	require.NoError(t, err)
	_, err = h.direct.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: testStub(t, h.direct, "admitted-job")})
	require.NoError(t, err)
	rate := ratelimit.Rate{Every: time.Hour, Burst: 2}
	admit := &store.Admission{
		Paired: &store.Paired{Owner: "alice", Device: testDevice},
		Charge: &store.Charge{Key: "runner:drop-admitted", Every: rate.Every, Burst: rate.Burst},
	}

	in := claimInput("drop-admitted", 1)
	in.Touch, in.Admit = true, admit
	var granted []protocol.ClaimedStub
	require.NoError(t, h.dropReply(t, "drop-admitted", func() (err error) {
		granted, err = s.Claim(ctx, in)
		return err
	}))
	require.Len(t, granted, 1, "the retry answers with the first grant")

	l, err := h.direct.Limiter(rate)
	require.NoError(t, err)
	d, err := l.Allow(ctx, "runner:drop-admitted")
	require.NoError(t, err)
	require.True(t, d.Allowed, "the claim and its retry took one request of two")

	err = h.dropReply(t, "drop-admitted", func() error {
		_, err := s.Touch(ctx, store.TouchInput{RunnerID: "drop-admitted", Admit: admit})
		return err
	})
	var r *store.Refusal
	require.ErrorAs(t, err, &r)
	require.Equal(t, store.RefusedRateLimited, r.Code)
	d, err = l.Allow(ctx, "runner:drop-admitted")
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Greater(t, r.RetryAfter, d.RetryAfter, "the retry answers the first run's wait, from before the clock moved")
}

// TestRetriedHeartbeatAnswersFirst drops the reply of a heartbeat that
// stamps, sweeps and renews: the retry answers the renewal the first run
// made, and changes nothing (dropReply).
func TestRetriedHeartbeatAnswersFirst(t *testing.T) {
	ctx := t.Context()
	h := newLossyStores(t)
	c := h.heldBy(t, "drop-beater", "beaten-job")
	in := store.HeartbeatInput{Proto: store.Proto0, SiteID: testSite, RunnerID: "drop-beater", Touch: true, Serving: true,
		Leases: []protocol.LeaseRef{{JobID: c.ID, LeaseID: c.Lease.ID}}, LeaseMs: 60_000}
	var res store.HeartbeatResult
	require.NoError(t, h.dropReply(t, "drop-beater", func() (err error) {
		res, err = h.lossy.Heartbeat(ctx, in)
		return err
	}))
	job, _, err := h.direct.Job(ctx, testSite, c.ID)
	require.NoError(t, err)
	require.Equal(t, []store.Renewal{{JobID: c.ID, ExpiresAt: job.ClaimedBy.LeaseExpiresAt}}, res.Renewed.Renewed,
		"the retry answers the expiry the first run set")
	p, _, err := h.direct.Presence(ctx, "drop-beater")
	require.NoError(t, err)
	require.Equal(t, job.ClaimedBy.LeaseExpiresAt-60_000, p.LastSeenAt, "stamped once, when the lease was renewed")
}

// TestChargedFetchIsReSentUnchargedAfterALostReply: fetch keeps no memo,
// so valkey-go never re-sends a fetch that spends a rate request; the
// store sends it again without its charge (outage.go). The caller gets
// the payload, and the bucket gave one request, not two.
func TestChargedFetchIsReSentUnchargedAfterALostReply(t *testing.T) {
	ctx := t.Context()
	h := newLossyStores(t)
	c := h.heldBy(t, "drop-fetcher", "fetched-job")
	require.NoError(t, h.direct.Payload(ctx, store.PayloadInput{JobID: c.ID, SiteID: testSite, Envelope: env(protocol.DirectionPayload, "fetched")}))
	rate := ratelimit.Rate{Every: time.Hour, Burst: 2}
	in := store.LeaseInput{SiteID: testSite, JobID: c.ID, RunnerID: "drop-fetcher", LeaseID: c.Lease.ID,
		Admit: &store.Admission{Charge: &store.Charge{Key: "runner:drop-fetcher", Every: rate.Every, Burst: rate.Burst}}}

	tr := h.proxy.arm(c.Lease.ID)
	done := make(chan error, 1)
	var fetched protocol.SealedEnvelope
	go func() {
		var err error
		fetched, err = h.lossy.Fetch(ctx, in)
		done <- err
	}()
	<-tr.held
	close(tr.drop)
	require.NoError(t, <-done, "the store sent the fetch again")
	require.Equal(t, "ct-fetched", fetched.Ciphertext)
	require.Equal(t, 2, h.proxy.sent(), "sent twice: valkey-go did not re-send the charged fetch, the store did, once")
	l, err := h.direct.Limiter(rate)
	require.NoError(t, err)
	d, err := l.Allow(ctx, "runner:drop-fetcher")
	require.NoError(t, err)
	require.True(t, d.Allowed, "the fetch took one request of two")
	job, _, err := h.direct.Job(ctx, testSite, c.ID)
	require.NoError(t, err)
	require.Equal(t, store.Running, job.State, "the one run fetched the job")
}

// memoReplies reads the replies a memo keeps, by request id.
func memoReplies(t *testing.T, s *Store, key string) map[string]string {
	t.Helper()
	fields, err := s.client.Do(t.Context(), s.client.B().Hgetall().Key(key).Build()).AsStrMap()
	require.NoError(t, err)
	out := map[string]string{}
	for f, v := range fields {
		if id, ok := strings.CutPrefix(f, "="); ok {
			out[id] = v
		}
	}
	return out
}

// A runner's large claims are kept within memoBytes, the newest always,
// and the memo's byte count is the bytes it holds.
func TestMemoKeepsWithinItsBytes(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	fill(t, s, "big", "alice", 0, 6*protocol.MaxClaim)
	key := s.memoKey(store.OpClaim, "r1")
	var sizes []int
	for range 6 {
		require.Len(t, mustClaim(t, s, "r1", protocol.MaxClaim), protocol.MaxClaim)
		kept, total := memoReplies(t, s, key), 0
		for _, v := range kept {
			total += len(v)
		}
		counted, err := s.client.Do(t.Context(), s.client.B().Hget().Key(key).Field("+").Build()).AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, total, counted, "the byte count is what the memo holds")
		require.True(t, total <= memoBytes || len(kept) == 1, "%d bytes in %d answers", total, len(kept))
		sizes = append(sizes, len(kept))
	}
	t.Logf("answers kept after each claim: %v", sizes)
	require.Less(t, sizes[len(sizes)-1], 6, "large answers were dropped for the bound")
}
