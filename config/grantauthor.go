package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/byollm/relayd/projection"
)

// The bounds of one external grant author call (grants.md G-R35): the
// default, and the most that stays well inside the 10 s sealing window.
const (
	DefaultGrantAuthorTimeout = 2 * time.Second
	MaxGrantAuthorTimeout     = 5 * time.Second
)

// GrantAuthor configures an external grant author (protocol "2",
// docs/grants.md, spec grants.md §7). The zero value is none. Only the
// token file's path is held here: the server reads the token into package
// admission.
type GrantAuthor struct {
	// URL is where each claimed job of a device enrolled with one of Keys
	// is POSTed: HTTPS, or HTTP to a loopback host only.
	URL string
	// Keys are the author's public keys (unpadded base64url), the first
	// current: what `relayd approve` enrols devices with.
	Keys []string
	// Timeout bounds one call.
	Timeout time.Duration
	// TokenFile, when set, holds the bearer token sent to the author.
	TokenFile string
}

// Enabled reports whether an external author is configured.
func (a GrantAuthor) Enabled() bool { return a.URL != "" }

// grantAuthorFlags binds the external author's flags to a.
func grantAuthorFlags(fs *flag.FlagSet, a *GrantAuthor) {
	fs.StringVar(&a.URL, "grant-author-url", "", `protocol "2": an external grant author, POSTed each claimed job of a device enrolled with one of --grant-author-key (HTTPS, or HTTP to a loopback host only); needs --grant-author-key`)
	fs.Func("grant-author-key", `protocol "2": the external grant author's Ed25519 public keys (unpadded base64url), comma-separated or repeated, the first current; needs --grant-author-url`, func(s string) error {
		for _, k := range strings.Split(s, ",") {
			a.Keys = append(a.Keys, strings.TrimSpace(k))
		}
		return nil
	})
	fs.DurationVar(&a.Timeout, "grant-author-timeout", DefaultGrantAuthorTimeout, `protocol "2": the longest one external grant author call may take, at most 5s; a slower answer declines the job for 30 s`)
	fs.StringVar(&a.TokenFile, "grant-author-token-file", "", `protocol "2": a file holding the bearer token sent to the external grant author (never logged)`)
}

// validate checks the external author's settings (G-R35): each of the URL
// and the keys is refused without the other.
func (a GrantAuthor) validate(v2 bool) []error {
	var errs []error
	switch {
	case a.URL != "" && len(a.Keys) == 0:
		errs = append(errs, errors.New("--grant-author-url needs --grant-author-key"))
	case a.URL == "" && len(a.Keys) > 0:
		errs = append(errs, errors.New("--grant-author-key needs --grant-author-url"))
	case a.URL == "" && a.TokenFile != "":
		errs = append(errs, errors.New("--grant-author-token-file needs --grant-author-url"))
	}
	if a.URL != "" {
		if !v2 {
			errs = append(errs, errors.New(`--grant-author-url needs protocol "2" (--protocols 2 or 0,2)`))
		}
		if err := checkAuthorURL(a.URL); err != nil {
			errs = append(errs, fmt.Errorf("--grant-author-url: %w", err))
		}
	}
	seen := map[string]bool{}
	for i, k := range a.Keys {
		if _, err := projection.ParseGrantKey(k); err != nil {
			errs = append(errs, fmt.Errorf("--grant-author-key %d: %w", i+1, err))
		} else if seen[k] {
			errs = append(errs, fmt.Errorf("--grant-author-key %d is listed twice", i+1))
		}
		seen[k] = true
	}
	if a.Timeout <= 0 || a.Timeout > MaxGrantAuthorTimeout {
		errs = append(errs, fmt.Errorf("--grant-author-timeout must be positive and at most %s", MaxGrantAuthorTimeout))
	}
	return errs
}

// checkAuthorURL refuses a URL a token could leak over: anything but HTTPS,
// or plain HTTP to a loopback host, and any URL carrying credentials.
func checkAuthorURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("not an absolute URL")
	}
	if u.User != nil {
		return errors.New("must not carry credentials; use --grant-author-token-file")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if loopback(u.Hostname()) {
			return nil
		}
		return errors.New("plain http is accepted only to a loopback host; use https")
	}
	return fmt.Errorf("scheme %q: want https (or http to a loopback host)", u.Scheme)
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
