package plane

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// clientAddr names the client a pairing is charged to: the connection's
// address, or with TrustForwardedFor the last X-Forwarded-For entry (the
// one the load balancer in front appended; earlier ones are whatever the
// client sent). IPv6 clients are charged per /64, the block one
// subscriber usually holds, so that hopping addresses within it does not
// buy more requests.
func (r *Relay) clientAddr(req *http.Request) string {
	if r.cfg.TrustForwardedFor {
		if vals := req.Header.Values("X-Forwarded-For"); len(vals) > 0 {
			last := vals[len(vals)-1]
			last = strings.TrimSpace(last[strings.LastIndexByte(last, ',')+1:])
			if a, err := netip.ParseAddr(last); err == nil {
				return addrKey(a)
			}
			// Some balancers write the client's port too.
			if ap, err := netip.ParseAddrPort(last); err == nil {
				return addrKey(ap.Addr())
			}
		}
	}
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		host = req.RemoteAddr
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return addrKey(a)
	}
	return host
}

func addrKey(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
