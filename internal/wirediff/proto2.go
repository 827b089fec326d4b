package main

import (
	"context"
	"fmt"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// flow2 is the state the protocol "2" steps hand on to each other.
type flow2 struct {
	site    *peer.Site2
	daemon  *peer.Daemon2
	owner   string
	claimed proto2.ClaimedStub
	pending protocol.PendingJob
}

func (s *script) newFlow2() (*flow2, error) {
	dev := s.keys.Devices[0]
	site, err := peer.NewSite2(s.cfg(), s.keys.Site.Keys, s.keys.Site.SiteID)
	if err != nil {
		return nil, fmt.Errorf("protocol 2 site: %w", err)
	}
	daemon, err := peer.NewDaemon2(s.cfg(), dev.Keys, dev.RunnerID)
	if err != nil {
		return nil, fmt.Errorf("protocol 2 daemon: %w", err)
	}
	return &flow2{site: site, daemon: daemon, owner: dev.Owner}, nil
}

func (f *flow2) stub(s *script, id string) proto2.JobStub {
	stub := f.site.Stub(id, protocol.KindGenerate, f.owner, s.deadline)
	stub.Audience = proto2.AudiencePrivate
	return stub
}

// claimOne claims and keeps the one job the claim must return.
func (f *flow2) claimOne(ctx context.Context) error {
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

func (f *flow2) lease() protocol.LeaseRef {
	return protocol.LeaseRef{JobID: f.claimed.ID, LeaseID: f.claimed.Lease.ID}
}

// proto2 is proto0 over protocol "2": the published daemon's and SDK's
// shapes, fixture pairing.
func (s *script) proto2(ctx context.Context) error {
	f, err := s.newFlow2()
	if err != nil {
		return err
	}
	s.step(ctx, "2 pair", func(ctx context.Context) error { return drop(f.daemon.PairFixture(ctx, f.owner)) })
	s.step(ctx, "2 claim empty", func(ctx context.Context) error { return drop(f.daemon.Claim(ctx, []string{protocol.KindGenerate}, 1)) })
	s.step(ctx, "2 enqueue", func(ctx context.Context) error { return drop(f.site.Enqueue(ctx, f.stub(s, "wd2-one"))) })
	s.step(ctx, "2 enqueue again", func(ctx context.Context) error { return drop(f.site.Enqueue(ctx, f.stub(s, "wd2-one"))) })
	s.step(ctx, "2 claim granted", func(ctx context.Context) error { return f.claimOne(ctx) })
	s.step(ctx, "2 fetch before payload", func(ctx context.Context) error {
		return ignoreRefusal(drop(f.daemon.Fetch(ctx, f.claimed.ID, f.claimed.Lease.ID)))
	})
	s.step(ctx, "2 pending", func(ctx context.Context) error { return keep(&f.pending)(f.site.AwaitPending(ctx, "wd2-one")) })
	s.step(ctx, "2 payload", func(ctx context.Context) error {
		return drop(f.site.SendPayload(ctx, f.pending, s.deadline, []byte(`{"prompt":"hi"}`)))
	})
	s.step(ctx, "2 heartbeat", func(ctx context.Context) error { return drop(f.daemon.Heartbeat(ctx, []protocol.LeaseRef{f.lease()})) })
	s.step(ctx, "2 fetch", func(ctx context.Context) error { return drop(f.daemon.Fetch(ctx, f.claimed.ID, f.claimed.Lease.ID)) })
	// A claim that failed leaves nothing to seal: the result steps then
	// send an empty envelope, and the failure is noted, not fatal, so that
	// the rest of the script still compares.
	env, err := s.sealResult2(f)
	if err != nil {
		s.failed = append(s.failed, "2 seal: "+err.Error())
	}
	s.step(ctx, "2 result", func(ctx context.Context) error {
		return drop(f.daemon.Result(ctx, f.claimed.ID, f.claimed.Lease.ID, env, protocol.DispositionOK))
	})
	s.step(ctx, "2 result replay", func(ctx context.Context) error {
		return drop(f.daemon.Result(ctx, f.claimed.ID, f.claimed.Lease.ID, env, protocol.DispositionOK))
	})
	s.step(ctx, "2 results", func(ctx context.Context) error { return drop(f.site.AwaitResult(ctx, "wd2-one")) })
	s.step(ctx, "2 enqueue finished id", func(ctx context.Context) error { return ignoreRefusal(drop(f.site.Enqueue(ctx, f.stub(s, "wd2-one")))) })
	s.step(ctx, "2 enqueue to release", func(ctx context.Context) error { return drop(f.site.Enqueue(ctx, f.stub(s, "wd2-two"))) })
	s.step(ctx, "2 claim to release", func(ctx context.Context) error { return f.claimOne(ctx) })
	s.step(ctx, "2 release", func(ctx context.Context) error {
		return drop(f.daemon.Release(ctx, []protocol.LeaseRef{f.lease()}, protocol.ReasonShutdown))
	})
	s.step(ctx, "2 heartbeat released", func(ctx context.Context) error { return drop(f.daemon.Heartbeat(ctx, []protocol.LeaseRef{f.lease()})) })
	s.step(ctx, "2 enqueue to cancel", func(ctx context.Context) error { return drop(f.site.Enqueue(ctx, f.stub(s, "wd2-three"))) })
	s.step(ctx, "2 cancel", func(ctx context.Context) error { return drop(f.site.Cancel(ctx, "wd2-three")) })
	s.step(ctx, "2 cancel unknown", func(ctx context.Context) error { return ignoreRefusal(drop(f.site.Cancel(ctx, "wd2-none"))) })
	s.step(ctx, "2 pending after", func(ctx context.Context) error { return drop(f.site.Pending(ctx)) })
	s.step(ctx, "2 results after", func(ctx context.Context) error { return drop(f.site.Results(ctx)) })
	return nil
}

// sealResult2 seals the echo answer to the site the stub names.
func (s *script) sealResult2(f *flow2) (protocol.SealedEnvelope, error) {
	site, ok := f.daemon.SiteFor(s.keys.Site.Keys.KeyID())
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
