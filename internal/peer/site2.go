package peer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// Site2 is a protocol "2" test site, sending what the published
// @byollm/server 0.1.1 cloud lane sends (§8.2): bodies that declare "2",
// reads that carry ?protocolVersion=2, stubs with the private|team
// audiences, answers read with protocol/proto2's strict decoders. It shares
// the "0" Site's keys, signing and sealing. It is safe for concurrent use.
type Site2 struct {
	*Transport
	site *Site
}

// NewSite2 builds a "2" site that signs as siteID with keys.
func NewSite2(cfg Config, keys Keys, siteID string) (*Site2, error) {
	s, err := NewSite(cfg, keys, siteID)
	if err != nil {
		return nil, err
	}
	return &Site2{Transport: s.Transport, site: s}, nil
}

// Keys returns the site's keys.
func (s *Site2) Keys() Keys { return s.site.keys }

// SiteID returns the id the site signs as.
func (s *Site2) SiteID() string { return s.site.siteID }

// Stub returns a stub of this site as the SDK publishes one: its key id in
// the site field, audience team, size small, not streaming, no purpose.
func (s *Site2) Stub(id, kind, owner string, deadlineAt int64) proto2.JobStub {
	return proto2.JobStub{
		ID: id, Kind: kind, Owner: owner, Site: s.site.keys.KeyID(), Audience: proto2.AudienceTeam,
		SizeClass: protocol.SizeClassSmall, DeadlineAt: deadlineAt,
	}
}

// SignHeaders returns the x-byollm-site signature headers for body, signed
// as endpoint ("site/<name>"), issued now.
func (s *Site2) SignHeaders(endpoint string, body []byte) http.Header {
	return s.site.SignHeaders(endpoint, body)
}

// Do sends body to /relay/site/<name>, signed; a GET carries this site's
// id and protocolVersion=2 in its query. The body is sent as given.
func (s *Site2) Do(ctx context.Context, method, name string, body []byte) (RawResponse, error) {
	path := SitePathPrefix + name
	if method == http.MethodGet {
		path += s.query()
	}
	return s.Raw(ctx, RawRequest{Method: method, Path: path, Header: s.SignHeaders("site/"+name, body), Body: body})
}

func (s *Site2) query() string {
	return "?siteId=" + url.QueryEscape(s.site.siteID) + "&protocolVersion=" + proto2.Version
}

// post2 signs and sends a "2" site-plane write and reads the answer.
func post2[Resp any](ctx context.Context, s *Site2, name string, req any, decode func([]byte) (Resp, error)) (Resp, error) {
	var resp Resp
	endpoint := "site/" + name
	body, err := proto2.Marshal(req)
	if err != nil {
		return resp, fmt.Errorf("%s: encode request: %w", endpoint, err)
	}
	err = s.callDecode(ctx, endpoint, RawRequest{Method: http.MethodPost, Path: SitePathPrefix + name, Header: s.SignHeaders(endpoint, body), Body: body},
		func(b []byte) (err error) {
			resp, err = decode(b)
			return err
		})
	return resp, err
}

// get2 signs and sends a "2" site-plane read and reads the answer.
func get2[Resp any](ctx context.Context, s *Site2, name string, decode func([]byte) (Resp, error)) (Resp, error) {
	var resp Resp
	endpoint := "site/" + name
	err := s.callDecode(ctx, endpoint, RawRequest{Method: http.MethodGet, Path: SitePathPrefix + name + s.query(), Header: s.SignHeaders(endpoint, nil)},
		func(b []byte) (err error) {
			resp, err = decode(b)
			return err
		})
	return resp, err
}

// Enqueue publishes a stub, sent as given.
func (s *Site2) Enqueue(ctx context.Context, stub proto2.JobStub) (protocol.EnqueueResponse, error) {
	return post2(ctx, s, "enqueue", proto2.EnqueueRequest{ProtocolVersion: proto2.Version, SiteID: s.SiteID(), Stub: stub}, proto2.DecodeEnqueueResponse)
}

// Payload hands the relay the sealed payload of a claimed job.
func (s *Site2) Payload(ctx context.Context, jobID string, env protocol.SealedEnvelope) (protocol.PayloadResponse, error) {
	return post2(ctx, s, "payload", proto2.PayloadRequest{ProtocolVersion: proto2.Version, SiteID: s.SiteID(), JobID: jobID, Envelope: env}, proto2.DecodePayloadResponse)
}

// Cancel asks the relay to cancel a job.
func (s *Site2) Cancel(ctx context.Context, jobID string) (protocol.CancelResponse, error) {
	return post2(ctx, s, "cancel", proto2.CancelRequest{ProtocolVersion: proto2.Version, SiteID: s.SiteID(), JobID: jobID}, proto2.DecodeCancelResponse)
}

// Pending lists this site's claimed jobs waiting for a payload (of both
// protocols: P2-A6).
func (s *Site2) Pending(ctx context.Context) (protocol.PendingResponse, error) {
	return get2(ctx, s, "pending", proto2.DecodePendingResponse)
}

// Results lists this site's finished jobs and their sealed results.
func (s *Site2) Results(ctx context.Context) (protocol.ResultsResponse, error) {
	return get2(ctx, s, "results", proto2.DecodeResultsResponse)
}

// SealFor seals a payload to the device that claimed a pending job.
func (s *Site2) SealFor(pending protocol.PendingJob, jobID string, deadlineAt int64, plaintext json.RawMessage) (protocol.SealedEnvelope, error) {
	return s.site.SealFor(pending, jobID, deadlineAt, plaintext)
}

// SendPayload seals plaintext for a pending job and hands it over.
func (s *Site2) SendPayload(ctx context.Context, pending protocol.PendingJob, deadlineAt int64, plaintext json.RawMessage) (protocol.PayloadResponse, error) {
	env, err := s.SealFor(pending, pending.JobID, deadlineAt, plaintext)
	if err != nil {
		return protocol.PayloadResponse{}, err
	}
	return s.Payload(ctx, pending.JobID, env)
}

// OpenResult opens a finished job's result, pinning the device the relay
// reports, as the SDK does (§8.2).
func (s *Site2) OpenResult(fin protocol.FinishedJob) (json.RawMessage, error) {
	return s.site.OpenResult(fin)
}

// AwaitPending polls pending until jobID is listed, or ctx ends.
func (s *Site2) AwaitPending(ctx context.Context, jobID string) (protocol.PendingJob, error) {
	return awaitListed(ctx, s.site, "pending", jobID, func(ctx context.Context) ([]protocol.PendingJob, error) {
		resp, err := s.Pending(ctx)
		return resp.Jobs, err
	}, func(j protocol.PendingJob) string { return j.JobID })
}

// AwaitResult polls results until jobID is listed, or ctx ends.
func (s *Site2) AwaitResult(ctx context.Context, jobID string) (protocol.FinishedJob, error) {
	return awaitListed(ctx, s.site, "result", jobID, func(ctx context.Context) ([]protocol.FinishedJob, error) {
		resp, err := s.Results(ctx)
		return resp.Jobs, err
	}, func(j protocol.FinishedJob) string { return j.JobID })
}
