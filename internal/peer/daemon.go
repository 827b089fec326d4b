package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/byollm/relayd/protocol"
)

// DaemonVersion is the daemonVersion a test daemon reports in heartbeats.
const DaemonVersion = "relayd-client/0"

// Daemon is a test daemon: one paired device that claims jobs, fetches and
// opens their payloads, and returns sealed results. It is safe for
// concurrent use.
type Daemon struct {
	device
	site *protocol.PublicIdentity // pinned at pair, under device.mu
}

// NewDaemon builds a daemon with keys. runnerID may be empty: Pair sets it
// from the relay's answer. Set it up front to call endpoints as a runner
// that has not paired (the relay should refuse).
func NewDaemon(cfg Config, keys Keys, runnerID string) (*Daemon, error) {
	d := &Daemon{}
	if err := d.init(cfg, keys, runnerID); err != nil {
		return nil, err
	}
	return d, nil
}

// SiteIdentity returns the pinned site identity, if any.
func (d *Daemon) SiteIdentity() (protocol.PublicIdentity, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.site == nil {
		return protocol.PublicIdentity{}, false
	}
	return *d.site, true
}

// PinSite replaces the pinned site identity. Pair pins the site it is told
// about; tests use this to pin some other key and check that work sealed by
// the real site is then refused.
func (d *Daemon) PinSite(site protocol.PublicIdentity) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.site = &site
}

// SignHeaders returns the x-byollm-runner signature headers for body sent
// to endpoint (the name as signed, e.g. "claim"), issued now.
func (d *Daemon) SignHeaders(endpoint string, body []byte) http.Header {
	return d.SignHeadersAt(endpoint, body, d.IssuedAt())
}

// SignHeadersAt is SignHeaders with an explicit issuedAt.
func (d *Daemon) SignHeadersAt(endpoint string, body []byte, issuedAt int64) http.Header {
	return d.sign(jsonHeader(), endpoint, body, issuedAt)
}

// Do POSTs body, signed, to endpoint and returns the raw response. The body
// is sent as given, so it may be malformed or the wrong shape.
func (d *Daemon) Do(ctx context.Context, endpoint string, body []byte) (RawResponse, error) {
	return d.Raw(ctx, d.request(endpoint, d.SignHeaders(endpoint, body), body))
}

// post signs and sends a daemon request and decodes the answer into out.
func (d *Daemon) post(ctx context.Context, endpoint string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", endpoint, err)
	}
	return d.call(ctx, endpoint, d.request(endpoint, d.SignHeaders(endpoint, body), body), out, true)
}

// Pair presents the device to the relay for owner with the unsigned fixture
// pairing body. On success the daemon adopts the runner id the relay names
// and pins the site identity it returns. A site identity that is not
// consistent, or that differs from one already pinned, is refused and
// nothing changes: a daemon trusts the first site it paired with.
func (d *Daemon) Pair(ctx context.Context, owner string) (protocol.PairResponse, error) {
	body, err := json.Marshal(protocol.PairRequest{
		ProtocolVersion: protocol.Version,
		Owner:           owner,
		Device:          d.keys.Public(),
	})
	if err != nil {
		return protocol.PairResponse{}, fmt.Errorf("pair: encode request: %w", err)
	}
	var resp protocol.PairResponse
	err = d.call(ctx, "pair", d.request("pair", jsonHeader(), body), &resp, true)
	if err != nil {
		return protocol.PairResponse{}, err
	}
	if resp.RunnerID == "" {
		return resp, errors.New("pair: relay named no runner id")
	}
	if !resp.Site.IsConsistent() {
		return resp, errors.New("pair: the site identity the relay returned is not consistent")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.site != nil && *d.site != resp.Site {
		return resp, fmt.Errorf("pair: relay returned site %s, but %s is pinned", keyIDOrText(resp.Site.Identity), keyIDOrText(d.site.Identity))
	}
	site := resp.Site
	d.site = &site
	d.runnerID = resp.RunnerID
	return resp, nil
}

// Capabilities returns the capabilities the daemon advertises for kinds. The
// relay uses only the kind; the rest is a fixed plausible local backend.
func Capabilities(kinds []string) []protocol.Capability {
	caps := make([]protocol.Capability, 0, len(kinds))
	for _, k := range kinds {
		caps = append(caps, protocol.Capability{
			Kind:         k,
			BackendID:    "ollama",
			BackendClass: "http",
			Model:        "relayd-test",
			OfferScope:   protocol.AudiencePublic,
		})
	}
	return caps
}

// Claim asks for up to maxJobs jobs of the given kinds.
func (d *Daemon) Claim(ctx context.Context, kinds []string, maxJobs int) (protocol.ClaimResponse, error) {
	return d.ClaimWith(ctx, Capabilities(kinds), maxJobs)
}

// ClaimWith is Claim with explicit capabilities.
func (d *Daemon) ClaimWith(ctx context.Context, caps []protocol.Capability, maxJobs int) (protocol.ClaimResponse, error) {
	if caps == nil {
		caps = []protocol.Capability{} // the relay's schema wants an array, not null
	}
	return postAsRunner[protocol.ClaimResponse](ctx, d, "claim", func(id string) any {
		return protocol.ClaimRequest{ProtocolVersion: protocol.Version, RunnerID: id, Capabilities: caps, Max: maxJobs}
	})
}

// Fetch asks for the sealed payload of a job the daemon holds under leaseID.
func (d *Daemon) Fetch(ctx context.Context, jobID, leaseID string) (protocol.FetchResponse, error) {
	return postAsRunner[protocol.FetchResponse](ctx, d, "fetch", func(id string) any {
		return protocol.FetchRequest{ProtocolVersion: protocol.Version, RunnerID: id, JobID: jobID, LeaseID: leaseID}
	})
}

// Result hands in the sealed result of a job with a disposition
// (protocol.DispositionOK, …Error or …Canceled).
func (d *Daemon) Result(ctx context.Context, jobID, leaseID string, env protocol.SealedEnvelope, disposition string) (protocol.ResultResponse, error) {
	return postAsRunner[protocol.ResultResponse](ctx, d, "result", func(id string) any {
		return protocol.ResultRequest{ProtocolVersion: protocol.Version, RunnerID: id, JobID: jobID, LeaseID: leaseID,
			Envelope: env, Disposition: disposition}
	})
}

// Heartbeat reports the leases the daemon is working under, advertising the
// daemon's configured kinds, and learns which to cancel and which are lost.
func (d *Daemon) Heartbeat(ctx context.Context, activeLeases []protocol.LeaseRef) (protocol.HeartbeatResponse, error) {
	if activeLeases == nil {
		activeLeases = []protocol.LeaseRef{}
	}
	return postAsRunner[protocol.HeartbeatResponse](ctx, d, "heartbeat", func(id string) any {
		return protocol.HeartbeatRequest{ProtocolVersion: protocol.Version, RunnerID: id, DaemonVersion: DaemonVersion,
			Capabilities: Capabilities(d.kinds), ActiveLeases: activeLeases, Paused: false}
	})
}

// Release gives leases back with a reason (protocol.ReasonShutdown, …).
func (d *Daemon) Release(ctx context.Context, leases []protocol.LeaseRef, reason string) (protocol.ReleaseResponse, error) {
	if leases == nil {
		leases = []protocol.LeaseRef{}
	}
	return postAsRunner[protocol.ReleaseResponse](ctx, d, "release", func(id string) any {
		return protocol.ReleaseRequest{ProtocolVersion: protocol.Version, RunnerID: id, Leases: leases, Reason: reason}
	})
}

// postAsRunner sends a paired daemon's request to endpoint, built by request
// from the runner id, and decodes the answer.
func postAsRunner[Resp any](ctx context.Context, d *Daemon, endpoint string, request func(runnerID string) any) (Resp, error) {
	var resp Resp
	id, err := d.paired(endpoint)
	if err != nil {
		return resp, err
	}
	err = d.post(ctx, endpoint, request(id), &resp)
	return resp, err
}

// keyIDOrText names an identity key by its key id, or as given if it does
// not decode.
func keyIDOrText(identity string) string {
	if id, ok := protocol.KeyIDOf(identity); ok {
		return id
	}
	return identity
}
