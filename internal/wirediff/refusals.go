package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

// bodyLimit is relayd's default --max-body-bytes; the 413 step sends one
// byte more.
const bodyLimit = 8 << 20

// claimBody is a well-formed claim of runner in protocol version.
func claimBody(version, runner string) []byte {
	return fmt.Appendf(nil, `{"protocolVersion":%q,"runnerId":%q,"capabilities":[{"kind":"llm.generate","backendId":"b","backendClass":"process"}],"max":1}`, version, runner)
}

// refusals provokes the refusals of the daemon and site planes in
// protocol "0", each once.
func (s *script) refusals(ctx context.Context) error {
	f, err := s.newFlow0()
	if err != nil {
		return err
	}
	stranger, err := s.stranger()
	if err != nil {
		return err
	}
	d, runner := f.daemon, f.daemon.RunnerID()
	good := claimBody(protocol.Version, runner)
	s.step(ctx, "0 bad signature", func(ctx context.Context) error {
		return raw(ctx, d.Transport, peer.RawRequest{Method: http.MethodPost, Path: d.Path("claim"), Header: d.SignHeaders("claim", []byte("{}")), Body: good})
	})
	s.step(ctx, "0 clock skew", func(ctx context.Context) error {
		h := d.SignHeadersAt("claim", good, d.IssuedAt()-int64(time.Hour/time.Millisecond))
		return raw(ctx, d.Transport, peer.RawRequest{Method: http.MethodPost, Path: d.Path("claim"), Header: h, Body: good})
	})
	s.step(ctx, "0 unknown runner", func(ctx context.Context) error {
		return drop(stranger.Do(ctx, "claim", claimBody(protocol.Version, "runner_nobody")))
	})
	s.step(ctx, "0 wrong version", func(ctx context.Context) error { return drop(d.Do(ctx, "claim", claimBody("9", runner))) })
	s.step(ctx, "0 bad JSON", func(ctx context.Context) error { return drop(d.Do(ctx, "claim", []byte(`{"protocolVersion":`))) })
	s.step(ctx, "0 unknown field", func(ctx context.Context) error {
		return drop(d.Do(ctx, "claim", []byte(`{"protocolVersion":"0","runnerId":"`+runner+`","capabilities":[],"max":1,"extra":1}`)))
	})
	s.step(ctx, "0 unknown endpoint", func(ctx context.Context) error { return drop(d.Do(ctx, "no-such-endpoint", []byte("{}"))) })
	s.step(ctx, "0 wrong method", func(ctx context.Context) error { return raw(ctx, d.Transport, peer.RawRequest{Path: d.Path("claim")}) })
	s.step(ctx, "0 body too large", func(ctx context.Context) error {
		return drop(d.Do(ctx, "claim", bytes.Repeat([]byte(" "), bodyLimit+1)))
	})
	s.step(ctx, "0 fetch unknown job", func(ctx context.Context) error {
		return drop(d.Do(ctx, "fetch", []byte(`{"protocolVersion":"0","runnerId":"`+runner+`","jobId":"wd0-none","leaseId":"nope"}`)))
	})
	s.siteRefusals(ctx, f)
	s.step(ctx, "unknown path", func(ctx context.Context) error { return raw(ctx, d.Transport, peer.RawRequest{Path: "/no-such-path"}) })
	return nil
}

// siteRefusals are the site plane's refusals in protocol "0".
func (s *script) siteRefusals(ctx context.Context, f *flow0) {
	site := f.site
	late := f.stub(s, "wd0-late")
	late.DeadlineAt = time.Now().Add(-time.Minute).UnixMilli()
	s.step(ctx, "0 site too late", func(ctx context.Context) error { return ignoreRefusal(drop(site.Enqueue(ctx, late))) })
	s.step(ctx, "0 site bad JSON", func(ctx context.Context) error {
		return drop(site.Do(ctx, http.MethodPost, "enqueue", []byte(`{"stub":`)))
	})
	s.step(ctx, "0 site bad signature", func(ctx context.Context) error {
		return raw(ctx, site.Transport, peer.RawRequest{Method: http.MethodPost, Path: peer.SitePathPrefix + "enqueue", Header: site.SignHeaders("site/enqueue", []byte("{}")), Body: []byte(`{"a":1}`)})
	})
	s.step(ctx, "0 site unsigned", func(ctx context.Context) error {
		return raw(ctx, site.Transport, peer.RawRequest{Method: http.MethodGet, Path: peer.SitePathPrefix + "pending?siteId=" + site.SiteID()})
	})
	s.step(ctx, "0 site unknown endpoint", func(ctx context.Context) error {
		return drop(site.Do(ctx, http.MethodPost, "no-such-endpoint", []byte("{}")))
	})
	s.step(ctx, "0 site body too large", func(ctx context.Context) error {
		return drop(site.Do(ctx, http.MethodPost, "enqueue", bytes.Repeat([]byte(" "), bodyLimit+1)))
	})
}

// stranger is a daemon with keys no fixture lists.
func (s *script) stranger() (*peer.Daemon, error) {
	keys, err := peer.GenerateKeys()
	if err != nil {
		return nil, fmt.Errorf("stranger keys: %w", err)
	}
	d, err := peer.NewDaemon(s.cfg(), keys, "runner_nobody")
	if err != nil {
		return nil, fmt.Errorf("stranger daemon: %w", err)
	}
	return d, nil
}

// refusals2 provokes the same daemon refusals in protocol "2".
func (s *script) refusals2(ctx context.Context) error {
	f, err := s.newFlow2()
	if err != nil {
		return err
	}
	d, runner := f.daemon, f.daemon.RunnerID()
	keys, err := peer.GenerateKeys()
	if err != nil {
		return fmt.Errorf("stranger keys: %w", err)
	}
	stranger, err := peer.NewDaemon2(s.cfg(), keys, "runner_nobody")
	if err != nil {
		return fmt.Errorf("stranger daemon: %w", err)
	}
	good := claimBody("2", runner)
	s.step(ctx, "2 bad signature", func(ctx context.Context) error {
		return raw(ctx, d.Transport, peer.RawRequest{Method: http.MethodPost, Path: d.Path("claim"), Header: d.SignHeaders("claim", []byte("{}")), Body: good})
	})
	s.step(ctx, "2 unknown runner", func(ctx context.Context) error {
		return drop(stranger.Do(ctx, "claim", claimBody("2", "runner_nobody")))
	})
	s.step(ctx, "2 bad JSON", func(ctx context.Context) error { return drop(d.Do(ctx, "claim", []byte(`{"protocolVersion":"2",`))) })
	s.step(ctx, "2 unknown endpoint", func(ctx context.Context) error {
		return drop(d.Do(ctx, "no-such-endpoint", []byte(`{"protocolVersion":"2"}`)))
	})
	s.step(ctx, "2 body too large", func(ctx context.Context) error {
		return drop(d.Do(ctx, "claim", bytes.Repeat([]byte(" "), bodyLimit+1)))
	})
	late := f.stub(s, "wd2-late")
	late.DeadlineAt = time.Now().Add(-time.Minute).UnixMilli()
	s.step(ctx, "2 site too late", func(ctx context.Context) error { return ignoreRefusal(drop(f.site.Enqueue(ctx, late))) })
	s.step(ctx, "2 site bad JSON", func(ctx context.Context) error {
		return drop(f.site.Do(ctx, http.MethodPost, "enqueue", []byte(`{"stub":`)))
	})
	return nil
}
