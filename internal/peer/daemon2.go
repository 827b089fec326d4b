package peer

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// DaemonVersion2 is the daemonVersion a protocol "2" test daemon reports:
// the published daemon's own version, so a relay's floor treats it alike.
const DaemonVersion2 = "0.1.1"

// Daemon2 is a protocol "2" test daemon, doing what the published byollm
// 0.1.1 daemon does: it pairs (by the device-code flow, or by the fixture
// exchange), pins every site the relay names, claims, fetches, seals
// results to the site that published each job, heartbeats its leases and
// releases them. Requests are built from protocol/proto2's wire types and
// every answer is read with its strict decoders, as the published daemon
// parses them. It is safe for concurrent use.
type Daemon2 struct {
	device
	// owner and sites are under device.mu.
	owner string
	sites proto2.Keyed[protocol.PublicIdentity] // pinned, by site key id
}

// NewDaemon2 builds a protocol "2" daemon with keys. runnerID may be empty:
// pairing sets it from the relay's answer. A device the fixture lists may
// also be given its runner id and sites up front (PinSites), since "2"
// lets a listed device call without pairing (§3.3).
func NewDaemon2(cfg Config, keys Keys, runnerID string) (*Daemon2, error) {
	d := &Daemon2{}
	if err := d.init(cfg, keys, runnerID); err != nil {
		return nil, err
	}
	return d, nil
}

// Owner returns the owner the relay paired the device to ("" before).
func (d *Daemon2) Owner() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.owner
}

// Sites returns the pinned sites, keyed by site key id.
func (d *Daemon2) Sites() proto2.Keyed[protocol.PublicIdentity] {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append(proto2.Keyed[protocol.PublicIdentity](nil), d.sites...)
}

// SiteFor returns the pinned identity of the site whose key id a stub
// names.
func (d *Daemon2) SiteFor(keyID string) (protocol.PublicIdentity, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sites.Get(keyID)
}

// PinSites adopts sites as the pinned set, after checking each identity
// and its key id as the published daemon does on approval (§8.1.2): one
// inconsistent entry refuses them all and changes nothing.
func (d *Daemon2) PinSites(sites proto2.Keyed[protocol.PublicIdentity]) error {
	for _, e := range sites {
		if !e.Value.IsConsistent() {
			return fmt.Errorf("site %s: the identity is not consistent", e.Key)
		}
		if id, ok := protocol.KeyIDOf(e.Value.Identity); !ok || id != e.Key {
			return fmt.Errorf("site %s: keyed under another key id than its identity's", e.Key)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sites = append(proto2.Keyed[protocol.PublicIdentity](nil), sites...)
	return nil
}

// SignHeaders returns the x-byollm-runner signature headers for body sent
// to endpoint, issued now.
func (d *Daemon2) SignHeaders(endpoint string, body []byte) http.Header {
	return d.sign(jsonHeader2(), endpoint, body, d.IssuedAt())
}

// jsonHeader2 is the header set of a "2" request: a JSON body, and JSON
// asked for back, as the published daemon sends.
func jsonHeader2() http.Header {
	h := jsonHeader()
	h.Set("Accept", "application/json")
	return h
}

// Do POSTs body, signed, to endpoint and returns the raw response.
func (d *Daemon2) Do(ctx context.Context, endpoint string, body []byte) (RawResponse, error) {
	return d.Raw(ctx, d.request(endpoint, d.SignHeaders(endpoint, body), body))
}

// send2 encodes req as JSON.stringify would, posts it (signed unless it is
// a pairing call) and reads the answer with decode.
func send2[Resp any](ctx context.Context, d *Daemon2, endpoint string, signed bool, req any, decode func([]byte) (Resp, error)) (Resp, error) {
	var resp Resp
	body, err := proto2.Marshal(req)
	if err != nil {
		return resp, fmt.Errorf("%s: encode request: %w", endpoint, err)
	}
	header := jsonHeader2()
	if signed {
		header = d.SignHeaders(endpoint, body)
	}
	err = d.callDecode(ctx, endpoint, d.request(endpoint, header, body),
		func(b []byte) (err error) {
			resp, err = decode(b)
			return err
		})
	return resp, err
}

// signed2 sends a paired daemon's request, built from its runner id.
func signed2[Resp any](ctx context.Context, d *Daemon2, endpoint string, request func(runnerID string) any, decode func([]byte) (Resp, error)) (Resp, error) {
	id, err := d.paired(endpoint)
	if err != nil {
		var zero Resp
		return zero, err
	}
	return send2(ctx, d, endpoint, true, request(id), decode)
}

// PairFixture presents the device for owner with the fixture exchange
// (§5.2), adopts the runner id and pins every site the relay names.
func (d *Daemon2) PairFixture(ctx context.Context, owner string) (proto2.PairFixtureResponse, error) {
	req := proto2.PairFixtureRequest{ProtocolVersion: proto2.Version, Owner: owner, Device: d.keys.Public()}
	resp, err := send2(ctx, d, "pair", false, req, proto2.DecodePairFixtureResponse)
	if err != nil {
		return resp, err
	}
	return resp, d.adopt("pair", resp.RunnerID, owner, resp.Sites)
}

// PairStart begins the device-code flow (§5.3), advertising the daemon's
// kinds as its capabilities.
func (d *Daemon2) PairStart(ctx context.Context, label string) (proto2.PairStartResponse, error) {
	req := proto2.PairStartRequest{
		ProtocolVersion: proto2.Version,
		Action:          proto2.ActionStart,
		Daemon:          proto2.DaemonInfo{Version: DaemonVersion2, Label: label, Platform: proto2.PlatformLinux},
		Device:          d.keys.Public(),
		Capabilities:    Capabilities2(d.kinds),
	}
	return send2(ctx, d, "pair", false, req, proto2.DecodePairStartResponse)
}

// PairPoll polls a device-code pairing once (§5.4). An approved answer is
// adopted: its runner id, its owner and its sites.
func (d *Daemon2) PairPoll(ctx context.Context, deviceCode string) (proto2.PairPollResponse, error) {
	req := proto2.PairPollRequest{ProtocolVersion: proto2.Version, Action: proto2.ActionPoll, DeviceCode: deviceCode}
	resp, err := send2(ctx, d, "pair", false, req, proto2.DecodePairPollResponse)
	if err != nil || resp.Status != proto2.PollApproved {
		return resp, err
	}
	return resp, d.adopt("pair/poll", resp.RunnerID, resp.Owner, *resp.Sites)
}

// PairDeviceCode runs the whole device-code flow as `byollm connect` does:
// start, hand the user code to approve (a person, or a test writing the
// fixture), then poll every interval the relay asked for until approved.
// Retryable failures (no answer, 409, 429, 5xx) are polled through; denied
// and expired end it.
func (d *Daemon2) PairDeviceCode(ctx context.Context, label string, approve func(ctx context.Context, start proto2.PairStartResponse) error) (proto2.PairPollResponse, error) {
	start, err := d.PairStart(ctx, label)
	if err != nil {
		return proto2.PairPollResponse{}, err
	}
	if err := approve(ctx, start); err != nil {
		return proto2.PairPollResponse{}, fmt.Errorf("pair: approve %s: %w", start.UserCode, err)
	}
	// The relay's own interval, as the published daemon polls.
	every := time.Duration(start.PollIntervalMs) * time.Millisecond
	for {
		resp, err := d.PairPoll(ctx, start.DeviceCode)
		switch {
		case err == nil && resp.Status == proto2.PollApproved:
			return resp, nil
		case err == nil && resp.Status != proto2.PollPending:
			return resp, fmt.Errorf("pair: the pairing ended %s", resp.Status)
		case err != nil && !retryable2(err):
			return resp, err
		}
		if err := clock.Sleep(ctx, every); err != nil {
			return resp, fmt.Errorf("pair: %w", err)
		}
	}
}

// retryable2 is the published daemon's retryable kinds (§8.1.6).
func retryable2(err error) bool {
	st := ErrorStatus(err)
	return st == 0 || st == http.StatusConflict || st == http.StatusTooManyRequests || st >= 500
}

// adopt takes a pairing answer: the runner id, the owner and the sites.
func (d *Daemon2) adopt(endpoint, runnerID, owner string, sites proto2.Keyed[protocol.PublicIdentity]) error {
	if err := d.PinSites(sites); err != nil {
		return fmt.Errorf("%s: %w", endpoint, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runnerID, d.owner = runnerID, owner
	return nil
}

// Capabilities2 returns the capabilities a "2" daemon advertises for kinds:
// one plausible local service per kind, offered to the team.
func Capabilities2(kinds []string) []proto2.Capability {
	caps := make([]proto2.Capability, 0, len(kinds))
	for _, k := range kinds {
		caps = append(caps, proto2.Capability{
			Kind: k, Service: "relayd-test", BackendID: "ollama", BackendClass: protocol.BackendClassHTTP,
			Model: "relayd-test", OfferScope: proto2.AudienceTeam,
		})
	}
	return caps
}

// Claim asks for up to maxJobs jobs of the given kinds.
func (d *Daemon2) Claim(ctx context.Context, kinds []string, maxJobs int) (proto2.ClaimResponse, error) {
	return signed2(ctx, d, "claim", func(id string) any {
		return proto2.ClaimRequest{ProtocolVersion: proto2.Version, RunnerID: id, Capabilities: Capabilities2(kinds), Max: maxJobs}
	}, proto2.DecodeClaimResponse)
}

// Fetch asks for the sealed payload of a job held under leaseID.
func (d *Daemon2) Fetch(ctx context.Context, jobID, leaseID string) (protocol.FetchResponse, error) {
	return signed2(ctx, d, "fetch", func(id string) any {
		return proto2.FetchRequest{ProtocolVersion: proto2.Version, RunnerID: id, JobID: jobID, LeaseID: leaseID}
	}, proto2.DecodeFetchResponse)
}

// Result hands in the sealed result of a job with a disposition.
func (d *Daemon2) Result(ctx context.Context, jobID, leaseID string, env protocol.SealedEnvelope, disposition string) (protocol.ResultResponse, error) {
	return signed2(ctx, d, "result", func(id string) any {
		return proto2.ResultRequest{ProtocolVersion: proto2.Version, RunnerID: id, JobID: jobID, LeaseID: leaseID, Envelope: env, Disposition: disposition}
	}, proto2.DecodeResultResponse)
}

// Heartbeat reports the leases the daemon works under, with its kinds as
// capabilities and nothing withheld, and learns its sites and which grants
// are cancelled or lost. The sites it names become the pinned set, as the
// published daemon applies them each tick.
func (d *Daemon2) Heartbeat(ctx context.Context, activeLeases []protocol.LeaseRef) (proto2.HeartbeatResponse, error) {
	if activeLeases == nil {
		activeLeases = []protocol.LeaseRef{}
	}
	resp, err := signed2(ctx, d, "heartbeat", func(id string) any {
		return proto2.HeartbeatRequest{ProtocolVersion: proto2.Version, RunnerID: id, DaemonVersion: DaemonVersion2,
			Capabilities: Capabilities2(d.kinds), Withheld: []proto2.WithheldKind{}, ActiveLeases: activeLeases}
	}, proto2.DecodeHeartbeatResponse)
	if err != nil {
		return resp, err
	}
	return resp, d.PinSites(resp.Sites)
}

// Release gives leases back with a reason.
func (d *Daemon2) Release(ctx context.Context, leases []protocol.LeaseRef, reason string) (protocol.ReleaseResponse, error) {
	if leases == nil {
		leases = []protocol.LeaseRef{}
	}
	return signed2(ctx, d, "release", func(id string) any {
		return proto2.ReleaseRequest{ProtocolVersion: proto2.Version, RunnerID: id, Leases: leases, Reason: reason}
	}, proto2.DecodeReleaseResponse)
}

// Ran2 is what Work did with one protocol "2" job.
type Ran2 struct {
	Job proto2.ClaimedStub
	Worked
}

// Work takes a held "2" job through the same lifecycle as Daemon.Work. The
// payload must come from, and the result is sealed to, the pinned site
// whose key id the stub names; a stub naming no pinned site fails at the
// open step without a fetch.
func (d *Daemon2) Work(ctx context.Context, job proto2.ClaimedStub, run RunFunc, steps Steps) (Ran2, error) {
	w := d.newWork(d, steps, protocol.LeaseRef{JobID: job.ID, LeaseID: job.Lease.ID}, job.DeadlineAt)
	w.site, w.pinned = d.SiteFor(job.Site)
	worked, err := w.run(ctx, run)
	return Ran2{Job: job, Worked: worked}, err
}

// RunOnce claims at most one job of the daemon's kinds and works it. It
// reports false when there was nothing to claim.
func (d *Daemon2) RunOnce(ctx context.Context, run RunFunc) (Ran2, bool, error) {
	claim, err := d.Claim(ctx, d.kinds, 1)
	if err != nil {
		return Ran2{}, false, fmt.Errorf("run: %w", err)
	}
	if len(claim.Jobs) == 0 {
		return Ran2{}, false, nil
	}
	ran, err := d.Work(ctx, claim.Jobs[0], run, Steps{})
	return ran, true, err
}
