package plane

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/byollm/relayd/pairing"
	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// pendingPairingPath is where the admin listener resolves a user code to
// the pending device behind it (decision P2-D3), for `relayd approve` or a
// control plane. It is never served on the public listener: it tells
// whoever asks which keypair is about to be paired, and nothing there
// needs it.
const pendingPairingPath = "/pairings/:userCode"

// pairingApprovalPath is where the admin listener marks a pending code
// approved (issue 27, RD-D13): `relayd approve` posts the device identity it
// looked up and is about to write into the fixture, so that only this
// code, and no other code started for the same public identity, may
// collect the pairing.
const pairingApprovalPath = "/pairings/:userCode/approval"

// PairingApproval is the body of an approval: the identity key the
// operator saw behind the user code.
type PairingApproval struct {
	Identity string `json:"identity"`
}

// pendingPairing answers 200 with the pairing.Details of the live code the
// path names, typed as the user read it (normalised as the reference's
// lookup does), and 404 {"error":"not-found"} for any other code. The
// device code is never part of the answer.
func (a *Admin) pendingPairing(c echo.Context) error {
	code, codes, ok := a.pairingCode(c)
	if !ok {
		return protocol.NotFoundPath()
	}
	pending, ok, err := codes.PairingByUserCode(c.Request().Context(), code)
	if err != nil {
		return codec.Failed(store.OpPairingByUserCode, err)
	}
	if !ok {
		return protocol.NotFoundPath()
	}
	return writeJSON(c, http.StatusOK, pairing.DetailsOf(pending))
}

// approvePairing marks approved the live code the path names whose device
// has the posted identity, and answers 200 with its pairing.Details; 404
// {"error":"not-found"} when there is no such code, 400 for a body that is
// not a PairingApproval. Marking changes no projection: the device is
// approved once the fixture names it too.
func (a *Admin) approvePairing(c echo.Context) error {
	code, codes, ok := a.pairingCode(c)
	if !ok {
		return protocol.NotFoundPath()
	}
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, 64<<10))
	var body PairingApproval
	if err != nil || json.Unmarshal(raw, &body) != nil || body.Identity == "" {
		return protocol.Refuse(protocol.CodeBadRequest, "want {\"identity\": the pending device's identity key}")
	}
	pending, ok, err := codes.ApprovePairing(c.Request().Context(), code, body.Identity)
	if err != nil {
		return codec.Failed(store.OpApprovePairing, err)
	}
	if !ok {
		return protocol.NotFoundPath()
	}
	return writeJSON(c, http.StatusOK, pairing.DetailsOf(pending))
}

// pairingCode is the path's user code, normalised as the reference's
// lookup does, and the code store; false when either cannot name a code.
func (a *Admin) pairingCode(c echo.Context) (string, store.Pairings, bool) {
	typed, err := url.PathUnescape(c.Param("userCode"))
	if err != nil {
		return "", nil, false
	}
	code := pairing.NormalizeUserCode(typed)
	codes := a.relay.cfg.Pairings
	if codes == nil || !pairing.ValidUserCode(code) {
		return "", nil, false
	}
	return code, codes, true
}
