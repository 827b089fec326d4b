package plane

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// siteCall is an authenticated site request.
type siteCall struct {
	request
	site projection.SiteRecord
}

// siteRoute decodes a site-plane request and names the siteId it claims to
// act for; serve then handles the decoded value.
type siteRoute struct {
	decode func(q *siteCall) (siteID string, req any, err error)
	serve  func(r *Relay, q *siteCall, req any) error
}

func (r *Relay) siteHandler(name string) *siteRoute {
	switch name {
	case "enqueue":
		return &siteRoute{decode: decodeBody(r.decoder.Enqueue, func(v protocol.EnqueueRequest) string { return v.SiteID }), serve: (*Relay).enqueue}
	case "payload":
		return &siteRoute{decode: decodeBody(r.decoder.Payload, func(v protocol.PayloadRequest) string { return v.SiteID }), serve: (*Relay).payload}
	case "cancel":
		return &siteRoute{decode: decodeBody(r.decoder.Cancel, func(v protocol.CancelRequest) string { return v.SiteID }), serve: (*Relay).cancel}
	case "pending":
		return &siteRoute{decode: decodeQuery, serve: (*Relay).pending}
	case "results":
		return &siteRoute{decode: decodeQuery, serve: (*Relay).results}
	}
	return nil
}

func decodeBody[T any](decode func([]byte) (T, error), siteOf func(T) string) func(q *siteCall) (string, any, error) {
	return func(q *siteCall) (string, any, error) {
		v, err := decode(q.body)
		return siteOf(v), v, err
	}
}

// decodeQuery reads the siteId of a read route from the query; the body of
// a POST to a read route is signed but otherwise ignored (A14).
func decodeQuery(q *siteCall) (string, any, error) {
	v, err := protocol.DecodeSiteQuery(q.c.Request().URL.Query().Get("siteId"))
	return v.SiteID, v, err
}

// sitePlane runs the site-plane auth pipeline (A4) and then the route.
func (r *Relay) sitePlane(c echo.Context, name string, route *siteRoute) error {
	body, refusal := r.readBody(c)
	if refusal != nil {
		return writeRefusal(c, refusal)
	}
	sig, ok := protocol.ParseSignature(c.Request().Header, protocol.HeaderSite)
	if !ok {
		return writeRefusal(c, protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgNotSigned))
	}
	site, ok := r.projection().SiteFor(sig.CallerID)
	if !ok {
		return writeRefusal(c, protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgSiteNotRegistered))
	}
	if refusal := r.verify(sig, "site/"+name, body, site.Site.Identity); refusal != nil {
		return writeRefusal(c, refusal)
	}
	if refusal := r.rateLimit(c, r.cfg.SiteRateLimit, "site:"+site.SiteID); refusal != nil {
		return writeRefusal(c, refusal)
	}
	q := &siteCall{request: request{c: c, endpoint: name, body: body}, site: site}
	siteID, req, err := route.decode(q)
	if err != nil {
		return writeRefusal(c, schemaRefusal())
	}
	if siteID != sig.CallerID {
		return writeRefusal(c, protocol.Refuse(protocol.CodeForbidden, protocol.MsgNotYourSite))
	}
	if sig.CallerID != r.cfg.SiteID {
		return writeRefusal(c, protocol.Refuse(protocol.CodeForbidden, protocol.MsgNotRoutedForYou))
	}
	return route.serve(r, q, req)
}

func (r *Relay) enqueue(q *siteCall, v any) error {
	req := v.(protocol.EnqueueRequest)
	if keyID, ok := protocol.KeyIDOf(q.site.Site.Identity); !ok || req.Stub.Site != keyID {
		return writeRefusal(q.c, protocol.RefuseWith(http.StatusForbidden, protocol.CodeUnauthorized, protocol.MsgStubWrongSite))
	}
	res, err := r.cfg.Store.Enqueue(q.ctx(), store.EnqueueInput{SiteID: q.site.SiteID, Stub: req.Stub})
	if store.RefusalOf(err) == store.RefusedIDTaken {
		return writeRefusal(q.c, protocol.Refuse(protocol.CodeForbidden, protocol.MsgIDTaken))
	}
	if err != nil {
		return storeFailure(q.c, r.cfg.Logger, "enqueue", err)
	}
	return writeJSON(q.c, http.StatusOK, protocol.EnqueueResponse{JobID: req.Stub.ID, State: string(res.State)})
}

func (r *Relay) payload(q *siteCall, v any) error {
	req := v.(protocol.PayloadRequest)
	err := r.cfg.Store.Payload(q.ctx(), store.PayloadInput{JobID: req.JobID, SiteID: q.site.SiteID, Envelope: req.Envelope})
	if err == nil {
		return writeJSON(q.c, http.StatusOK, protocol.PayloadResponse{JobID: req.JobID, State: string(store.Ready)})
	}
	var refusal *store.Refusal
	if errors.As(err, &refusal) {
		switch refusal.Code {
		case store.RefusedNotFound:
			return writeRefusal(q.c, protocol.Refuse(protocol.CodeNotFound, protocol.MsgUnknownJob))
		case store.RefusedTooLate:
			return writeRefusal(q.c, protocol.Refuse(protocol.CodeTooLate, fmt.Sprintf("job is %s, not awaiting payload", refusal.Was)))
		case store.RefusedOtherDevice:
			// The status and code of a late seal, which sites already handle (D11).
			return writeRefusal(q.c, protocol.Refuse(protocol.CodeTooLate, protocol.MsgSealedForOtherDevice))
		}
	}
	return storeFailure(q.c, r.cfg.Logger, "seal", err)
}

func (r *Relay) cancel(q *siteCall, v any) error {
	req := v.(protocol.CancelRequest)
	ok, err := r.cfg.Store.Cancel(q.ctx(), store.CancelInput{JobID: req.JobID, SiteID: q.site.SiteID})
	if err != nil {
		return storeFailure(q.c, r.cfg.Logger, "cancel", err)
	}
	return writeJSON(q.c, http.StatusOK, protocol.CancelResponse{Cancelled: ok})
}

func (r *Relay) pending(q *siteCall, _ any) error {
	if _, err := r.cfg.Store.Sweep(q.ctx()); err != nil {
		return storeFailure(q.c, r.cfg.Logger, "sweep", err)
	}
	jobs, err := r.cfg.Store.Pending(q.ctx(), q.site.SiteID)
	if err != nil {
		return storeFailure(q.c, r.cfg.Logger, "awaiting", err)
	}
	out := make([]protocol.PendingJob, 0, len(jobs))
	for _, j := range jobs {
		if j.ClaimedBy == nil {
			continue
		}
		out = append(out, protocol.PendingJob{
			JobID: j.ID, Device: j.ClaimedBy.Device, RunnerID: j.ClaimedBy.RunnerID, LeaseID: j.ClaimedBy.LeaseID,
			AwaitingUntil: j.AwaitingUntil, LeaseExpiresAt: j.ClaimedBy.LeaseExpiresAt,
		})
	}
	return writeJSON(q.c, http.StatusOK, protocol.PendingResponse{Jobs: out})
}

func (r *Relay) results(q *siteCall, _ any) error {
	jobs, err := r.cfg.Store.Results(q.ctx(), q.site.SiteID)
	if err != nil {
		return storeFailure(q.c, r.cfg.Logger, "finished", err)
	}
	out := make([]protocol.FinishedJob, 0, len(jobs))
	for _, j := range jobs {
		if j.ClaimedBy == nil || j.Result == nil {
			continue
		}
		out = append(out, protocol.FinishedJob{
			JobID: j.ID, Envelope: *j.Result, Disposition: j.Disposition, RunnerID: j.ClaimedBy.RunnerID,
			LeaseID: j.ClaimedBy.LeaseID, Device: j.ClaimedBy.Device, RunnerOwner: j.ClaimedBy.Owner,
		})
	}
	return writeJSON(q.c, http.StatusOK, protocol.ResultsResponse{Jobs: out})
}
