package codec2

import (
	"context"
	"slices"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// claim grants the caller queued proto-2 jobs. A device enrolled for
// grants (docs/grants.md) gets authoredClaim; every other device, and
// every device of a relay with no grant key, keeps decision P2-D4: it is
// offered only its owner's jobs on every site it may route for (§3.6),
// with no grant.
func (c *Codec) claim(ctx context.Context, who *caller, req proto2.ClaimRequest) (any, error) {
	if req.RunnerID != who.device.RunnerID {
		return nil, c.refuse(ctx, who, proto2.RunnerMismatch())
	}
	var kinds []string
	for _, cp := range req.Capabilities {
		if !slices.Contains(kinds, cp.Kind) {
			kinds = append(kinds, cp.Kind)
		}
	}
	if c.opts.Grants.enrolled(who) {
		return codec.Answer(c.authoredClaim(ctx, who, req, kinds))
	}
	jobs, err := c.env.Store.Claim(ctx, store.ClaimInput{
		Proto: store.Proto2, RunnerID: who.device.RunnerID, Owner: who.device.Owner, Device: who.device.Device,
		Routes: storeRoutes(who.proj.ClaimRoutesFor(who.device.Owner)), Kinds: kinds, Max: req.Max, LeaseMs: c.env.LeaseMs, Admit: who.admission(),
	})
	if err != nil {
		return nil, storeError(store.OpClaim, err)
	}
	return protocol.ClaimResponse{Jobs: nonNil(jobs), LeaseMs: c.env.LeaseMs}, nil
}

// held names the job a holder-scoped call is about, resolved lease first
// (§4.1 P2-R4.1.3), among proto-2 jobs only, with the caller's admission. A
// job of a site the caller's owner no longer consents to is refused by
// the store (RD-D12).
func held(who *caller, jobID, leaseID string) store.LeaseInput {
	return store.LeaseInput{Proto: store.Proto2, JobID: jobID, RunnerID: who.device.RunnerID, LeaseID: leaseID, Admit: who.admission(),
		Sites: siteIDs(who.proj.SitesFor(who.device.Owner))}
}

// siteIDs are the ids of sites, never nil: the sites a holder may still
// work for, paused consents included, as a heartbeat pins them (RD-D12).
func siteIDs(sites []projection.SiteRecord) []string {
	ids := make([]string, 0, len(sites))
	for _, s := range sites {
		ids = append(ids, s.SiteID)
	}
	return ids
}

func (c *Codec) fetch(ctx context.Context, who *caller, req proto2.FetchRequest) (proto2.FetchResponse, error) {
	env, err := c.env.Store.Fetch(ctx, held(who, req.JobID, req.LeaseID))
	if err != nil {
		return proto2.FetchResponse{}, storeError(store.OpFetch, err)
	}
	return proto2.FetchResponse{Envelope: env}, nil
}

// result records a result; the envelope rule runs before the store, so an
// oversized result is refused even for a job nobody holds (§3.8).
func (c *Codec) result(ctx context.Context, who *caller, req proto2.ResultRequest) (proto2.ResultResponse, error) {
	if refusal := proto2.EnvelopeTooLarge(req.Envelope); refusal != nil {
		return proto2.ResultResponse{}, c.refuse(ctx, who, refusal)
	}
	res, err := c.env.Store.Result(ctx, store.ResultInput{
		LeaseInput: held(who, req.JobID, req.LeaseID), Envelope: req.Envelope, Disposition: req.Disposition,
	})
	if err != nil {
		return proto2.ResultResponse{}, storeError(store.OpResult, err)
	}
	return proto2.ResultResponse{Accepted: !res.Duplicate, Duplicate: res.Duplicate, State: string(store.Done)}, nil
}

func (c *Codec) release(ctx context.Context, who *caller, req proto2.ReleaseRequest) (proto2.ReleaseResponse, error) {
	released, err := c.env.Store.Release(ctx, store.ReleaseInput{
		Proto: store.Proto2, RunnerID: who.device.RunnerID, Leases: req.Leases, Reason: req.Reason, Admit: who.admission(),
	})
	if err != nil {
		return proto2.ReleaseResponse{}, storeError(store.OpRelease, err)
	}
	return proto2.ReleaseResponse{Released: nonNil(released)}, nil
}
