package codec0

import (
	"context"
	"net/http"
	"net/url"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol"
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

// admitSite refuses a request its schema does not read, one for another
// site than the signer, and one from a site this relay does not route for.
func admitSite[Req codec.SiteRequest](c *Codec, ctx context.Context, site *codec.SiteCaller, req Req, err error) error {
	switch {
	case err != nil:
		return site.Refuse(ctx, c.env, schemaRefusal())
	case req.ForSite() != site.SiteID:
		return site.Refuse(ctx, c.env, protocol.Refuse(protocol.CodeForbidden, protocol.MsgNotYourSite))
	case site.SiteID != c.env.SiteID:
		return site.Refuse(ctx, c.env, protocol.Refuse(protocol.CodeForbidden, protocol.MsgNotRoutedForYou))
	}
	return nil
}

// fromBody decodes a site route's request from its body.
func fromBody[Req any](decode func(*protocol.Body) (Req, error)) func(*codec.Request) (Req, error) {
	return func(req *codec.Request) (Req, error) { return decode(req.SchemaBody()) }
}

// fromQuery reads the siteId of a read route from the query; the body of
// a POST to a read route is signed but otherwise ignored (RB-A14).
func fromQuery(req *codec.Request) (protocol.SiteQuery, error) {
	query, _ := url.ParseQuery(req.RawQuery)
	return protocol.DecodeSiteQuery(query.Get("siteId"))
}

// sitePlane runs the site-plane auth pipeline (RB-A4) and then the route.
func (c *Codec) sitePlane(ctx context.Context, req *codec.Request, route siteRoute) (any, error) {
	caller, err := c.env.AuthenticateSite(ctx, req, codec.SiteRefusals{
		NotSigned:     func() codec.Refusal { return protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgNotSigned) },
		NotRegistered: func() codec.Refusal { return protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgSiteNotRegistered) },
	})
	if err != nil {
		return nil, err
	}
	return route.Serve(ctx, c, caller, req)
}

func (c *Codec) enqueue(ctx context.Context, site *codec.SiteCaller, req protocol.EnqueueRequest) (protocol.EnqueueResponse, error) {
	if keyID, ok := protocol.KeyIDOf(site.Site.Identity); !ok || req.Stub.Site != keyID {
		return protocol.EnqueueResponse{}, site.Refuse(ctx, c.env, protocol.RefuseWith(http.StatusForbidden, protocol.CodeUnauthorized, protocol.MsgStubWrongSite))
	}
	res, err := c.env.Store.Enqueue(ctx, store.EnqueueInput{Proto: store.Proto0, SiteID: site.SiteID, Stub: req.Stub, Admit: site.Admission()})
	if err != nil {
		return protocol.EnqueueResponse{}, storeError(store.OpEnqueue, err)
	}
	return protocol.EnqueueResponse{JobID: req.Stub.ID, State: string(res.State)}, nil
}

func (c *Codec) payload(ctx context.Context, site *codec.SiteCaller, req protocol.PayloadRequest) (protocol.PayloadResponse, error) {
	if err := c.env.Store.Payload(ctx, store.PayloadInput{JobID: req.JobID, SiteID: site.SiteID, Envelope: req.Envelope, Admit: site.Admission()}); err != nil {
		return protocol.PayloadResponse{}, storeError(store.OpPayload, err)
	}
	return protocol.PayloadResponse{JobID: req.JobID, State: string(store.Ready)}, nil
}

func (c *Codec) cancel(ctx context.Context, site *codec.SiteCaller, req protocol.CancelRequest) (protocol.CancelResponse, error) {
	ok, err := c.env.Store.Cancel(ctx, store.CancelInput{JobID: req.JobID, SiteID: site.SiteID, Admit: site.Admission()})
	if err != nil {
		return protocol.CancelResponse{}, storeError(store.OpCancel, err)
	}
	return protocol.CancelResponse{Cancelled: ok}, nil
}

func (c *Codec) pending(ctx context.Context, site *codec.SiteCaller, _ protocol.SiteQuery) (protocol.PendingResponse, error) {
	if limited := site.Pay(ctx, c.env); limited != nil {
		return protocol.PendingResponse{}, limited
	}
	swept, err := store.SweepForSite(ctx, c.env.Store, site.SiteID)
	if err != nil {
		return protocol.PendingResponse{}, storeError(store.OpSweep, err)
	}
	c.env.Swept(ctx, swept)
	jobs, err := c.env.Store.Pending(ctx, site.SiteID)
	if err != nil {
		return protocol.PendingResponse{}, storeError(store.OpPending, err)
	}
	return protocol.PendingResponse{Jobs: codec.PendingJobs(jobs)}, nil
}

func (c *Codec) results(ctx context.Context, site *codec.SiteCaller, _ protocol.SiteQuery) (codec.RawJSON, error) {
	if limited := site.Pay(ctx, c.env); limited != nil {
		return nil, limited
	}
	jobs, err := c.env.Store.Results(ctx, site.SiteID)
	if err != nil {
		return nil, storeError(store.OpResults, err)
	}
	return c.env.ResultsAnswer(site.SiteID, jobs)
}
