package protocol

// Response bodies. Slices are never nil when encoded: the reference emits
// empty arrays, and a strict client refuses null.

// PairResponse answers a successful pair.
type PairResponse struct {
	ProtocolVersion string         `json:"protocolVersion"`
	RunnerID        string         `json:"runnerId"`
	Site            PublicIdentity `json:"site"`
}

// ClaimResponse answers a claim.
type ClaimResponse struct {
	Jobs    []ClaimedStub `json:"jobs"`
	LeaseMs int64         `json:"leaseMs"`
}

// FetchResponse answers a fetch with the stored payload envelope, verbatim.
type FetchResponse struct {
	Envelope SealedEnvelope `json:"envelope"`
}

// ResultResponse answers a result. Duplicate is present only on a replay.
type ResultResponse struct {
	Accepted  bool   `json:"accepted"`
	Duplicate bool   `json:"duplicate,omitempty"`
	State     string `json:"state"`
}

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	Revoked    bool     `json:"revoked"`
	Cancel     []string `json:"cancel"`
	Lost       []string `json:"lost"`
	ServerTime int64    `json:"serverTime"`
}

// ReleaseResponse answers a release with the job ids actually released.
type ReleaseResponse struct {
	Released []string `json:"released"`
}

// EnqueueResponse answers an enqueue with the job's current state.
type EnqueueResponse struct {
	JobID string `json:"jobId"`
	State string `json:"state"`
}

// PayloadResponse answers a successful seal.
type PayloadResponse struct {
	JobID string `json:"jobId"`
	State string `json:"state"`
}

// CancelResponse answers a cancel.
type CancelResponse struct {
	Cancelled bool `json:"cancelled"`
}

// PendingJob is a claimed job waiting for its site to seal the payload.
type PendingJob struct {
	JobID          string         `json:"jobId"`
	Device         PublicIdentity `json:"device"`
	RunnerID       string         `json:"runnerId"`
	LeaseID        string         `json:"leaseId"`
	AwaitingUntil  int64          `json:"awaitingUntil"`
	LeaseExpiresAt int64          `json:"leaseExpiresAt"`
}

// PendingResponse answers GET /relay/site/pending.
type PendingResponse struct {
	Jobs []PendingJob `json:"jobs"`
}

// FinishedJob is a job whose result is waiting for its site.
type FinishedJob struct {
	JobID       string         `json:"jobId"`
	Envelope    SealedEnvelope `json:"envelope"`
	Disposition string         `json:"disposition"`
	RunnerID    string         `json:"runnerId"`
	LeaseID     string         `json:"leaseId"`
	Device      PublicIdentity `json:"device"`
	RunnerOwner string         `json:"runnerOwner"`
}

// ResultsResponse answers GET /relay/site/results.
type ResultsResponse struct {
	Jobs []FinishedJob `json:"jobs"`
}
