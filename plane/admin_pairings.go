package plane

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/byollm/relayd/pairing"
	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// pendingPairingPath is where the admin listener resolves a user code to
// the pending device behind it (decision D3), for `relayd approve` or a
// control plane. It is never served on the public listener: it tells
// whoever asks which keypair is about to be paired, and nothing there
// needs it.
const pendingPairingPath = "/pairings/:userCode"

// pendingPairing answers 200 with the pairing.Details of the live code the
// path names, typed as the user read it (normalised as the reference's
// lookup does), and 404 {"error":"not-found"} for any other code. The
// device code is never part of the answer.
func (a *Admin) pendingPairing(c echo.Context) error {
	typed, err := url.PathUnescape(c.Param("userCode"))
	if err != nil {
		return protocol.NotFoundPath()
	}
	code := pairing.NormalizeUserCode(typed)
	codes := a.relay.cfg.Pairings
	if codes == nil || !pairing.ValidUserCode(code) {
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
