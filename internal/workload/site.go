package workload

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

// sealTask is one pending grant for a lane to seal.
type sealTask struct {
	ln *lane
	pj protocol.PendingJob
}

// pendingLoop polls a lane's pending and hands every grant of its jobs not
// yet sealed to the seal workers.
func (r *Run) pendingLoop(ctx context.Context, ln *lane) {
	for {
		var resp protocol.PendingResponse
		_, err := r.call(ctx, "site/pending", func(ctx context.Context) (err error) {
			resp, err = ln.c.Pending(ctx)
			return err
		})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			var todo []sealTask
			r.rec.mu.Lock()
			for _, pj := range resp.Jobs {
				if g := r.notePending(ln, pj); g != nil && g.sealState == sealNone && !r.leaveUnsealed(g) {
					g.sealState = sealQueued
					todo = append(todo, sealTask{ln: ln, pj: pj})
				}
			}
			r.rec.mu.Unlock()
			for _, task := range todo {
				select {
				case r.sealQueue <- task:
				case <-ctx.Done():
					return
				}
			}
		}
		if clock.Sleep(ctx, r.cfg.PendingInterval) != nil {
			return
		}
	}
}

// leaveUnsealed decides, at the first grant of a "2" job the site sees,
// whether the site lets it lapse unsealed (Config.UnsealedFraction).
// r.rec.mu is held.
func (r *Run) leaveUnsealed(g *grant) bool {
	j := r.rec.jobs[g.jobID]
	if j.unsealedDecided {
		return g.unsealed
	}
	j.unsealedDecided = true
	g.unsealed = j.lane.proto == ProtocolV2 && fraction("unsealed/"+j.key) < r.cfg.UnsealedFraction
	return g.unsealed
}

// notePending records a pending entry: the grant it shows (new if its claim
// answer never reached a daemon) and the device to seal to. It reports
// its grant, or nil when the job is not one of this lane's (a mixed run's
// other lane of the same site handles its own). r.rec.mu is held.
func (r *Run) notePending(ln *lane, pj protocol.PendingJob) *grant {
	j := r.rec.jobs[jobKey(ln.siteID, pj.JobID)]
	if j == nil {
		r.st.note("site: pending lists a job this run never published")
		return nil
	}
	if j.lane != ln {
		return nil
	}
	grantedAt := pj.AwaitingUntil - protocol.AwaitingPayloadMs
	g := r.rec.leases[pj.LeaseID]
	if g == nil {
		g = r.rec.addGrant(&grant{jobID: j.key, leaseID: pj.LeaseID, runner: pj.RunnerID, source: "pending",
			grantedAt: grantedAt, expiresAt: pj.LeaseExpiresAt})
	} else {
		if g.runner != pj.RunnerID || g.grantedAt != grantedAt {
			r.problem(j, Inconsistent, "pending shows lease %s as runner %s granted at %d; the claim said runner %s at %d",
				pj.LeaseID, pj.RunnerID, grantedAt, g.runner, g.grantedAt)
		}
		g.expiresAt = max(g.expiresAt, pj.LeaseExpiresAt)
	}
	if want, ok := r.rec.devices[pj.RunnerID]; !ok || want != pj.Device {
		r.problem(j, WrongDevice, "pending names a device for %s that the fixture does not approve for it", pj.RunnerID)
	}
	if old, ok := j.pendingDevice[pj.LeaseID]; ok && old != pj.Device {
		r.problem(j, WrongDevice, "pending changed the device of lease %s", pj.LeaseID)
	}
	j.pendingDevice[pj.LeaseID] = pj.Device
	return g
}

// sealLoop seals payloads to the device pending named and hands them over.
func (r *Run) sealLoop(ctx context.Context) {
	for {
		var task sealTask
		select {
		case task = <-r.sealQueue:
		case <-ctx.Done():
			return
		}
		ln, pj := task.ln, task.pj
		r.rec.mu.Lock()
		j := r.rec.jobs[jobKey(ln.siteID, pj.JobID)]
		g := r.rec.leases[pj.LeaseID]
		deadline, payload := j.deadlineAt, j.payload
		r.rec.mu.Unlock()

		env, err := ln.c.SealFor(pj, pj.JobID, deadline, payload)
		if err != nil {
			r.st.note("site: seal: " + err.Error())
			r.rec.mu.Lock()
			g.sealState = sealDone
			r.rec.mu.Unlock()
			continue
		}
		_, err = r.call(ctx, "site/payload", func(ctx context.Context) error {
			_, err := ln.c.Payload(ctx, pj.JobID, env)
			return err
		})
		recv := nowMs()
		r.rec.mu.Lock()
		g.sealState = sealDone
		if st := peer.ErrorStatus(err); err != nil && (st == 0 || st >= 500) {
			// No answer, or the store was down: if the job is still
			// pending, the next poll seals it again.
			g.sealState = sealNone
		}
		// Sealed before the grant's window closed and while it was not
		// given back: the payload went to this grant, which is therefore
		// held until its lease lapses.
		if err == nil && recv < g.grantedAt+protocol.AwaitingPayloadMs && g.releasedAt == 0 {
			g.sealed = true
		}
		r.rec.mu.Unlock()
	}
}

// resultsLoop polls a lane's results and collects each of its jobs'
// results once.
func (r *Run) resultsLoop(ctx context.Context, ln *lane) {
	for {
		var resp protocol.ResultsResponse
		t0 := time.Now()
		_, err := r.call(ctx, "site/results", func(ctx context.Context) (err error) {
			resp, err = ln.c.Results(ctx)
			return err
		})
		if ctx.Err() != nil {
			return
		}
		n := 0
		if err == nil {
			n = len(resp.Jobs)
			r.collectAll(ln, resp.Jobs)
		}
		// Results stay listed until their deadline, so every poll returns
		// all of them: poll less often as the listing grows (and never
		// spend more than a third of the time polling), but often enough
		// to see each before it expires.
		wait := r.cfg.ResultsInterval + time.Duration(n)*20*time.Microsecond
		wait = max(wait, 2*time.Since(t0)-r.cfg.ResultsInterval)
		wait = min(wait, r.cfg.JobTTL/4)
		if clock.Sleep(ctx, wait) != nil {
			return
		}
	}
}

// collectAll takes a results listing: results seen before are only checked
// for change; new ones are opened, several at once (opening is the site's
// costliest step).
func (r *Run) collectAll(ln *lane, listing []protocol.FinishedJob) {
	type fresh struct {
		fin     protocol.FinishedJob
		j       *job
		device  protocol.PublicIdentity
		pending bool
	}
	var todo []fresh
	r.rec.mu.Lock()
	for _, fin := range listing {
		j := r.rec.jobs[jobKey(ln.siteID, fin.JobID)]
		if j == nil {
			r.st.note("site: results list a job this run never published")
			continue
		}
		if j.lane != ln {
			continue
		}
		if seen := j.site; seen != nil {
			if (seen.leaseID != fin.LeaseID || seen.ciphertext != fin.Envelope.Ciphertext) && !seen.changed {
				seen.changed = true
				r.problem(j, ResultTwice, "the site collected the result of lease %s (%s), then results listed lease %s (%s)",
					seen.leaseID, seen.runner, fin.LeaseID, fin.RunnerID)
			}
			continue
		}
		device, ok := j.pendingDevice[fin.LeaseID]
		if !ok {
			device, ok = j.sawPendingOn(fin.Device)
		}
		j.site = &siteResult{leaseID: fin.LeaseID, runner: fin.RunnerID, ciphertext: fin.Envelope.Ciphertext, at: nowMs(), device: device}
		todo = append(todo, fresh{fin: fin, j: j, device: device, pending: ok})
	}
	r.rec.mu.Unlock()

	next := make(chan fresh)
	var wg sync.WaitGroup
	for range min(r.cfg.SealWorkers, len(todo)) {
		wg.Go(func() {
			for f := range next {
				r.collect(f.fin, f.j, f.device, f.pending)
			}
		})
	}
	for _, f := range todo {
		next <- f
	}
	close(next)
	wg.Wait()
}

// sawPendingOn reports whether pending ever named device for one of j's
// grants, and returns it. A result can come back under a lease the site
// never saw: the payload names the device it is sealed to, not the lease
// (P2-D11), so a payload the site sealed for one grant is taken for the
// next grant of the same device, as when a failover loses the first grant
// and valkey-go sends the payload's write again to the new primary. The
// published SDK opens every result with the device the listing names; this
// site opens it only with a device pending showed it for this job.
// r.rec.mu is held.
func (j *job) sawPendingOn(device protocol.PublicIdentity) (protocol.PublicIdentity, bool) {
	for _, d := range j.pendingDevice {
		if d == device {
			return d, true
		}
	}
	return protocol.PublicIdentity{}, false
}

// collect opens one new result with the device key pending gave for its
// lease (or, for a lease it never saw, for another grant of the job to the
// same device) and checks that it is the echo of the job's payload.
func (r *Run) collect(fin protocol.FinishedJob, j *job, device protocol.PublicIdentity, sawPending bool) {
	r.rec.mu.Lock()
	payload := j.payload
	r.rec.mu.Unlock()

	var problem *Violation
	if !sawPending {
		problem = &Violation{Kind: WrongDevice, Detail: "a result under lease " + fin.LeaseID + " (" + fin.RunnerID + ") from a device the site never saw pending for this job, so it has no device key of its own to open it with"}
	} else {
		plain, err := peer.Open(j.lane.keys, fin.Envelope, peer.Expectation{JobID: fin.JobID, Direction: protocol.DirectionResult, SenderIdentity: device.Identity})
		switch {
		case err != nil:
			problem = &Violation{Kind: ResultUnopenable, Detail: "with the device pending named for lease " + fin.LeaseID + ": " + err.Error()}
		case !bytes.Equal(plain, echo(payload)):
			problem = &Violation{Kind: ResultUnopenable, Detail: "the result is not the echo of this job's payload: " + string(plain)}
		}
	}
	if problem != nil {
		r.rec.mu.Lock()
		r.problem(j, problem.Kind, "%s", problem.Detail)
		r.rec.mu.Unlock()
	}
	select {
	case <-r.inflight:
	default:
	}
	r.lastProgress.Store(nowMs())
	if int(r.collected.Add(1)) == r.cfg.Jobs {
		close(r.allCollected)
	}
}
