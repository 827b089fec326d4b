package plane

import (
	"net/http"
	"sync/atomic"

	"github.com/labstack/echo/v4"
)

// Admin serves the operator's endpoints on a private listener: liveness,
// readiness, the debug page and the pending pairings, each only to a Host
// that Config.AdminHosts accepts.
type Admin struct {
	relay    *Relay
	echo     *echo.Echo
	draining atomic.Bool
}

// NewAdmin builds the admin handler for relay. Extra handlers (metrics) can
// be mounted with Mount.
func NewAdmin(relay *Relay) *Admin {
	a := &Admin{relay: relay, echo: newEcho(relay.cfg.Logger, observer{})}
	// Before routing, so that a stranger's Host learns nothing, not even
	// which paths exist.
	a.echo.Pre(relay.adminHosts.checkHost)
	a.echo.GET("/healthz", func(c echo.Context) error {
		return writeJSON(c, http.StatusOK, map[string]string{"status": "ok"})
	})
	a.echo.GET("/readyz", a.readyz)
	a.echo.GET(pendingPairingPath, a.pendingPairing)
	a.echo.POST(pairingApprovalPath, a.approvePairing)
	a.echo.GET(grantKeysPath, a.grantKeys)
	a.echo.Any("/debug", relay.serveDebug)
	a.echo.Any(relay.basePath+"/debug", relay.serveDebug)
	return a
}

// Handler returns the admin listener's handler.
func (a *Admin) Handler() http.Handler { return a.echo }

// Mount serves h at path on the admin listener.
func (a *Admin) Mount(path string, h http.Handler) { a.echo.Any(path, echo.WrapHandler(h)) }

// Drain marks the relay as going away: readiness fails from now on, so a
// load balancer stops sending it new work while in-flight requests finish.
func (a *Admin) Drain() { a.draining.Store(true) }

type readiness struct {
	Status     string `json:"status"`
	Projection string `json:"projection,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// EnqueuePolicy is said while protocol "2" is served (decision P2-D5).
	EnqueuePolicy string `json:"enqueuePolicy,omitempty"`
	// Grants is said while a grant key is configured (grants.md G-R50).
	Grants *grantsReadiness `json:"grants,omitempty"`
}

// NoEnqueuePolicy says that nothing checks a job at enqueue: relayd has no
// control plane to say whether anyone can answer a purpose, so it accepts
// every well-formed stub (decision P2-D5). The boot log and /readyz say it.
const NoEnqueuePolicy = "no enqueue policy is configured: every well-formed protocol \"2\" job is accepted at enqueue"

// readyz is ready when the relay is not draining and its store answers. The
// body names the projection's hash so operators can see that replicas agree.
func (a *Admin) readyz(c echo.Context) error {
	r := readiness{Projection: a.relay.projection().Hash()}
	if a.relay.cfg.Protocols.V2 {
		r.EnqueuePolicy = NoEnqueuePolicy
		r.Grants = a.grantsReadiness()
	}
	if a.draining.Load() {
		r.Status = "draining"
		return writeJSON(c, http.StatusServiceUnavailable, r)
	}
	if err := a.relay.cfg.Store.Ping(c.Request().Context()); err != nil {
		r.Status, r.Reason = "unavailable", "store unreachable"
		return writeJSON(c, http.StatusServiceUnavailable, r)
	}
	r.Status = "ready"
	return writeJSON(c, http.StatusOK, r)
}
