package plane

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// daemonCall is an authenticated daemon request.
type daemonCall struct {
	request
	who store.Presence
	// proj is the projection the call was authenticated under; handlers
	// decide with the same one, even if a reload lands meanwhile.
	proj *projection.Projection
}

type daemonHandler func(r *Relay, q *daemonCall) error

func (r *Relay) daemonHandler(endpoint string) daemonHandler {
	switch endpoint {
	case "claim":
		return (*Relay).claim
	case "fetch":
		return (*Relay).fetch
	case "result":
		return (*Relay).result
	case "heartbeat":
		return (*Relay).heartbeat
	case "release":
		return (*Relay).release
	}
	return nil
}

// versionRefusal is relayd's answer to a body naming another protocol
// version, given before the signature is checked (G4).
func (r *Relay) versionRefusal(body []byte) *protocol.Refusal {
	if v, present := r.decoder.PeekProtocolVersion(body); present && v != protocol.Version {
		return protocol.UnsupportedVersion()
	}
	return nil
}

// daemonPlane runs the daemon-plane auth pipeline (A3, with relayd's G4 and
// G7 differences) and then the endpoint's handler.
func (r *Relay) daemonPlane(c echo.Context, endpoint string, h daemonHandler) error {
	body, refusal := r.readBody(c)
	if refusal != nil {
		return writeRefusal(c, refusal)
	}
	if refusal := r.versionRefusal(body); refusal != nil {
		return writeRefusal(c, refusal)
	}
	q := &daemonCall{request: request{c: c, endpoint: endpoint, body: body}}
	sig, ok := protocol.ParseSignature(c.Request().Header, protocol.HeaderRunner)
	if !ok {
		return writeRefusal(c, protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgNotSigned))
	}
	who, found, err := r.cfg.Store.Presence(q.ctx(), sig.CallerID)
	if err != nil {
		return storeFailure(c, r.cfg.Logger, "presence", err)
	}
	proj := r.projection()
	// A runner whose device record left the projection, or whose approved
	// keys or owner changed since it paired, is no longer anyone the relay
	// knows (G7); pairing again takes up what the projection says now.
	dev, approved := proj.DeviceFor(sig.CallerID)
	if !found || !approved || dev.Device != who.Device || dev.Owner != who.Owner {
		return writeRefusal(c, protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgRunnerNotKnown))
	}
	if refusal := r.verify(sig, endpoint, body, who.Device.Identity); refusal != nil {
		return writeRefusal(c, refusal)
	}
	// Charged only now, under the verified runner id: a stranger naming
	// someone else's runner cannot spend that runner's tokens.
	if refusal := r.rateLimit(c, r.cfg.RateLimit, "runner:"+who.RunnerID); refusal != nil {
		return writeRefusal(c, refusal)
	}
	if _, consented := proj.ConsentFor(who.Owner, r.cfg.SiteID); !consented && endpoint != "heartbeat" {
		return writeRefusal(c, protocol.Refuse(protocol.CodeRevoked, protocol.MsgRevoked))
	}
	// From here every call stamps the runner's presence (G7), before the
	// schema is checked. Claim, fetch and result stamp it within their own
	// store operation, saving a round trip on the hot path, and go through
	// refuse when they stop before it; every other endpoint stamps here.
	q.who, q.proj = who, proj
	if !stampsInOperation(endpoint) {
		if ok, err := r.touch(q); !ok {
			return err
		}
	}
	return h(r, q)
}

// stampsInOperation names the endpoints whose store operation stamps the
// caller's presence itself (the Touch flag).
func stampsInOperation(endpoint string) bool {
	switch endpoint {
	case "claim", "fetch", "result":
		return true
	}
	return false
}

// touch stamps the caller's presence on its own. When the store fails it
// answers that and reports false, with the answer's write error.
func (r *Relay) touch(q *daemonCall) (bool, error) {
	if _, err := r.cfg.Store.Touch(q.ctx(), q.who.RunnerID); err != nil {
		return false, storeFailure(q.c, r.cfg.Logger, "touch", err)
	}
	return true, nil
}

// refuse answers a refusal given before the call's store operation ran,
// stamping the caller's presence first.
func (r *Relay) refuse(q *daemonCall, refusal *protocol.Refusal) error {
	if ok, err := r.touch(q); !ok {
		return err
	}
	return writeRefusal(q.c, refusal)
}

// verify checks a signature's freshness on the relay clock, then the key.
func (r *Relay) verify(sig protocol.Signature, endpoint string, body []byte, identity string) *protocol.Refusal {
	now := r.nowMs()
	switch protocol.Verify(sig, endpoint, body, identity, now) {
	case protocol.Stale:
		return protocol.ClockSkew(now)
	case protocol.BadSignature:
		return protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgBadSignature)
	}
	return nil
}

func schemaRefusal() *protocol.Refusal {
	return protocol.Refuse(protocol.CodeBadRequest, protocol.MsgSchema)
}

// pair registers a device the projection approved (A5). It is unsigned.
func (r *Relay) pair(c echo.Context) error {
	// Unsigned, so charged to the client address, before the body is read.
	if refusal := r.rateLimit(c, r.cfg.RateLimit, "addr:"+r.clientAddr(c.Request())); refusal != nil {
		return writeRefusal(c, refusal)
	}
	body, refusal := r.readBody(c)
	if refusal != nil {
		return writeRefusal(c, refusal)
	}
	if refusal := r.versionRefusal(body); refusal != nil {
		return writeRefusal(c, refusal)
	}
	req, err := r.decoder.Pair(body)
	if err != nil {
		return writeRefusal(c, protocol.Refuse(protocol.CodeBadRequest, protocol.MsgPairSchema))
	}
	if !req.Device.IsConsistent() {
		return writeRefusal(c, protocol.Refuse(protocol.CodeBadRequest, protocol.MsgInconsistentDevice))
	}
	proj := r.projection()
	if _, ok := proj.ConsentFor(req.Owner, r.cfg.SiteID); !ok {
		return writeRefusal(c, protocol.Refuse(protocol.CodeForbidden, protocol.MsgNoConsent))
	}
	site, ok := proj.SiteFor(r.cfg.SiteID)
	if !ok {
		return writeRefusal(c, protocol.Refuse(protocol.CodeForbidden, protocol.MsgSiteNotRegistered))
	}
	approved, ok := proj.DeviceByFingerprint(req.Device.Identity)
	if !ok {
		return writeRefusal(c, protocol.RefuseWith(http.StatusForbidden, protocol.CodeUnauthorized, protocol.MsgDeviceNotApproved))
	}
	if approved.Owner != req.Owner {
		return writeRefusal(c, protocol.Refuse(protocol.CodeForbidden, protocol.MsgDeviceOtherOwner))
	}
	// Store the keys the projection approved, never the ones presented:
	// pairing is unsigned, and an old but self-consistent key set is public,
	// so storing what was sent would let anyone roll a device back to a
	// retired encryption key (G7).
	if _, err := r.cfg.Store.Pair(c.Request().Context(), store.PairInput{RunnerID: approved.RunnerID, Owner: approved.Owner, Device: approved.Device}); err != nil {
		return storeFailure(c, r.cfg.Logger, "seen", err)
	}
	return writeJSON(c, http.StatusOK, protocol.PairResponse{ProtocolVersion: protocol.Version, RunnerID: approved.RunnerID, Site: site.Site})
}

func (r *Relay) claim(q *daemonCall) error {
	req, err := r.decoder.Claim(q.body)
	if err != nil {
		return r.refuse(q, schemaRefusal())
	}
	if req.RunnerID != q.who.RunnerID {
		return r.refuse(q, protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgRunnerMismatch))
	}
	var kinds []string
	for _, cp := range req.Capabilities {
		if !slices.Contains(kinds, cp.Kind) {
			kinds = append(kinds, cp.Kind)
		}
	}
	owners := q.proj.RoutableOwners(q.who.Owner, r.cfg.SiteID)
	routes := make([]store.Route, 0, len(owners))
	for _, o := range owners {
		routes = append(routes, store.Route{SiteID: r.cfg.SiteID, Owner: o})
	}
	jobs, err := r.cfg.Store.Claim(q.ctx(), store.ClaimInput{
		RunnerID: q.who.RunnerID, Owner: q.who.Owner, Device: q.who.Device,
		Routes: routes, Kinds: kinds, Max: req.Max, LeaseMs: r.cfg.LeaseMs, Touch: true,
	})
	if err != nil {
		return storeFailure(q.c, r.cfg.Logger, "claim", err)
	}
	if jobs == nil {
		jobs = []protocol.ClaimedStub{}
	}
	return writeJSON(q.c, http.StatusOK, protocol.ClaimResponse{Jobs: jobs, LeaseMs: r.cfg.LeaseMs})
}

func (r *Relay) fetch(q *daemonCall) error {
	req, err := r.decoder.Fetch(q.body)
	if err != nil {
		return r.refuse(q, schemaRefusal())
	}
	env, err := r.cfg.Store.Fetch(q.ctx(), store.LeaseInput{JobID: req.JobID, RunnerID: q.who.RunnerID, LeaseID: req.LeaseID, Touch: true})
	if refusal := leaseRefusal(store.RefusalOf(err)); refusal != nil {
		return writeRefusal(q.c, refusal)
	}
	if err != nil {
		return storeFailure(q.c, r.cfg.Logger, "takePayload", err)
	}
	return writeJSON(q.c, http.StatusOK, protocol.FetchResponse{Envelope: env})
}

func (r *Relay) result(q *daemonCall) error {
	req, err := r.decoder.Result(q.body)
	if err != nil {
		return r.refuse(q, schemaRefusal())
	}
	res, err := r.cfg.Store.Result(q.ctx(), store.ResultInput{
		LeaseInput:  store.LeaseInput{JobID: req.JobID, RunnerID: q.who.RunnerID, LeaseID: req.LeaseID, Touch: true},
		Envelope:    req.Envelope,
		Disposition: req.Disposition,
	})
	if refusal := leaseRefusal(store.RefusalOf(err)); refusal != nil {
		return writeRefusal(q.c, refusal)
	}
	if err != nil {
		return storeFailure(q.c, r.cfg.Logger, "complete", err)
	}
	return writeJSON(q.c, http.StatusOK, protocol.ResultResponse{Accepted: !res.Duplicate, Duplicate: res.Duplicate, State: string(store.Done)})
}

func (r *Relay) heartbeat(q *daemonCall) error {
	req, err := r.decoder.Heartbeat(q.body)
	if err != nil {
		return writeRefusal(q.c, schemaRefusal())
	}
	serverTime := r.nowMs()
	if _, err := r.cfg.Store.Sweep(q.ctx()); err != nil {
		return storeFailure(q.c, r.cfg.Logger, "sweep", err)
	}
	if _, consented := q.proj.ConsentFor(q.who.Owner, r.cfg.SiteID); !consented {
		lost := make([]string, 0, len(req.ActiveLeases))
		for _, l := range req.ActiveLeases {
			lost = append(lost, l.JobID)
		}
		return writeJSON(q.c, http.StatusOK, protocol.HeartbeatResponse{Revoked: true, Cancel: []string{}, Lost: lost, ServerTime: serverTime})
	}
	cancel, err := r.cfg.Store.CancelRequests(q.ctx(), q.who.RunnerID)
	if err != nil {
		return storeFailure(q.c, r.cfg.Logger, "cancelRequests", err)
	}
	renewed, err := r.cfg.Store.Renew(q.ctx(), store.RenewInput{RunnerID: q.who.RunnerID, Leases: req.ActiveLeases, LeaseMs: r.cfg.LeaseMs})
	if err != nil {
		return storeFailure(q.c, r.cfg.Logger, "renewLeases", err)
	}
	return writeJSON(q.c, http.StatusOK, protocol.HeartbeatResponse{Revoked: false, Cancel: nonNil(cancel), Lost: nonNil(renewed.Lost), ServerTime: serverTime})
}

func (r *Relay) release(q *daemonCall) error {
	req, err := r.decoder.Release(q.body)
	if err != nil {
		return writeRefusal(q.c, schemaRefusal())
	}
	released, err := r.cfg.Store.Release(q.ctx(), store.ReleaseInput{RunnerID: q.who.RunnerID, Leases: req.Leases, Reason: req.Reason})
	if err != nil {
		return storeFailure(q.c, r.cfg.Logger, "releaseLeases", err)
	}
	return writeJSON(q.c, http.StatusOK, protocol.ReleaseResponse{Released: nonNil(released)})
}

// nonNil keeps an empty list an empty JSON array rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
