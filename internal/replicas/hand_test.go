package replicas_test

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/workload"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// handJob is a job a hand-driven daemon holds.
type handJob struct {
	ref        protocol.LeaseRef
	deadlineAt int64
}

// hand is the rig's site and one device's daemon of one protocol, driven
// step by step by a test: "0" speaks "0", "2" and mixed speak "2" (a mixed
// workload already covers "0").
type hand struct {
	site      handSite
	fetcher   handFetcher
	enqueue   func(ctx context.Context, id, owner string) error
	claim     func(ctx context.Context, max int) ([]handJob, error)
	heartbeat func(ctx context.Context, refs []protocol.LeaseRef) error
}

// handSite and handFetcher are what peer.Site and peer.Site2, and
// peer.Daemon and peer.Daemon2, have in common.
type handSite interface {
	Keys() peer.Keys
	AwaitPending(ctx context.Context, jobID string) (protocol.PendingJob, error)
	SendPayload(ctx context.Context, pending protocol.PendingJob, deadlineAt int64, plaintext json.RawMessage) (protocol.PayloadResponse, error)
}

type handFetcher interface {
	Fetch(ctx context.Context, jobID, leaseID string) (protocol.FetchResponse, error)
}

// seal waits until job is pending and seals plaintext to its claimant.
func (h *hand) seal(ctx context.Context, job handJob, plaintext json.RawMessage) error {
	pending, err := h.site.AwaitPending(ctx, job.ref.JobID)
	if err == nil {
		_, err = h.site.SendPayload(ctx, pending, job.deadlineAt, plaintext)
	}
	return err
}

func (h *hand) fetch(ctx context.Context, ref protocol.LeaseRef) (protocol.FetchResponse, error) {
	return h.fetcher.Fetch(ctx, ref.JobID, ref.LeaseID)
}

// handPeers builds a hand for proto: the site pinned to siteBase, the
// daemon of dev paired through daemonBases[0] and spreading its requests
// over them.
func (r *rig) handPeers(proto string, dev peer.DemoDevice, siteBase string, daemonBases ...string) *hand {
	r.t.Helper()
	held := func(id, lease string, deadlineAt int64) handJob {
		return handJob{ref: protocol.LeaseRef{JobID: id, LeaseID: lease}, deadlineAt: deadlineAt}
	}
	if proto == workload.ProtocolV0 {
		site, d := r.siteAt(siteBase), r.daemonAt(dev, daemonBases...)
		return &hand{
			site: site, fetcher: d,
			enqueue: func(ctx context.Context, id, owner string) error {
				_, err := site.Enqueue(ctx, r.stub(site, id, owner))
				return err
			},
			claim: func(ctx context.Context, max int) ([]handJob, error) {
				resp, err := d.Claim(ctx, []string{protocol.KindGenerate}, max)
				var out []handJob
				for _, j := range resp.Jobs {
					out = append(out, held(j.ID, j.Lease.ID, j.DeadlineAt))
				}
				return out, err
			},
			heartbeat: func(ctx context.Context, refs []protocol.LeaseRef) error {
				_, err := d.Heartbeat(ctx, refs)
				return err
			},
		}
	}
	site, d := r.site2At(siteBase), r.daemon2At(dev, daemonBases...)
	return &hand{
		site: site, fetcher: d,
		enqueue: func(ctx context.Context, id, owner string) error {
			_, err := site.Enqueue(ctx, r.stub2(site, id, owner))
			return err
		},
		claim: func(ctx context.Context, max int) ([]handJob, error) {
			resp, err := d.Claim(ctx, []string{protocol.KindGenerate}, max)
			var out []handJob
			for _, j := range resp.Jobs {
				out = append(out, held(j.ID, j.Lease.ID, j.DeadlineAt))
			}
			return out, err
		},
		heartbeat: func(ctx context.Context, refs []protocol.LeaseRef) error {
			_, err := d.Heartbeat(ctx, refs)
			return err
		},
	}
}

// site2At is the rig's main site speaking "2", pinned to one replica.
func (r *rig) site2At(base string) *peer.Site2 {
	r.t.Helper()
	return r.site2Of(r.fx.Keys.Site, base)
}

// site2Of is a site of the rig's fixture speaking "2", pinned to base.
func (r *rig) site2Of(site peer.DemoSite, base string) *peer.Site2 {
	r.t.Helper()
	s, err := peer.NewSite2(peer.Config{BaseURLs: []string{base}, HTTPClient: plainClient()}, site.Keys, site.SiteID)
	require.NoError(r.t, err)
	return s
}

// daemon2At is a device's "2" daemon, spreading its requests over bases,
// paired by the fixture exchange through the first of them.
func (r *rig) daemon2At(dev peer.DemoDevice, bases ...string) *peer.Daemon2 {
	r.t.Helper()
	d, err := peer.NewDaemon2(peer.Config{BaseURLs: bases, HTTPClient: plainClient(), Kinds: []string{protocol.KindGenerate}}, dev.Keys, "")
	require.NoError(r.t, err)
	_, err = d.PairFixture(r.ctx, dev.Owner)
	require.NoError(r.t, err)
	return d
}

// stub2 is a well-formed team job of site, due in ten minutes.
func (r *rig) stub2(site *peer.Site2, id, owner string) proto2.JobStub {
	return site.Stub(id, protocol.KindGenerate, owner, time.Now().Add(10*time.Minute).UnixMilli())
}
