package proto2

import "github.com/byollm/relayd/protocol"

// Shapes whose bytes "2" did not change (§3.7, §3.8, §3.10-§3.15).
type (
	FetchResponse   = protocol.FetchResponse
	ResultResponse  = protocol.ResultResponse
	ReleaseResponse = protocol.ReleaseResponse
	EnqueueResponse = protocol.EnqueueResponse
	PayloadResponse = protocol.PayloadResponse
	CancelResponse  = protocol.CancelResponse
	PendingJob      = protocol.PendingJob
	PendingResponse = protocol.PendingResponse
	FinishedJob     = protocol.FinishedJob
	ResultsResponse = protocol.ResultsResponse
)

// Response bodies, with their keys in the reference's order so that a
// trace compares byte for byte. Slices meant as arrays are never nil when
// encoded (a strict client refuses null); optional fields are omitted when
// empty, as JSON.stringify drops undefined.

// PairFixtureResponse answers the fixture exchange. Sites is keyed by the
// site key id.
type PairFixtureResponse struct {
	ProtocolVersion    string                `json:"protocolVersion"`
	RunnerID           string                `json:"runnerId"`
	Sites              Keyed[PublicIdentity] `json:"sites"`
	ControlPlanePublic string                `json:"controlPlanePublic,omitempty"`
}

// PairStartResponse answers a device-code start.
type PairStartResponse struct {
	DeviceCode      string `json:"deviceCode"`
	UserCode        string `json:"userCode"`
	VerificationURL string `json:"verificationUrl"`
	ExpiresAt       int64  `json:"expiresAt"`
	PollIntervalMs  int64  `json:"pollIntervalMs"`
}

// PairPollResponse answers a device-code poll. Only an approved answer
// carries more than its status; the relay never sends ownerLabel, but a
// test client may read one. Sites is a pointer so that an approved answer
// with no site still says {} (it is required there) while the other
// answers omit it.
type PairPollResponse struct {
	Status             string                 `json:"status"`
	RunnerID           string                 `json:"runnerId,omitempty"`
	Owner              string                 `json:"owner,omitempty"`
	OwnerLabel         *string                `json:"ownerLabel,omitempty"`
	Sites              *Keyed[PublicIdentity] `json:"sites,omitempty"`
	ControlPlanePublic string                 `json:"controlPlanePublic,omitempty"`
}

// ClaimResponse answers a claim.
type ClaimResponse struct {
	Jobs    []ClaimedStub `json:"jobs"`
	LeaseMs int64         `json:"leaseMs"`
}

// Succession is one key a site's current key succeeds.
type Succession struct {
	Identity  PublicIdentity `json:"identity"`
	Signature string         `json:"signature"`
}

// SiteSuccession is what a heartbeat says about a rotated site key.
type SiteSuccession struct {
	Succeeds      []Succession `json:"succeeds"`
	RetiringUntil int64        `json:"retiringUntil,omitempty"`
}

// HeartbeatResponse answers a heartbeat. Sites, successions and
// awaitingConsent are keyed by site key id; cancel and lost are grants,
// not bare job ids, because ids repeat across sites. Successions and
// UpdateTo are omitted when empty; "0"'s revoked is never sent.
type HeartbeatResponse struct {
	Sites           Keyed[PublicIdentity] `json:"sites"`
	Successions     Keyed[SiteSuccession] `json:"successions,omitempty"`
	UpdateTo        string                `json:"updateTo,omitempty"`
	AwaitingConsent []string              `json:"awaitingConsent"`
	Cancel          []GrantRef            `json:"cancel"`
	Lost            []GrantRef            `json:"lost"`
	ServerTime      int64                 `json:"serverTime"`
}
