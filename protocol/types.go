// Package protocol holds the byollm wire protocol "0" as the relay speaks it:
// the request and response shapes with strict decoding, request signatures,
// key ids, identity checks and the table of error codes and their statuses.
// It is shared by the relay and by the Go test clients.
package protocol

// Version is the only protocol version this relay speaks.
const Version = "0"

// Timing constants of protocol "0".
const (
	// MaxClockSkewMs is the largest accepted distance, either way, between a
	// request's issued-at and the verifier's clock. Exactly this much passes.
	MaxClockSkewMs = 120_000
	// AwaitingPayloadMs is how long a site has to seal a claimed job.
	AwaitingPayloadMs = 10_000
	// DefaultLeaseMs is the default lease length.
	DefaultLeaseMs = 60_000
	// MaxClaim is the largest number of jobs one claim may ask for.
	MaxClaim = 64
)

// Defaults a relay serves with unless configured otherwise.
const (
	// DefaultBasePath is where the daemon plane lives, and where daemons
	// call it.
	DefaultBasePath = "/byollm"
	// DefaultMaxBodyBytes caps a request body; larger ones get 413.
	DefaultMaxBodyBytes = 8 << 20
)

// Job kinds.
const (
	KindGenerate = "llm.generate"
	KindChat     = "llm.chat"
)

// Audiences of a job stub.
const (
	AudienceSelf   = "self"
	AudienceNamed  = "named"
	AudiencePublic = "public"
)

// Envelope directions.
const (
	DirectionPayload = "payload"
	DirectionResult  = "result"
)

// PublicIdentity is a device's or site's public keys: an Ed25519 identity key,
// an X25519 encryption key and the identity key's signature over the latter.
// Keys travel as unpadded base64url.
type PublicIdentity struct {
	Identity      string `json:"identity"`
	Encryption    string `json:"encryption"`
	EncryptionSig string `json:"encryptionSig"`
}

// JobStub is the routing metadata of a job: everything the relay may know.
type JobStub struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Owner    string `json:"owner"`
	Site     string `json:"site"`
	Audience string `json:"audience"`
	// Purpose is protocol "2"'s optional need ("" is absent); protocol "0"
	// never reads or writes it.
	Purpose    string `json:"purpose,omitempty"`
	SizeClass  string `json:"sizeClass"`
	Streaming  bool   `json:"streaming"`
	DeadlineAt int64  `json:"deadlineAt"`
}

// SealedEnvelope is ciphertext sealed to one device or site. The relay stores
// and forwards it and can never open it.
type SealedEnvelope struct {
	Ciphertext     string `json:"ciphertext"`
	RecipientKeyID string `json:"recipientKeyId"`
	SenderKeyID    string `json:"senderKeyId"`
	Direction      string `json:"direction"`
	DeadlineAt     int64  `json:"deadlineAt"`
}

// Capability is one thing a daemon says it can run. The relay uses only Kind.
type Capability struct {
	Kind         string `json:"kind"`
	BackendID    string `json:"backendId"`
	BackendClass string `json:"backendClass"`
	Model        string `json:"model"`
	OfferScope   string `json:"offerScope"`
}

// LeaseRef names one grant of one job.
type LeaseRef struct {
	JobID   string `json:"jobId"`
	LeaseID string `json:"leaseId"`
}

// Lease is the grant attached to a claimed stub.
type Lease struct {
	ID        string `json:"id"`
	RunnerID  string `json:"runnerId"`
	ExpiresAt int64  `json:"expiresAt"`
}

// ClaimedStub is a stub as handed to the daemon that claimed it.
type ClaimedStub struct {
	JobStub
	Lease Lease `json:"lease"`
}

// Requests, as decoded by the strict decoders in decode.go.

// PairRequest is the body of POST <base>/pair (the fixture pairing shape).
type PairRequest struct {
	ProtocolVersion string         `json:"protocolVersion"`
	Owner           string         `json:"owner"`
	Device          PublicIdentity `json:"device"`
}

// ClaimRequest is the body of POST <base>/claim.
type ClaimRequest struct {
	ProtocolVersion string       `json:"protocolVersion"`
	RunnerID        string       `json:"runnerId"`
	Capabilities    []Capability `json:"capabilities"`
	Max             int          `json:"max"`
}

// FetchRequest is the body of POST <base>/fetch.
type FetchRequest struct {
	ProtocolVersion string `json:"protocolVersion"`
	RunnerID        string `json:"runnerId"`
	JobID           string `json:"jobId"`
	LeaseID         string `json:"leaseId"`
}

// Dispositions a daemon may report with a result.
const (
	DispositionOK       = "ok"
	DispositionError    = "error"
	DispositionCanceled = "canceled"
)

// ResultRequest is the body of POST <base>/result.
type ResultRequest struct {
	ProtocolVersion string         `json:"protocolVersion"`
	RunnerID        string         `json:"runnerId"`
	JobID           string         `json:"jobId"`
	LeaseID         string         `json:"leaseId"`
	Envelope        SealedEnvelope `json:"envelope"`
	Disposition     string         `json:"disposition"`
}

// HeartbeatRequest is the body of POST <base>/heartbeat.
type HeartbeatRequest struct {
	ProtocolVersion string       `json:"protocolVersion"`
	RunnerID        string       `json:"runnerId"`
	DaemonVersion   string       `json:"daemonVersion"`
	Capabilities    []Capability `json:"capabilities"`
	ActiveLeases    []LeaseRef   `json:"activeLeases"`
	Paused          bool         `json:"paused"`
}

// Release reasons.
const (
	ReasonShutdown    = "shutdown"
	ReasonPause       = "pause"
	ReasonRevoked     = "revoked"
	ReasonBackendDown = "backend-down"
	ReasonRefused     = "refused"
)

// ReleaseRequest is the body of POST <base>/release.
type ReleaseRequest struct {
	ProtocolVersion string     `json:"protocolVersion"`
	RunnerID        string     `json:"runnerId"`
	Leases          []LeaseRef `json:"leases"`
	Reason          string     `json:"reason"`
}

// EnqueueRequest is the body of POST /relay/site/enqueue.
type EnqueueRequest struct {
	SiteID string  `json:"siteId"`
	Stub   JobStub `json:"stub"`
}

// PayloadRequest is the body of POST /relay/site/payload.
type PayloadRequest struct {
	SiteID   string         `json:"siteId"`
	JobID    string         `json:"jobId"`
	Envelope SealedEnvelope `json:"envelope"`
}

// CancelRequest is the body of POST /relay/site/cancel.
type CancelRequest struct {
	SiteID string `json:"siteId"`
	JobID  string `json:"jobId"`
}

// SiteQuery is the validated query of GET /relay/site/pending and /results.
type SiteQuery struct {
	SiteID string `json:"siteId"`
}

// ForSite names the site a site-plane request says it acts for, which the
// relay checks against the site that signed it.
func (r EnqueueRequest) ForSite() string { return r.SiteID }

// ForSite names the site the request says it acts for.
func (r PayloadRequest) ForSite() string { return r.SiteID }

// ForSite names the site the request says it acts for.
func (r CancelRequest) ForSite() string { return r.SiteID }

// ForSite names the site the query says it acts for.
func (q SiteQuery) ForSite() string { return q.SiteID }
