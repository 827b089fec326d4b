package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// anyAdminHost, as an --admin-hosts entry, answers every Host.
const anyAdminHost = "*"

// addAdminHosts appends the comma-separated --admin-hosts entries in s to
// hosts, in lower case, refusing one that is neither "*", a host name nor
// an IP address, each with an optional port: a URL or a path there would
// match nothing, and say so only when the operator's proxy was refused.
func addAdminHosts(hosts *[]string, s string) error {
	for _, entry := range strings.Split(s, ",") {
		entry = strings.ToLower(strings.TrimSpace(entry))
		if entry == "" {
			continue
		}
		if err := checkAdminHost(entry); err != nil {
			return err
		}
		*hosts = append(*hosts, entry)
	}
	return nil
}

func checkAdminHost(entry string) error {
	if entry == anyAdminHost {
		return nil
	}
	host := entry
	if h, port, err := net.SplitHostPort(entry); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("admin host %q: port %q is not a number from 1 to 65535", entry, port)
		}
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil || isHostName(host) {
		return nil
	}
	return fmt.Errorf(`admin host %q is not a host name or IP address with an optional port, nor "*"`, entry)
}

// isHostName reports whether s is made of DNS labels: letters, digits,
// hyphens and underscores, between dots.
func isHostName(s string) bool {
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// AdminHostNames are the Host names the admin listener answers for beyond
// localhost and IP literals: --admin-hosts, and the name in --admin-listen
// when it listens on a name rather than an address.
func (c Config) AdminHostNames() []string {
	names := append([]string(nil), c.AdminHosts...)
	host, _, err := net.SplitHostPort(c.AdminListen)
	if host = strings.ToLower(host); err == nil && isHostName(host) {
		if _, err := netip.ParseAddr(host); err != nil {
			names = append(names, host)
		}
	}
	return names
}
