package plane

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/byollm/relayd/plane/codec2"
)

// grantKeysPath is where the admin listener names the grant keys this
// replica signs with (spec grants.md G-R50), for `relayd approve` to
// enrol the devices it approves with the current one. Public halves only.
const grantKeysPath = "/grant-keys"

// grantKeys is the answer of grantKeysPath: current is null when grants
// are off.
type grantKeys struct {
	Current *codec2.GrantKey  `json:"current"`
	Keys    []codec2.GrantKey `json:"keys"`
}

func (a *Admin) grantKeys(c echo.Context) error {
	keys := a.relay.cfg.V2.Grants.Keys()
	out := grantKeys{Keys: keys}
	if len(keys) > 0 {
		out.Current = &keys[0]
	}
	return writeJSON(c, http.StatusOK, out)
}

// grantsReadiness is what /readyz says of grants when a key is configured
// (G-R50): its mode is the current key's signer, local or external; a
// replica that lacks a key some device is enrolled with stays ready, and
// says how many such devices there are.
type grantsReadiness struct {
	Mode       string   `json:"mode"`
	Current    string   `json:"current"`
	Keys       []string `json:"keys"`
	Unsignable int      `json:"unsignable"`
}

func (a *Admin) grantsReadiness() *grantsReadiness {
	g := a.relay.cfg.V2.Grants
	keys := g.Keys()
	if len(keys) == 0 {
		return nil
	}
	r := &grantsReadiness{Mode: keys[0].Signer, Current: keys[0].KeyID, Keys: []string{}, Unsignable: g.Unsignable(a.relay.projection())}
	for _, k := range keys {
		r.Keys = append(r.Keys, k.KeyID)
	}
	return r
}
