package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/protocol"
)

// SitePathPrefix is where the site plane lives. Unlike the daemon plane it
// does not move with the base path.
const SitePathPrefix = "/relay/site/"

// Site is a test site: it publishes stubs, seals payloads to the devices
// that claim them, and collects and opens their results. It is safe for
// concurrent use.
type Site struct {
	*Transport
	sealer       Sealer
	keys         Keys
	siteID       string
	pollInterval time.Duration
}

// NewSite builds a site that signs as siteID with keys.
func NewSite(cfg Config, keys Keys, siteID string) (*Site, error) {
	if siteID == "" {
		return nil, errors.New("new site: site id is empty")
	}
	t, err := NewTransport(cfg)
	if err != nil {
		return nil, err
	}
	s := &Site{Transport: t, keys: keys, siteID: siteID, pollInterval: cfg.PollInterval}
	if s.pollInterval <= 0 {
		s.pollInterval = DefaultPollInterval
	}
	return s, nil
}

// Keys returns the site's keys.
func (s *Site) Keys() Keys { return s.keys }

// SiteID returns the id the site signs as.
func (s *Site) SiteID() string { return s.siteID }

// Stub returns a stub for this site: its key id in the site field, audience
// self, size small, not streaming. Tests change fields as they need.
func (s *Site) Stub(id, kind, owner string, deadlineAt int64) protocol.JobStub {
	return protocol.JobStub{
		ID:         id,
		Kind:       kind,
		Owner:      owner,
		Site:       s.keys.KeyID(),
		Audience:   protocol.AudienceSelf,
		SizeClass:  "small",
		Streaming:  false,
		DeadlineAt: deadlineAt,
	}
}

// SignHeaders returns the x-byollm-site signature headers for body, signed
// as endpoint exactly as given (normally "site/<name>"), issued now.
func (s *Site) SignHeaders(endpoint string, body []byte) http.Header {
	return s.SignHeadersAt(endpoint, body, s.IssuedAt())
}

// SignHeadersAt is SignHeaders with an explicit issuedAt.
func (s *Site) SignHeadersAt(endpoint string, body []byte, issuedAt int64) http.Header {
	h := make(http.Header)
	if len(body) > 0 {
		h.Set("Content-Type", "application/json")
	}
	protocol.SignRequest(h, protocol.HeaderSite, s.keys.identity, endpoint, s.siteID, issuedAt, body)
	return h
}

// Do sends body to /relay/site/<name> with method, signed as "site/<name>",
// and returns the raw response. A GET carries ?siteId=<this site>, as the
// pending and results reads need. The body is sent as given.
func (s *Site) Do(ctx context.Context, method, name string, body []byte) (RawResponse, error) {
	path := SitePathPrefix + name
	if method == http.MethodGet {
		path += "?siteId=" + url.QueryEscape(s.siteID)
	}
	return s.Raw(ctx, RawRequest{
		Method: method,
		Path:   path,
		Header: s.SignHeaders("site/"+name, body),
		Body:   body,
	})
}

// post signs and sends a site-plane write and decodes the answer into out.
func (s *Site) post(ctx context.Context, name string, req, out any) error {
	endpoint := "site/" + name
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", endpoint, err)
	}
	return s.call(ctx, endpoint, RawRequest{
		Method: http.MethodPost,
		Path:   SitePathPrefix + name,
		Header: s.SignHeaders(endpoint, body),
		Body:   body,
	}, out, false)
}

// get signs and sends a site-plane read (signed over the empty body) and
// decodes the answer into out.
func (s *Site) get(ctx context.Context, name string, out any) error {
	endpoint := "site/" + name
	return s.call(ctx, endpoint, RawRequest{
		Method: http.MethodGet,
		Path:   SitePathPrefix + name + "?siteId=" + url.QueryEscape(s.siteID),
		Header: s.SignHeaders(endpoint, nil),
	}, out, false)
}

// Enqueue publishes a stub. It is sent as given: use Stub for a well-formed
// one.
func (s *Site) Enqueue(ctx context.Context, stub protocol.JobStub) (protocol.EnqueueResponse, error) {
	var resp protocol.EnqueueResponse
	err := s.post(ctx, "enqueue", protocol.EnqueueRequest{SiteID: s.siteID, Stub: stub}, &resp)
	return resp, err
}

// Payload hands the relay the sealed payload of a claimed job.
func (s *Site) Payload(ctx context.Context, jobID string, env protocol.SealedEnvelope) (protocol.PayloadResponse, error) {
	var resp protocol.PayloadResponse
	err := s.post(ctx, "payload", protocol.PayloadRequest{SiteID: s.siteID, JobID: jobID, Envelope: env}, &resp)
	return resp, err
}

// Cancel asks the relay to cancel a job.
func (s *Site) Cancel(ctx context.Context, jobID string) (protocol.CancelResponse, error) {
	var resp protocol.CancelResponse
	err := s.post(ctx, "cancel", protocol.CancelRequest{SiteID: s.siteID, JobID: jobID}, &resp)
	return resp, err
}

// Pending lists this site's claimed jobs waiting for a payload.
func (s *Site) Pending(ctx context.Context) (protocol.PendingResponse, error) {
	var resp protocol.PendingResponse
	err := s.get(ctx, "pending", &resp)
	return resp, err
}

// Results lists this site's finished jobs and their sealed results.
func (s *Site) Results(ctx context.Context) (protocol.ResultsResponse, error) {
	var resp protocol.ResultsResponse
	err := s.get(ctx, "results", &resp)
	return resp, err
}

// SealFor seals a payload to the device that claimed a pending job. jobID is
// normally pending.JobID; it is separate so tests can seal under another job
// id and watch the daemon refuse it. deadlineAt is the stub's deadline.
func (s *Site) SealFor(pending protocol.PendingJob, jobID string, deadlineAt int64, plaintext json.RawMessage) (protocol.SealedEnvelope, error) {
	env, err := s.sealer.Seal(s.keys, pending.Device, jobID, protocol.DirectionPayload, deadlineAt, plaintext)
	if err != nil {
		return protocol.SealedEnvelope{}, fmt.Errorf("seal payload for %s on %s: %w", jobID, pending.RunnerID, err)
	}
	return env, nil
}

// SendPayload seals plaintext for a pending job and hands it to the relay.
func (s *Site) SendPayload(ctx context.Context, pending protocol.PendingJob, deadlineAt int64, plaintext json.RawMessage) (protocol.PayloadResponse, error) {
	env, err := s.SealFor(pending, pending.JobID, deadlineAt, plaintext)
	if err != nil {
		return protocol.PayloadResponse{}, err
	}
	return s.Payload(ctx, pending.JobID, env)
}

// OpenResult opens a finished job's result. The sender it pins is the device
// the relay reports as the one that ran the job; a site that must not trust
// the relay for that should call Open with the device key from its own
// records instead.
func (s *Site) OpenResult(fin protocol.FinishedJob) (json.RawMessage, error) {
	if !fin.Device.IsConsistent() {
		return nil, fmt.Errorf("open result of %s: device identity is not consistent", fin.JobID)
	}
	out, err := Open(s.keys, fin.Envelope, Expectation{
		JobID:          fin.JobID,
		Direction:      protocol.DirectionResult,
		SenderIdentity: fin.Device.Identity,
	})
	if err != nil {
		return nil, fmt.Errorf("open result of %s: %w", fin.JobID, err)
	}
	return out, nil
}

// AwaitPending polls pending until jobID is listed, or ctx ends.
func (s *Site) AwaitPending(ctx context.Context, jobID string) (protocol.PendingJob, error) {
	return awaitListed(ctx, s, "pending", jobID, func(ctx context.Context) ([]protocol.PendingJob, error) {
		resp, err := s.Pending(ctx)
		return resp.Jobs, err
	}, func(j protocol.PendingJob) string { return j.JobID })
}

// AwaitResult polls results until jobID is listed, or ctx ends.
func (s *Site) AwaitResult(ctx context.Context, jobID string) (protocol.FinishedJob, error) {
	return awaitListed(ctx, s, "result", jobID, func(ctx context.Context) ([]protocol.FinishedJob, error) {
		resp, err := s.Results(ctx)
		return resp.Jobs, err
	}, func(j protocol.FinishedJob) string { return j.JobID })
}

// awaitListed polls a listing every poll interval until an entry names
// jobID, or ctx ends.
func awaitListed[T any](ctx context.Context, s *Site, what, jobID string, list func(context.Context) ([]T, error), idOf func(T) string) (T, error) {
	var zero T
	for {
		entries, err := list(ctx)
		if err != nil {
			return zero, fmt.Errorf("await %s %s: %w", what, jobID, err)
		}
		for _, e := range entries {
			if idOf(e) == jobID {
				return e, nil
			}
		}
		if err := clock.Sleep(ctx, s.pollInterval); err != nil {
			return zero, fmt.Errorf("await %s %s: %w", what, jobID, err)
		}
	}
}
