package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

// daemon is one test device working through the replicas, speaking one
// protocol.
type daemon struct {
	run   *Run
	dev   peer.DemoDevice
	proto string
	c     daemonClient
	// slots holds one token per job being worked on.
	slots chan struct{}

	mu     sync.Mutex
	active map[string]*held // by lease id
}

// held is a lease the daemon is working under.
type held struct {
	ref    protocol.LeaseRef
	g      *grant
	cancel context.CancelFunc
}

// Abandon stages, decided per lease.
const (
	keepGrant = iota
	abandonAfterClaim
	abandonAfterFetch
)

func (r *Run) newDaemon(ctx context.Context, dev peer.DemoDevice, proto string) (*daemon, error) {
	ccfg := peer.Config{BaseURLs: r.cfg.BaseURLs, HTTPClient: r.http, Kinds: []string{r.cfg.Kind}}
	d := &daemon{run: r, dev: dev, proto: proto, slots: make(chan struct{}, r.cfg.SlotsPerDaemon), active: map[string]*held{}}
	if proto == ProtocolV2 {
		c, err := peer.NewDaemon2(ccfg, dev.Keys, "")
		if err != nil {
			return nil, fmt.Errorf("daemon %s: %w", dev.RunnerID, err)
		}
		d.c = daemon2{c: c, siteIDs: r.siteIDs}
	} else {
		c, err := peer.NewDaemon(ccfg, dev.Keys, "")
		if err != nil {
			return nil, fmt.Errorf("daemon %s: %w", dev.RunnerID, err)
		}
		d.c = daemon0{c: c, siteID: r.cfg.Keys.Site.SiteID}
	}
	var runnerID string
	var sites map[string]protocol.PublicIdentity
	for {
		_, err := r.call(ctx, "pair", func(ctx context.Context) (err error) {
			runnerID, sites, err = d.c.pair(ctx, dev.Owner)
			return err
		})
		if err == nil {
			break
		}
		// Only a store outage is worth waiting out; a refusal is final.
		if st := peer.ErrorStatus(err); (st != 0 && st < 500) || ctx.Err() != nil {
			return nil, fmt.Errorf("daemon %s: %w", dev.RunnerID, err)
		}
		if err := clock.Sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, fmt.Errorf("daemon %s: %w", dev.RunnerID, err)
		}
	}
	if runnerID != dev.RunnerID {
		return nil, fmt.Errorf("daemon %s: the relay paired it as %q", dev.RunnerID, runnerID)
	}
	for _, ln := range r.lanes {
		if ln.proto != proto {
			continue
		}
		if got, ok := sites[ln.keyID]; !ok || got != ln.keys.Public() {
			return nil, fmt.Errorf("daemon %s: the relay did not name site %s with its identity", dev.RunnerID, ln.siteID)
		}
	}
	return d, nil
}

// claimLoop claims as many jobs as the daemon has free slots and starts a
// worker on each, backing off while there is nothing to claim.
func (d *daemon) claimLoop(ctx context.Context) {
	r := d.run
	var backoff time.Duration
	for {
		select {
		case d.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
	more:
		for n < min(r.cfg.SlotsPerDaemon, protocol.MaxClaim) {
			select {
			case d.slots <- struct{}{}:
				n++
			default:
				break more
			}
		}
		sent := nowMs()
		var jobs []claimedJob
		var leaseMs int64
		ci, err := r.call(ctx, "claim", func(ctx context.Context) (err error) {
			jobs, leaseMs, err = d.c.claim(ctx, r.cfg.Kind, n)
			return err
		})
		recv := nowMs()
		unused := n
		if err == nil {
			unused = n - len(jobs)
		}
		for range unused {
			<-d.slots
		}
		if ctx.Err() != nil {
			return
		}
		d.noteUnreadable(err)
		if err != nil || len(jobs) == 0 {
			backoff = min(max(2*backoff, r.cfg.PendingInterval), r.cfg.ClaimBackoff)
			if clock.Sleep(ctx, backoff) != nil {
				return
			}
			continue
		}
		backoff = 0
		r.leaseMs.Store(leaseMs)
		for _, cj := range jobs {
			g := d.recordGrant(cj, leaseMs, sent, recv, ci.host)
			r.wg.Go(func() { d.work(ctx, cj, g) })
		}
	}
}

// noteUnreadable records a claim answer the daemon could not read: for a
// "2" daemon, one the published daemon would refuse whole, such as one
// carrying a "0" stub.
func (d *daemon) noteUnreadable(err error) {
	var bad *peer.DecodeError
	if !errors.As(err, &bad) {
		return
	}
	r := d.run
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	if r.rec.unreadable["claim"] == 0 {
		r.problem(nil, CrossProtocol, "a protocol %q daemon (%s) could not read its claim answer (later ones are counted in the report): %v", d.proto, d.dev.RunnerID, bad)
	}
	r.rec.unreadable["claim"]++
}

// recordGrant notes a grant from a claim answer and checks what the answer
// alone can show.
func (d *daemon) recordGrant(cj claimedJob, leaseMs, sent, recv int64, replica string) *grant {
	r := d.run
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	grantedAt := cj.lease.ExpiresAt - leaseMs
	g := r.rec.addGrant(&grant{
		jobID: cj.key, leaseID: cj.lease.ID, runner: d.dev.RunnerID, proto: d.proto, source: "claim", leaseMs: leaseMs,
		grantedAt: grantedAt, expiresAt: cj.lease.ExpiresAt, claimSent: sent, claimRecv: recv, replica: replica,
	})
	j := r.rec.jobs[cj.key]
	if g.source != "claim" {
		// The site saw this grant in pending before the claim answer
		// arrived; the two must agree, and the claim adds its round trip.
		// Or the first claim's answer never came (a write its replicas did
		// not confirm in time is answered 503), the lease lapsed with the
		// payload sealed, and this claim hands it back to its holder with
		// a fresh expiry (RD-D14).
		sameHolder := g.runner == d.dev.RunnerID && g.jobID == cj.key
		handedBack := sameHolder && grantedAt > g.grantedAt && grantedAt >= g.expiresAt
		if !sameHolder || (g.grantedAt != grantedAt && !handedBack) {
			r.problem(j, Inconsistent, "claim answer gives lease %s to %s on %s at %d; pending showed it for %s at %d",
				cj.lease.ID, d.dev.RunnerID, cj.id, grantedAt, g.runner, g.grantedAt)
		}
		if handedBack {
			g.returned, g.regrantedAt = true, grantedAt
		}
		g.source, g.proto, g.leaseMs, g.claimSent, g.claimRecv, g.replica = "claim", d.proto, leaseMs, sent, recv, replica
		g.expiresAt = max(g.expiresAt, cj.lease.ExpiresAt)
	}
	if j == nil {
		r.problem(nil, Inconsistent, "%s was granted job %q, which this run never published", d.dev.RunnerID, cj.key)
		return g
	}
	if j.lane.proto != d.proto {
		r.problem(j, CrossProtocol, "a protocol %q job was offered to %s, a protocol %q daemon", j.lane.proto, d.dev.RunnerID, d.proto)
	}
	if cj.lease.RunnerID != d.dev.RunnerID {
		r.problem(j, Inconsistent, "the lease granted to %s names runner %s", d.dev.RunnerID, cj.lease.RunnerID)
	}
	// The fixture has no rosters, so every job, of either protocol, may
	// only run on a device of its own owner.
	if cj.owner != d.dev.Owner {
		r.problem(j, Inconsistent, "a %s job of %s was granted to %s, a device of %s", cj.audience, cj.owner, d.dev.RunnerID, d.dev.Owner)
	}
	return g
}

// work takes one granted job through the peer daemon's lifecycle, recording
// what each step shows, and may replay its result.
func (d *daemon) work(ctx context.Context, cj claimedJob, g *grant) {
	r := d.run
	defer func() { <-d.slots }()
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ref := protocol.LeaseRef{JobID: cj.id, LeaseID: cj.lease.ID}
	d.mu.Lock()
	d.active[ref.LeaseID] = &held{ref: ref, g: g, cancel: cancel}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.active, ref.LeaseID)
		d.mu.Unlock()
	}()

	stage := d.abandonStage(ref)
	r.rec.mu.Lock()
	if g.abandoned {
		// Handed back after this daemon dropped it (RD-D14): the published
		// daemon runs a job it is granted again, and so does this one.
		stage = keepGrant
	}
	r.rec.mu.Unlock()
	if stage == abandonAfterClaim {
		d.abandon(g)
		return
	}
	steps, resultCall := d.steps(g, stage)
	ran, err := d.c.work(jctx, cj, func(p json.RawMessage) (json.RawMessage, error) { return echo(p), nil }, steps)
	var failed *peer.StepError
	switch {
	case ran.Dropped:
		return
	case errors.As(err, &failed) && failed.Step == peer.StepOpen:
		// A payload sealed for an earlier holder of the job lands here when
		// the job changed hands between the site's pending read and its
		// payload call: Work refused it, as a real daemon would.
		r.st.note("daemon: payload did not open")
		return
	case errors.As(err, &failed) && failed.Step == peer.StepSeal:
		r.st.note("daemon: seal result: " + failed.Err.Error())
		return
	case err != nil:
		return
	}
	d.recordAcceptance(cj, ref, g, ran.Response, *resultCall)
	if r.cfg.ReplayFraction > 0 && fraction("replay/"+cj.key) < r.cfg.ReplayFraction {
		d.replay(ctx, cj, ref, ran.Envelope)
	}
}

// abandonStage decides, once per lease, whether the daemon drops the grant
// and when.
func (d *daemon) abandonStage(ref protocol.LeaseRef) int {
	cut := d.run.cfg.AbandonFraction
	if cut <= 0 {
		return keepGrant
	}
	switch f := fraction("abandon/" + ref.LeaseID); {
	case f < cut/2:
		return abandonAfterFetch
	case f < cut:
		return abandonAfterClaim
	}
	return keepGrant
}

// fetchBackoff is how far a daemon's fetch poll backs off: "2" daemons
// back off to 1 s as the published daemon does; "0" ones poll evenly.
func (d *daemon) fetchBackoff() time.Duration {
	if d.proto == ProtocolV2 {
		return time.Second
	}
	return 0
}

// resultCall is what the run saw of a result post.
type resultCall struct {
	info callInfo
	recv int64
}

// steps paces Work as this workload wants, and routes its requests through
// the run's timing and retries. The second value is filled in once the
// result is posted.
func (d *daemon) steps(g *grant, stage int) (peer.Steps, *resultCall) {
	r := d.run
	start := time.Now()
	posted := &resultCall{}
	return peer.Steps{
		// The site needs a moment to see the claim in pending and seal it:
		// the first fetch waits for most of the usual time that takes, so
		// that not-ready polls stay few.
		FirstFetchAfter: max(r.cfg.FetchInterval, time.Duration(r.sealWait.Load())*3/4),
		FetchEvery:      r.cfg.FetchInterval,
		FetchBackoffTo:  d.fetchBackoff(),
		FetchFor:        protocol.AwaitingPayloadMs*time.Millisecond + 5*time.Second,
		Persist:         true,
		Send: func(ctx context.Context, endpoint string, request func(context.Context) error) error {
			ci, err := r.call(ctx, endpoint, request)
			switch {
			case endpoint == "fetch" && err == nil:
				r.rec.mu.Lock()
				g.fetched = true
				r.rec.mu.Unlock()
				r.noteSealWait(time.Since(start))
			case endpoint == "result":
				posted.info, posted.recv = ci, nowMs()
			}
			return err
		},
		Opened: func(json.RawMessage) bool {
			if stage == abandonAfterFetch {
				d.abandon(g)
				return false
			}
			return true
		},
		// The lease is taken as ended from the moment the release is sent,
		// whatever the answer: the relay may have acted on it even if the
		// answer was lost.
		Releasing: func(reason string) {
			r.rec.mu.Lock()
			if g.releasedAt == 0 {
				g.releasedAt = nowMs()
			}
			if reason == protocol.ReasonRefused && g.refusedAt == 0 {
				g.refusedAt = g.releasedAt
			}
			r.rec.mu.Unlock()
		},
	}, posted
}

// recordAcceptance notes an answered result post.
func (d *daemon) recordAcceptance(cj claimedJob, ref protocol.LeaseRef, g *grant, resp protocol.ResultResponse, posted resultCall) {
	r := d.run
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	j := r.rec.jobs[cj.key]
	if j == nil {
		return
	}
	g.accepted = true
	j.accepted = append(j.accepted, acceptance{leaseID: ref.LeaseID, runner: d.dev.RunnerID, duplicate: resp.Duplicate, retried: posted.info.retries > 0, recv: posted.recv})
	if !resp.Accepted && !resp.Duplicate {
		r.problem(j, Inconsistent, "result under %s answered neither accepted nor duplicate: %+v", ref.LeaseID, resp)
	}
}

// replay posts an accepted result a second time under the same lease and
// records the answer, which must be duplicate:true.
func (d *daemon) replay(ctx context.Context, cj claimedJob, ref protocol.LeaseRef, renv protocol.SealedEnvelope) {
	r := d.run
	var again protocol.ResultResponse
	_, err := r.call(ctx, "result", func(ctx context.Context) (err error) {
		again, err = d.c.result(ctx, cj.id, ref.LeaseID, renv)
		return err
	})
	if ctx.Err() != nil {
		return
	}
	rp := replay{leaseID: ref.LeaseID, answer: again}
	if err != nil {
		rp.err = err.Error()
		// Only a 4xx is an answer about the replay; a 503 (the store
		// was down) or no answer at all says nothing either way.
		st := peer.ErrorStatus(err)
		rp.refused = st >= 400 && st < 500
	}
	r.rec.mu.Lock()
	if j := r.rec.jobs[cj.key]; j != nil {
		j.replays = append(j.replays, rp)
	}
	r.rec.mu.Unlock()
}

// abandon drops a grant without a word, as a crashed daemon would.
func (d *daemon) abandon(g *grant) {
	r := d.run
	r.rec.mu.Lock()
	g.abandoned = true
	r.rec.mu.Unlock()
	d.mu.Lock()
	delete(d.active, g.leaseID)
	d.mu.Unlock()
}

// heartbeatLoop renews the daemon's active leases and stops the workers of
// those the relay reports lost.
func (d *daemon) heartbeatLoop(ctx context.Context) {
	r := d.run
	for {
		every := r.cfg.HeartbeatInterval
		if every <= 0 {
			every = time.Second
			if ms := r.leaseMs.Load(); ms > 0 {
				every = time.Duration(ms) * time.Millisecond / 3
			}
		}
		if clock.Sleep(ctx, every) != nil {
			return
		}
		d.mu.Lock()
		snapshot := make([]*held, 0, len(d.active))
		refs := make([]protocol.LeaseRef, 0, len(d.active))
		for _, h := range d.active {
			snapshot = append(snapshot, h)
			refs = append(refs, h.ref)
		}
		d.mu.Unlock()
		sent := nowMs()
		var lost map[string]bool
		_, err := r.call(ctx, "heartbeat", func(ctx context.Context) (err error) {
			lost, err = d.c.heartbeat(ctx, refs)
			return err
		})
		if err != nil {
			continue
		}
		r.rec.mu.Lock()
		for _, h := range snapshot {
			if lost[h.ref.LeaseID] {
				h.g.lost = true
				continue
			}
			leaseMs := h.g.leaseMs
			if leaseMs == 0 {
				leaseMs = r.leaseMs.Load()
			}
			h.g.renewFloor = max(h.g.renewFloor, sent+leaseMs)
		}
		r.rec.mu.Unlock()
		for _, h := range snapshot {
			if lost[h.ref.LeaseID] {
				h.cancel()
			}
		}
	}
}

// echo is the daemon's "model": the result carries the payload back.
func echo(payload json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"echo":`)
	if err := json.Compact(&b, payload); err != nil {
		b.WriteString(`null`)
	}
	b.WriteString(`}`)
	return b.Bytes()
}
