package codec2

import (
	"context"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// siteRoute is one site-plane route, whatever its types.
type siteRoute = codec.Route[*Codec, *codec.SiteCaller, *codec.Request]

// forSite is the site route decode reads, admitSite lets through and
// handle answers, its store write taking the site's owed charge (a read,
// or a refusal before the write, pays it first: SiteCaller.Refuse).
func forSite[Req codec.SiteRequest, Resp any](decode func(*codec.Request) (Req, error), handle func(*Codec, context.Context, *codec.SiteCaller, Req) (Resp, error)) siteRoute {
	return codec.Endpoint(admitSite[Req], decode, handle)
}

// admitSite refuses a request its schema does not read and one for another
// site than the signer.
func admitSite[Req codec.SiteRequest](c *Codec, ctx context.Context, site *codec.SiteCaller, req Req, err error) error {
	switch {
	case err != nil:
		return site.Refuse(ctx, c.env, proto2.SchemaRefusal())
	case req.ForSite() != site.SiteID:
		return site.Refuse(ctx, c.env, proto2.NotYourSite())
	}
	return nil
}

// The decoded requests name their site.
type (
	enqueueRequest proto2.EnqueueRequest
	payloadRequest proto2.PayloadRequest
	cancelRequest  proto2.CancelRequest
	siteQuery      proto2.SiteQuery
)

func (r enqueueRequest) ForSite() string { return r.SiteID }
func (r payloadRequest) ForSite() string { return r.SiteID }
func (r cancelRequest) ForSite() string  { return r.SiteID }
func (r siteQuery) ForSite() string      { return r.SiteID }

// fromBody decodes a site route's request from its body with decode,
// then names it as the route knows it.
func fromBody[Wire, Req any](decode func([]byte) (Wire, error), as func(Wire) Req) func(*codec.Request) (Req, error) {
	return func(req *codec.Request) (Req, error) {
		w, err := decode(req.Body.Raw())
		return as(w), err
	}
}

// fromQuery reads the siteId of a read route from the query; the body of
// a POST to a read route is signed but otherwise ignored.
func fromQuery(req *codec.Request) (siteQuery, error) {
	q, err := proto2.DecodeSiteQuery(req.RawQuery)
	return siteQuery(q), err
}

// sitePlane authenticates a site (§3.4): any registered site may call,
// signing with its current key or, while they retire, its earlier ones.
func (c *Codec) sitePlane(ctx context.Context, req *codec.Request, route siteRoute) (any, error) {
	caller, err := c.env.AuthenticateSite(ctx, req, codec.SiteRefusals{
		NotSigned:     func() codec.Refusal { return proto2.NotSigned() },
		NotRegistered: func() codec.Refusal { return proto2.SiteNotRegistered() },
	})
	if err != nil {
		return nil, err
	}
	return route.Serve(ctx, c, caller, req)
}

// enqueue publishes a stub that names the signing site's current key
// (§3.11); a republish of (site, id) answers the existing job's state.
func (c *Codec) enqueue(ctx context.Context, site *codec.SiteCaller, req enqueueRequest) (proto2.EnqueueResponse, error) {
	if req.Stub.Site != keyID(site.Site) {
		return proto2.EnqueueResponse{}, site.Refuse(ctx, c.env, proto2.StubWrongSite())
	}
	s := req.Stub
	stub := protocol.JobStub{
		ID: s.ID, Kind: s.Kind, Owner: s.Owner, Site: s.Site, Audience: s.Audience, Purpose: s.Purpose,
		SizeClass: s.SizeClass, Streaming: s.Streaming, DeadlineAt: s.DeadlineAt,
	}
	res, err := c.env.Store.Enqueue(ctx, store.EnqueueInput{SiteID: site.SiteID, Proto: store.Proto2, Stub: stub, Admit: site.Admission()})
	if err != nil {
		return proto2.EnqueueResponse{}, storeError(store.OpEnqueue, err)
	}
	return proto2.EnqueueResponse{JobID: s.ID, State: string(res.State)}, nil
}

// payload seals a claimed job; the envelope rule runs before the store
// (§3.12), and so does relayd's consent rule (RD-D12): a payload sealed to a
// device whose owner no longer consents to the site is refused. The store
// then takes the payload only if that device holds the job (P2-D11), so no
// payload reaches a device that stopped serving the site.
func (c *Codec) payload(ctx context.Context, site *codec.SiteCaller, req payloadRequest) (proto2.PayloadResponse, error) {
	if refusal := proto2.EnvelopeTooLarge(req.Envelope); refusal != nil {
		return proto2.PayloadResponse{}, site.Refuse(ctx, c.env, refusal)
	}
	proj := c.env.Projection()
	if dev, known := proj.DeviceByKeyID(req.Envelope.RecipientKeyID); withdrawn(proj, site.SiteID, dev, known) {
		return proto2.PayloadResponse{}, site.Refuse(ctx, c.env, holderWithdrew())
	}
	if err := c.env.Store.Payload(ctx, store.PayloadInput{JobID: req.JobID, SiteID: site.SiteID, Envelope: req.Envelope, Admit: site.Admission()}); err != nil {
		return proto2.PayloadResponse{}, storeError(store.OpPayload, err)
	}
	return proto2.PayloadResponse{JobID: req.JobID, State: string(store.Ready)}, nil
}

func (c *Codec) cancel(ctx context.Context, site *codec.SiteCaller, req cancelRequest) (proto2.CancelResponse, error) {
	ok, err := c.env.Store.Cancel(ctx, store.CancelInput{JobID: req.JobID, SiteID: site.SiteID, Admit: site.Admission()})
	if err != nil {
		return proto2.CancelResponse{}, storeError(store.OpCancel, err)
	}
	return proto2.CancelResponse{Cancelled: ok}, nil
}

// pending lists the site's jobs awaiting a payload, whatever protocol
// enqueued them (P2-A6), after a sweep (§3.14).
func (c *Codec) pending(ctx context.Context, site *codec.SiteCaller, _ siteQuery) (proto2.PendingResponse, error) {
	if limited := site.Pay(ctx, c.env); limited != nil {
		return proto2.PendingResponse{}, limited
	}
	swept, err := store.SweepForSite(ctx, c.env.Store, site.SiteID)
	if err != nil {
		return proto2.PendingResponse{}, storeError(store.OpSweep, err)
	}
	c.env.Swept(ctx, swept)
	jobs, err := c.env.Store.Pending(ctx, site.SiteID)
	if err != nil {
		return proto2.PendingResponse{}, storeError(store.OpPending, err)
	}
	return proto2.PendingResponse{Jobs: codec.PendingJobs(stillServed(c.env.Projection(), site.SiteID, jobs))}, nil
}

// stillServed leaves out the jobs claimed by a device whose owner no
// longer consents to the site: a seal for one would be refused (RD-D12), and
// its sealing window lapses into the queue as any unsealed claim's does.
func stillServed(proj *projection.Projection, siteID string, jobs []store.Job) []store.Job {
	out := make([]store.Job, 0, len(jobs))
	for _, j := range jobs {
		if j.ClaimedBy != nil {
			dev, known := proj.DeviceByFingerprint(j.ClaimedBy.Device.Identity)
			if withdrawn(proj, siteID, dev, known) {
				continue
			}
		}
		out = append(out, j)
	}
	return out
}

// withdrawn reports whether dev, a device the projection approves (known),
// belongs to an owner with no consent, paused or not, to siteID (RD-D12). A
// device the projection no longer knows is not judged here: its own calls
// are refused (P2-D7).
func withdrawn(proj *projection.Projection, siteID string, dev projection.DeviceRecord, known bool) bool {
	if !known {
		return false
	}
	_, consents := proj.ConsentFor(dev.Owner, siteID)
	return !consents
}

// results lists the site's finished jobs, whatever protocol enqueued them
// (P2-A6); they stay listed until their deadline (§3.15).
func (c *Codec) results(ctx context.Context, site *codec.SiteCaller, _ siteQuery) (codec.RawJSON, error) {
	if limited := site.Pay(ctx, c.env); limited != nil {
		return nil, limited
	}
	jobs, err := c.env.Store.Results(ctx, site.SiteID)
	if err != nil {
		return nil, storeError(store.OpResults, err)
	}
	return c.env.ResultsAnswer(site.SiteID, jobs)
}
