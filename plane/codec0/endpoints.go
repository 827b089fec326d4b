package codec0

import (
	"context"
	"net/http"
	"slices"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// pair registers a device the projection approved (RB-A5). It is unsigned;
// the plane has charged it to the client's address already.
func (c *Codec) pair(ctx context.Context, body *protocol.Body) (protocol.PairResponse, error) {
	var none protocol.PairResponse
	req, err := body.Pair()
	if err != nil {
		return none, protocol.Refuse(protocol.CodeBadRequest, protocol.MsgPairSchema)
	}
	if !req.Device.IsConsistent() {
		return none, protocol.Refuse(protocol.CodeBadRequest, protocol.MsgInconsistentDevice)
	}
	proj := c.env.Projection()
	if _, ok := proj.ConsentFor(req.Owner, c.env.SiteID); !ok {
		return none, protocol.Refuse(protocol.CodeForbidden, protocol.MsgNoConsent)
	}
	site, ok := proj.SiteFor(c.env.SiteID)
	if !ok {
		return none, protocol.Refuse(protocol.CodeForbidden, protocol.MsgSiteNotRegistered)
	}
	approved, ok := proj.DeviceByFingerprint(req.Device.Identity)
	if !ok {
		return none, protocol.RefuseWith(http.StatusForbidden, protocol.CodeUnauthorized, protocol.MsgDeviceNotApproved)
	}
	if approved.Owner != req.Owner {
		return none, protocol.Refuse(protocol.CodeForbidden, protocol.MsgDeviceOtherOwner)
	}
	// Store the keys the projection approved, never the ones presented:
	// pairing is unsigned, and an old but self-consistent key set is public,
	// so storing what was sent would let anyone roll a device back to a
	// retired encryption key (RB-G7).
	if _, err := c.env.Store.Pair(ctx, store.PairInput{RunnerID: approved.RunnerID, Owner: approved.Owner, Device: approved.Device}); err != nil {
		return none, storeError(store.OpPair, err)
	}
	return protocol.PairResponse{ProtocolVersion: protocol.Version, RunnerID: approved.RunnerID, Site: site.Site}, nil
}

func (c *Codec) claim(ctx context.Context, who *caller, req protocol.ClaimRequest) (protocol.ClaimResponse, error) {
	if req.RunnerID != who.device.RunnerID {
		return protocol.ClaimResponse{}, c.refuse(ctx, who, protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgRunnerMismatch))
	}
	var kinds []string
	for _, cp := range req.Capabilities {
		if !slices.Contains(kinds, cp.Kind) {
			kinds = append(kinds, cp.Kind)
		}
	}
	jobs, err := c.env.Store.Claim(ctx, store.ClaimInput{
		Proto: store.Proto0, RunnerID: who.device.RunnerID, Owner: who.device.Owner, Device: who.device.Device,
		Routes: c.routes(who), Kinds: kinds, Max: req.Max, LeaseMs: c.env.LeaseMs, Touch: true, Admit: who.admission(),
	})
	if err != nil {
		return protocol.ClaimResponse{}, storeError(store.OpClaim, err)
	}
	return protocol.ClaimResponse{Jobs: nonNil(jobs), LeaseMs: c.env.LeaseMs}, nil
}

// routes lists the (site, job owner) pairs the caller may claim from now,
// as projection.RoutableOwners does but with the caller's own consent
// already in hand: none while it is paused, otherwise the caller's owner
// and each roster member whose own consent lets their jobs be routed.
func (c *Codec) routes(who *caller) []store.Route {
	routes := []store.Route{}
	if !who.consented || who.consent.Paused {
		return routes
	}
	for _, owner := range who.proj.OwnersRunnableBy(who.device.Owner) {
		if owner == who.device.Owner || who.proj.MayRouteFor(owner, c.env.SiteID) {
			routes = append(routes, store.Route{SiteID: c.env.SiteID, Owner: owner})
		}
	}
	return routes
}

func (c *Codec) fetch(ctx context.Context, who *caller, req protocol.FetchRequest) (protocol.FetchResponse, error) {
	env, err := c.env.Store.Fetch(ctx, store.LeaseInput{Proto: store.Proto0, SiteID: c.env.SiteID, JobID: req.JobID, RunnerID: who.device.RunnerID, LeaseID: req.LeaseID, Touch: true, Admit: who.admission()})
	if err != nil {
		return protocol.FetchResponse{}, storeError(store.OpFetch, err)
	}
	return protocol.FetchResponse{Envelope: env}, nil
}

func (c *Codec) result(ctx context.Context, who *caller, req protocol.ResultRequest) (protocol.ResultResponse, error) {
	res, err := c.env.Store.Result(ctx, store.ResultInput{
		LeaseInput:  store.LeaseInput{Proto: store.Proto0, SiteID: c.env.SiteID, JobID: req.JobID, RunnerID: who.device.RunnerID, LeaseID: req.LeaseID, Touch: true, Admit: who.admission()},
		Envelope:    req.Envelope,
		Disposition: req.Disposition,
	})
	if err != nil {
		return protocol.ResultResponse{}, storeError(store.OpResult, err)
	}
	return protocol.ResultResponse{Accepted: !res.Duplicate, Duplicate: res.Duplicate, State: string(store.Done)}, nil
}

// heartbeat renews what the caller holds. A caller whose consent is gone
// still gets an answer, telling it so and that every lease is lost (RB-A9).
// One store call stamps, sweeps and, for a consenting caller, lists what
// to cancel and renews.
func (c *Codec) heartbeat(ctx context.Context, who *caller, req protocol.HeartbeatRequest) (protocol.HeartbeatResponse, error) {
	serverTime := c.env.NowMs()
	hb, err := c.env.Store.Heartbeat(ctx, store.HeartbeatInput{
		Proto: store.Proto0, SiteID: c.env.SiteID, RunnerID: who.device.RunnerID, Admit: who.admission(),
		Touch: true, Serving: who.consented, Leases: req.ActiveLeases, LeaseMs: c.env.LeaseMs,
	})
	if err != nil {
		return protocol.HeartbeatResponse{}, storeError(store.OpHeartbeat, err)
	}
	c.env.Swept(ctx, hb.Swept)
	if !who.consented {
		lost := make([]string, 0, len(req.ActiveLeases))
		for _, l := range req.ActiveLeases {
			lost = append(lost, l.JobID)
		}
		return protocol.HeartbeatResponse{Revoked: true, Cancel: []string{}, Lost: lost, ServerTime: serverTime}, nil
	}
	return protocol.HeartbeatResponse{Revoked: false, Cancel: jobIDs(hb.Cancel), Lost: jobIDs(hb.Renewed.Lost), ServerTime: serverTime}, nil
}

func (c *Codec) release(ctx context.Context, who *caller, req protocol.ReleaseRequest) (protocol.ReleaseResponse, error) {
	released, err := c.env.Store.Release(ctx, store.ReleaseInput{Proto: store.Proto0, SiteID: c.env.SiteID, RunnerID: who.device.RunnerID, Leases: req.Leases, Reason: req.Reason,
		Touch: true, Admit: who.admission()})
	if err != nil {
		return protocol.ReleaseResponse{}, storeError(store.OpRelease, err)
	}
	return protocol.ReleaseResponse{Released: nonNil(released)}, nil
}

// jobIDs is protocol "0"'s view of grants: bare job ids, never null.
func jobIDs(grants []protocol.LeaseRef) []string {
	ids := make([]string, 0, len(grants))
	for _, g := range grants {
		ids = append(ids, g.JobID)
	}
	return ids
}
