package workload

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// jobKey is how the records name a job: by (site, id), as "2" keys jobs,
// so that two sites may publish the same id.
func jobKey(siteID, id string) string { return siteID + "\x00" + id }

// lane is one site client speaking one protocol: it publishes that
// protocol's jobs of its site, and seals and collects them. In a mixed run
// the main site has a lane of each protocol; a site's pending and results
// list its jobs of both (P2-A6), and each lane handles only its own.
type lane struct {
	proto  string
	siteID string
	keyID  string
	keys   peer.Keys
	c      siteClient
	// enqueue publishes j with the stub the lane's protocol uses.
	enqueue func(ctx context.Context, j *job, kind string) (protocol.EnqueueResponse, error)
}

// siteClient is what a lane needs of a site: the answers have the same
// shapes under both protocols, so peer.Site and peer.Site2 both are one.
type siteClient interface {
	Pending(ctx context.Context) (protocol.PendingResponse, error)
	Results(ctx context.Context) (protocol.ResultsResponse, error)
	Payload(ctx context.Context, jobID string, env protocol.SealedEnvelope) (protocol.PayloadResponse, error)
	SealFor(pending protocol.PendingJob, jobID string, deadlineAt int64, plaintext json.RawMessage) (protocol.SealedEnvelope, error)
}

// newLanes builds the run's site lanes: "0" for the main site, "2" for
// the main site and every extra one.
func newLanes(cfg Config, ccfg peer.Config) ([]*lane, error) {
	var lanes []*lane
	if cfg.speaks(ProtocolV0) {
		s, err := peer.NewSite(ccfg, cfg.Keys.Site.Keys, cfg.Keys.Site.SiteID)
		if err != nil {
			return nil, fmt.Errorf("workload: %w", err)
		}
		lanes = append(lanes, &lane{proto: ProtocolV0, siteID: s.SiteID(), keyID: s.Keys().KeyID(), keys: s.Keys(), c: s,
			enqueue: func(ctx context.Context, j *job, kind string) (protocol.EnqueueResponse, error) {
				return s.Enqueue(ctx, s.Stub(j.id, kind, j.owner, j.deadlineAt))
			}})
	}
	if cfg.speaks(ProtocolV2) {
		for _, site := range append([]peer.DemoSite{cfg.Keys.Site}, cfg.ExtraSites...) {
			s, err := peer.NewSite2(ccfg, site.Keys, site.SiteID)
			if err != nil {
				return nil, fmt.Errorf("workload: %w", err)
			}
			lanes = append(lanes, &lane{proto: ProtocolV2, siteID: s.SiteID(), keyID: s.Keys().KeyID(), keys: s.Keys(), c: s,
				enqueue: func(ctx context.Context, j *job, kind string) (protocol.EnqueueResponse, error) {
					return s.Enqueue(ctx, s.Stub(j.id, kind, j.owner, j.deadlineAt))
				}})
		}
	}
	return lanes, nil
}

// claimedJob is one job of a claim answer, in the terms the workload
// records, with the stub as its protocol sent it.
type claimedJob struct {
	key        string
	id         string
	owner      string
	audience   string
	lease      protocol.Lease
	deadlineAt int64
	stub0      protocol.ClaimedStub
	stub2      proto2.ClaimedStub
}

// daemonClient is one device's daemon, of either protocol.
type daemonClient interface {
	// pair pairs the device and returns the runner id and the sites the
	// relay named, by key id.
	pair(ctx context.Context, owner string) (string, map[string]protocol.PublicIdentity, error)
	claim(ctx context.Context, kind string, n int) ([]claimedJob, int64, error)
	work(ctx context.Context, cj claimedJob, run peer.RunFunc, steps peer.Steps) (peer.Worked, error)
	result(ctx context.Context, jobID, leaseID string, env protocol.SealedEnvelope) (protocol.ResultResponse, error)
	// heartbeat renews refs and returns the lease ids reported lost.
	heartbeat(ctx context.Context, refs []protocol.LeaseRef) (map[string]bool, error)
}

// daemon0 is a "0" daemon; its jobs are all the main site's.
type daemon0 struct {
	c      *peer.Daemon
	siteID string
}

func (d daemon0) pair(ctx context.Context, owner string) (string, map[string]protocol.PublicIdentity, error) {
	resp, err := d.c.Pair(ctx, owner)
	if err != nil {
		return "", nil, err
	}
	return resp.RunnerID, map[string]protocol.PublicIdentity{keyIDOf(resp.Site): resp.Site}, nil
}

func (d daemon0) claim(ctx context.Context, kind string, n int) ([]claimedJob, int64, error) {
	resp, err := d.c.Claim(ctx, []string{kind}, n)
	if err != nil {
		return nil, 0, err
	}
	out := make([]claimedJob, len(resp.Jobs))
	for i, cs := range resp.Jobs {
		out[i] = claimedJob{key: jobKey(d.siteID, cs.ID), id: cs.ID, owner: cs.Owner, audience: cs.Audience,
			lease: cs.Lease, deadlineAt: cs.DeadlineAt, stub0: cs}
	}
	return out, resp.LeaseMs, nil
}

func (d daemon0) work(ctx context.Context, cj claimedJob, run peer.RunFunc, steps peer.Steps) (peer.Worked, error) {
	ran, err := d.c.Work(ctx, cj.stub0, run, steps)
	return ran.Worked, err
}

func (d daemon0) result(ctx context.Context, jobID, leaseID string, env protocol.SealedEnvelope) (protocol.ResultResponse, error) {
	return d.c.Result(ctx, jobID, leaseID, env, protocol.DispositionOK)
}

// heartbeat maps "0"'s bare lost job ids back to the leases sent.
func (d daemon0) heartbeat(ctx context.Context, refs []protocol.LeaseRef) (map[string]bool, error) {
	resp, err := d.c.Heartbeat(ctx, refs)
	if err != nil {
		return nil, err
	}
	lostJobs := map[string]bool{}
	for _, id := range resp.Lost {
		lostJobs[id] = true
	}
	lost := map[string]bool{}
	for _, ref := range refs {
		if lostJobs[ref.JobID] {
			lost[ref.LeaseID] = true
		}
	}
	return lost, nil
}

// daemon2 is a "2" daemon; siteIDs maps the sites' key ids, which stubs
// carry, to the site ids that key the records.
type daemon2 struct {
	c       *peer.Daemon2
	siteIDs map[string]string
}

func (d daemon2) pair(ctx context.Context, owner string) (string, map[string]protocol.PublicIdentity, error) {
	resp, err := d.c.PairFixture(ctx, owner)
	if err != nil {
		return "", nil, err
	}
	sites := map[string]protocol.PublicIdentity{}
	for _, e := range resp.Sites {
		sites[e.Key] = e.Value
	}
	return resp.RunnerID, sites, nil
}

func (d daemon2) claim(ctx context.Context, kind string, n int) ([]claimedJob, int64, error) {
	resp, err := d.c.Claim(ctx, []string{kind}, n)
	if err != nil {
		return nil, 0, err
	}
	out := make([]claimedJob, len(resp.Jobs))
	for i, cs := range resp.Jobs {
		siteID, ok := d.siteIDs[cs.Site]
		if !ok {
			siteID = "unknown site key " + cs.Site
		}
		out[i] = claimedJob{key: jobKey(siteID, cs.ID), id: cs.ID, owner: cs.Owner, audience: cs.Audience,
			lease: cs.Lease, deadlineAt: cs.DeadlineAt, stub2: cs}
	}
	return out, resp.LeaseMs, nil
}

func (d daemon2) work(ctx context.Context, cj claimedJob, run peer.RunFunc, steps peer.Steps) (peer.Worked, error) {
	ran, err := d.c.Work(ctx, cj.stub2, run, steps)
	return ran.Worked, err
}

func (d daemon2) result(ctx context.Context, jobID, leaseID string, env protocol.SealedEnvelope) (protocol.ResultResponse, error) {
	return d.c.Result(ctx, jobID, leaseID, env, protocol.DispositionOK)
}

func (d daemon2) heartbeat(ctx context.Context, refs []protocol.LeaseRef) (map[string]bool, error) {
	resp, err := d.c.Heartbeat(ctx, refs)
	if err != nil {
		return nil, err
	}
	lost := map[string]bool{}
	for _, ref := range resp.Lost {
		lost[ref.LeaseID] = true
	}
	return lost, nil
}

func keyIDOf(p protocol.PublicIdentity) string {
	id, _ := protocol.KeyIDOf(p.Identity)
	return id
}
