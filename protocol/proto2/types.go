package proto2

import "github.com/byollm/relayd/protocol"

// Shapes "2" shares with "0" unchanged (§1, "What did not change").
type (
	// PublicIdentity is a device's or site's public keys.
	PublicIdentity = protocol.PublicIdentity
	// SealedEnvelope is ciphertext the relay carries and cannot open.
	SealedEnvelope = protocol.SealedEnvelope
	// GrantRef names one grant of one job: {jobId, leaseId}. Unlike "0",
	// its decoder is strict.
	GrantRef = protocol.LeaseRef
	// Lease is the grant attached to a claimed stub. The Go shape is the
	// one "0" used; "2" parses it strictly (§3.19).
	Lease = protocol.Lease

	// PairFixtureRequest is the fixture exchange of POST <base>/pair
	// (§5.2): "0"'s pair body, whose version is now "2".
	PairFixtureRequest = protocol.PairRequest
	// FetchRequest is the body of POST <base>/fetch (§3.7).
	FetchRequest = protocol.FetchRequest
	// ResultRequest is the body of POST <base>/result (§3.8).
	ResultRequest = protocol.ResultRequest
	// ReleaseRequest is the body of POST <base>/release (§3.10).
	ReleaseRequest = protocol.ReleaseRequest
)

// Capability is one thing a daemon can run. The relay uses only Kind;
// the rest travels so presence can say what a device offers.
type Capability struct {
	Kind         string `json:"kind"`
	Service      string `json:"service"`
	BackendID    string `json:"backendId"`
	BackendClass string `json:"backendClass"`
	Model        string `json:"model"`
	// KnownModels is optional: nil is absent, an empty slice is [] (the
	// schema allows it, and omitzero keeps the two apart).
	KnownModels []string `json:"knownModels,omitzero"`
	OfferScope  string   `json:"offerScope"`
}

// WithheldKind is a kind a daemon does not offer because two or more of
// its services claim it and nobody chose one.
type WithheldKind struct {
	Kind      string     `json:"kind"`
	Claimants []Claimant `json:"claimants"`
}

// Claimant is one service claiming a withheld kind.
type Claimant struct {
	Service string `json:"service"`
	Offer   string `json:"offer"`
}

// JobStub is the routing metadata of a v2 job: "0"'s fields with the
// private|team audience and an optional purpose ("" is absent).
type JobStub struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	Owner      string `json:"owner"`
	Site       string `json:"site"`
	Audience   string `json:"audience"`
	Purpose    string `json:"purpose,omitempty"`
	SizeClass  string `json:"sizeClass"`
	Streaming  bool   `json:"streaming"`
	DeadlineAt int64  `json:"deadlineAt"`
}

// SignedGrant is a control plane's signed admission of one job for one
// device (Amendment J). relayd authors none; the type exists so a claimed
// stub can carry one and a test client can read it.
type SignedGrant struct {
	GrantID   string `json:"grantId"`
	JobID     string `json:"jobId"`
	Site      string `json:"site"`
	User      string `json:"user"`
	Owner     string `json:"owner"`
	Purpose   string `json:"purpose"`
	Kind      string `json:"kind"`
	Service   string `json:"service"`
	IssuedAt  int64  `json:"issuedAt"`
	Signature string `json:"signature"`
}

// ClaimedStub is a stub as handed to the daemon that claimed it, with its
// strict lease and, only when a grant author exists, a grant.
type ClaimedStub struct {
	JobStub
	Lease Lease        `json:"lease"`
	Grant *SignedGrant `json:"grant,omitempty"`
}

// Requests, as the strict decoders in decode.go read them.

// DaemonInfo is what a daemon says about itself when it starts pairing.
type DaemonInfo struct {
	Version  string `json:"version"`
	Label    string `json:"label"`
	Platform string `json:"platform"`
}

// PairStartRequest starts the device-code flow (§5.3).
type PairStartRequest struct {
	ProtocolVersion string         `json:"protocolVersion"`
	Action          string         `json:"action"`
	Daemon          DaemonInfo     `json:"daemon"`
	Device          PublicIdentity `json:"device"`
	Capabilities    []Capability   `json:"capabilities"`
}

// PairPollRequest polls the device-code flow (§5.4).
type PairPollRequest struct {
	ProtocolVersion string `json:"protocolVersion"`
	Action          string `json:"action"`
	DeviceCode      string `json:"deviceCode"`
}

// PairRequest is a decoded pair body: exactly one of its fields is set,
// the first of start, poll and fixture whose schema the body satisfies.
type PairRequest struct {
	Start   *PairStartRequest
	Poll    *PairPollRequest
	Fixture *PairFixtureRequest
}

// ClaimRequest is the body of POST <base>/claim (§3.6).
type ClaimRequest struct {
	ProtocolVersion string       `json:"protocolVersion"`
	RunnerID        string       `json:"runnerId"`
	Capabilities    []Capability `json:"capabilities"`
	Max             int          `json:"max"`
}

// HeartbeatRequest is the body of POST <base>/heartbeat (§3.9). "0"'s
// paused is gone; withheld is optional and decodes to [] when absent.
type HeartbeatRequest struct {
	ProtocolVersion string         `json:"protocolVersion"`
	RunnerID        string         `json:"runnerId"`
	DaemonVersion   string         `json:"daemonVersion"`
	Capabilities    []Capability   `json:"capabilities"`
	Withheld        []WithheldKind `json:"withheld"`
	ActiveLeases    []GrantRef     `json:"activeLeases"`
}

// EnqueueRequest is the body of POST /relay/site/enqueue (§3.11).
type EnqueueRequest struct {
	ProtocolVersion string  `json:"protocolVersion"`
	SiteID          string  `json:"siteId"`
	Stub            JobStub `json:"stub"`
}

// PayloadRequest is the body of POST /relay/site/payload (§3.12).
type PayloadRequest struct {
	ProtocolVersion string         `json:"protocolVersion"`
	SiteID          string         `json:"siteId"`
	JobID           string         `json:"jobId"`
	Envelope        SealedEnvelope `json:"envelope"`
}

// CancelRequest is the body of POST /relay/site/cancel (§3.13).
type CancelRequest struct {
	ProtocolVersion string `json:"protocolVersion"`
	SiteID          string `json:"siteId"`
	JobID           string `json:"jobId"`
}

// SiteQuery is the validated query of GET /relay/site/pending and
// /results; the version lives in the query too, read by the classifier.
type SiteQuery struct {
	SiteID string `json:"siteId"`
}
