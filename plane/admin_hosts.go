package plane

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/byollm/relayd/protocol"
)

// AnyHost, as one of Config.AdminHosts, turns the Host check off.
const AnyHost = "*"

// AdminHosts decides which Host headers the admin listener (and the public
// debug page) answers. A DNS-rebinding page in an operator's browser reaches
// a private listener under a name its author controls, and the browser
// sends that name as Host; so the admin listener answers only names nobody
// can rebind: an empty Host (no browser sends one), "localhost", any IP
// literal, and the names its operator listed.
type AdminHosts struct {
	any bool
	// listed holds the operator's entries in lower case: a bare name
	// matches on every port, "name:port" on that port only.
	listed map[string]bool
}

// NewAdminHosts accepts the default names and the given ones; AnyHost among
// them accepts every Host.
func NewAdminHosts(names []string) AdminHosts {
	h := AdminHosts{listed: map[string]bool{}}
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == AnyHost {
			h.any = true
		}
		h.listed[n] = true
	}
	return h
}

// Allow reports whether a request whose Host header is host is answered.
func (h AdminHosts) Allow(host string) bool {
	if h.any || host == "" {
		return true
	}
	host = strings.ToLower(host)
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ""
	}
	if name == "localhost" {
		return true
	}
	// An IP literal cannot be rebound: the page that sent it was loaded
	// from this very address. This is what keeps the kubelet's probes and
	// Prometheus, which name the pod by its IP, working on a wildcard
	// listener.
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	return h.listed[name] || port != "" && h.listed[name+":"+port]
}

// checkHost refuses, before any handler, a request whose Host this listener
// does not answer for.
func (h AdminHosts) checkHost(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if host := c.Request().Host; !h.Allow(host) {
			return misdirected(host)
		}
		return next(c)
	}
}

// misdirected is the refusal of a Host the listener does not answer for:
// 421, as HTTP names a request sent to a server that will not answer for
// its authority.
func misdirected(host string) *protocol.Refusal {
	return protocol.RefuseWith(http.StatusMisdirectedRequest, protocol.CodeBadRequest,
		fmt.Sprintf("this listener does not answer for host %q; add the name to --admin-hosts", host))
}
