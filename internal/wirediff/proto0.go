package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

// flow0 is the state the protocol "0" steps hand on to each other.
type flow0 struct {
	site    *peer.Site
	daemon  *peer.Daemon
	owner   string
	claimed protocol.ClaimedStub
	pending protocol.PendingJob
}

func (s *script) newFlow0() (*flow0, error) {
	dev := s.keys.Devices[0]
	site, err := peer.NewSite(s.cfg(), s.keys.Site.Keys, s.keys.Site.SiteID)
	if err != nil {
		return nil, fmt.Errorf("protocol 0 site: %w", err)
	}
	daemon, err := peer.NewDaemon(s.cfg(), dev.Keys, dev.RunnerID)
	if err != nil {
		return nil, fmt.Errorf("protocol 0 daemon: %w", err)
	}
	return &flow0{site: site, daemon: daemon, owner: dev.Owner}, nil
}

func (f *flow0) stub(s *script, id string) protocol.JobStub {
	stub := f.site.Stub(id, protocol.KindGenerate, f.owner, s.deadline)
	stub.Audience = protocol.AudienceSelf
	return stub
}

// claimOne claims and keeps the one job the claim must return.
func (f *flow0) claimOne(ctx context.Context) error {
	got, err := f.daemon.Claim(ctx, []string{protocol.KindGenerate}, 1)
	if err != nil {
		return err
	}
	if len(got.Jobs) != 1 {
		return fmt.Errorf("claim: %d jobs", len(got.Jobs))
	}
	f.claimed = got.Jobs[0]
	return nil
}

func (f *flow0) lease() protocol.LeaseRef {
	return protocol.LeaseRef{JobID: f.claimed.ID, LeaseID: f.claimed.Lease.ID}
}

// proto0 runs a whole job, a released one and a cancelled one over
// protocol "0", each step on its own.
func (s *script) proto0(ctx context.Context) error {
	f, err := s.newFlow0()
	if err != nil {
		return err
	}
	s.step(ctx, "0 pair", func(ctx context.Context) error { return drop(f.daemon.Pair(ctx, f.owner)) })
	s.step(ctx, "0 claim empty", func(ctx context.Context) error { return drop(f.daemon.Claim(ctx, []string{protocol.KindGenerate}, 1)) })
	s.step(ctx, "0 enqueue", func(ctx context.Context) error { return drop(f.site.Enqueue(ctx, f.stub(s, "wd0-one"))) })
	s.step(ctx, "0 enqueue again", func(ctx context.Context) error { return drop(f.site.Enqueue(ctx, f.stub(s, "wd0-one"))) })
	s.step(ctx, "0 claim granted", func(ctx context.Context) error { return f.claimOne(ctx) })
	s.step(ctx, "0 fetch before payload", func(ctx context.Context) error {
		return ignoreRefusal(drop(f.daemon.Fetch(ctx, f.claimed.ID, f.claimed.Lease.ID)))
	})
	s.step(ctx, "0 pending", func(ctx context.Context) error { return keep(&f.pending)(f.site.AwaitPending(ctx, "wd0-one")) })
	s.step(ctx, "0 payload", func(ctx context.Context) error {
		return drop(f.site.SendPayload(ctx, f.pending, s.deadline, []byte(`{"prompt":"hi"}`)))
	})
	s.step(ctx, "0 heartbeat", func(ctx context.Context) error { return drop(f.daemon.Heartbeat(ctx, []protocol.LeaseRef{f.lease()})) })
	s.step(ctx, "0 fetch", func(ctx context.Context) error { return drop(f.daemon.Fetch(ctx, f.claimed.ID, f.claimed.Lease.ID)) })
	// A claim that failed leaves nothing to seal: the result steps then
	// send an empty envelope, and the failure is noted, not fatal, so that
	// the rest of the script still compares.
	env, err := s.sealResult0(f)
	if err != nil {
		s.failed = append(s.failed, "0 seal: "+err.Error())
	}
	s.step(ctx, "0 result", func(ctx context.Context) error {
		return drop(f.daemon.Result(ctx, f.claimed.ID, f.claimed.Lease.ID, env, protocol.DispositionOK))
	})
	s.step(ctx, "0 result replay", func(ctx context.Context) error {
		return drop(f.daemon.Result(ctx, f.claimed.ID, f.claimed.Lease.ID, env, protocol.DispositionOK))
	})
	s.step(ctx, "0 results", func(ctx context.Context) error { return drop(f.site.AwaitResult(ctx, "wd0-one")) })
	s.step(ctx, "0 enqueue finished id", func(ctx context.Context) error { return ignoreRefusal(drop(f.site.Enqueue(ctx, f.stub(s, "wd0-one")))) })
	s.step(ctx, "0 enqueue to release", func(ctx context.Context) error { return drop(f.site.Enqueue(ctx, f.stub(s, "wd0-two"))) })
	s.step(ctx, "0 claim to release", func(ctx context.Context) error { return f.claimOne(ctx) })
	s.step(ctx, "0 release", func(ctx context.Context) error {
		return drop(f.daemon.Release(ctx, []protocol.LeaseRef{f.lease()}, protocol.ReasonShutdown))
	})
	s.step(ctx, "0 heartbeat released", func(ctx context.Context) error { return drop(f.daemon.Heartbeat(ctx, []protocol.LeaseRef{f.lease()})) })
	s.step(ctx, "0 enqueue to cancel", func(ctx context.Context) error { return drop(f.site.Enqueue(ctx, f.stub(s, "wd0-three"))) })
	s.step(ctx, "0 cancel", func(ctx context.Context) error { return drop(f.site.Cancel(ctx, "wd0-three")) })
	s.step(ctx, "0 cancel unknown", func(ctx context.Context) error { return ignoreRefusal(drop(f.site.Cancel(ctx, "wd0-none"))) })
	s.step(ctx, "0 pending after", func(ctx context.Context) error { return drop(f.site.Pending(ctx)) })
	s.step(ctx, "0 results after", func(ctx context.Context) error { return drop(f.site.Results(ctx)) })
	return nil
}

// sealResult0 seals the echo answer to the site the daemon paired with.
func (s *script) sealResult0(f *flow0) (protocol.SealedEnvelope, error) {
	site, ok := f.daemon.SiteIdentity()
	if !ok {
		site = s.keys.Site.Keys.Public()
	}
	answer, err := echo([]byte(`"hi"`))
	if err != nil {
		return protocol.SealedEnvelope{}, fmt.Errorf("encode answer: %w", err)
	}
	env, err := peer.Seal(f.daemon.Keys(), site, f.claimed.ID, protocol.DirectionResult, s.deadline, answer)
	if err != nil {
		return protocol.SealedEnvelope{}, fmt.Errorf("seal result: %w", err)
	}
	return env, nil
}

// ignoreRefusal treats an answered refusal as the expected outcome of a
// step that provokes one; only a missing answer is a failure.
func ignoreRefusal(err error) error {
	var refused *peer.Error
	if err == nil || errors.As(err, &refused) {
		return nil
	}
	return err
}
