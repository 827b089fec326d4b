package protocol

import "net/http"

// Code is a wire error code, the "error" field of a refusal body.
type Code string

// Error codes the relay emits. TooLate is outside the reference's
// WireErrorCode set but is what the reference sends (RB-G2).
const (
	CodeBadRequest                 Code = "bad-request"
	CodeUnauthorized               Code = "unauthorized"
	CodeForbidden                  Code = "forbidden"
	CodeRevoked                    Code = "revoked"
	CodeNotFound                   Code = "not-found"
	CodeNotReady                   Code = "not-ready"
	CodeTooLate                    Code = "too-late"
	CodeClockSkew                  Code = "clock-skew"
	CodeUnsupportedProtocolVersion Code = "unsupported-protocol-version"
	CodeRateLimited                Code = "rate-limited"
	CodeServerError                Code = "server-error"
)

// Status is the HTTP status each code is normally sent with. A few refusals
// deliberately differ (RB-G1: four 403s carry "unauthorized"); those set their
// status explicitly where they are built.
func (c Code) Status() int {
	switch c {
	case CodeBadRequest, CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	case CodeUnauthorized, CodeClockSkew:
		return http.StatusUnauthorized
	case CodeForbidden, CodeRevoked:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeNotReady, CodeTooLate:
		return http.StatusConflict
	case CodeRateLimited:
		return http.StatusTooManyRequests
	default:
		return http.StatusServiceUnavailable
	}
}

// ErrorBody is the JSON body of every refusal. Message is absent only on the
// unknown-path 404; the clock, version and retry fields appear only on the
// refusals that carry them.
type ErrorBody struct {
	Error      Code     `json:"error"`
	Message    string   `json:"message,omitempty"`
	ServerTime int64    `json:"serverTime,omitempty"`
	MaxSkewMs  int64    `json:"maxSkewMs,omitempty"`
	Supported  []string `json:"supported,omitempty"`
	Minimum    string   `json:"minimum,omitempty"`
	// RetryAfter is whole seconds, equal to the Retry-After header.
	RetryAfter int64 `json:"retryAfter,omitempty"`
}

// Refusal is a complete refusal: status and body.
type Refusal struct {
	Status int
	Body   ErrorBody
}

// Error makes a Refusal usable as an error value inside the relay.
func (r *Refusal) Error() string {
	if r.Body.Message == "" {
		return string(r.Body.Error)
	}
	return string(r.Body.Error) + ": " + r.Body.Message
}

// Wire is the refusal as a writer sends it: its status, its JSON body, and
// the whole seconds after which it may be retried (0 for never).
func (r *Refusal) Wire() (status int, body any, retryAfter int64) {
	return r.Status, r.Body, r.Body.RetryAfter
}

// Refuse builds a refusal with the code's usual status.
func Refuse(code Code, message string) *Refusal {
	return &Refusal{Status: code.Status(), Body: ErrorBody{Error: code, Message: message}}
}

// RefuseWith builds a refusal with an explicit status, for the places where
// the reference pairs a code with a status other than its usual one.
func RefuseWith(status int, code Code, message string) *Refusal {
	return &Refusal{Status: status, Body: ErrorBody{Error: code, Message: message}}
}

// Every refusal message the relay sends, byte for byte as the reference
// sends them (relay-behaviour.md RB-A16).
const (
	MsgNotSigned          = "this request is not signed"
	MsgRunnerNotKnown     = "this runner is not recognised"
	MsgSiteNotRegistered  = "this site is not registered"
	MsgClockSkew          = "this request's timestamp is too far from the server's clock; check the machine's time and try again"
	MsgBadSignature       = "signature check failed"
	MsgRevoked            = "routing for this runner has been revoked"
	MsgSchema             = "request failed schema validation"
	MsgNotYourSite        = "that is not your site"
	MsgNotRoutedForYou    = "this relay does not route for you"
	MsgRunnerMismatch     = "runner id does not match the key"
	MsgUnknownJob         = "unknown job"
	MsgNotHolder          = "this runner does not hold the job"
	MsgStaleLease         = "that lease is no longer current"
	MsgNotSealed          = "the site has not sealed this job yet"
	MsgPairSchema         = "pair request failed schema validation"
	MsgInconsistentDevice = "the device identity is not consistent"
	MsgNoConsent          = "no consent record for this user"
	MsgDeviceNotApproved  = "this device has not been approved by its owner"
	MsgDeviceOtherOwner   = "this device belongs to another owner"
	MsgStubWrongSite      = "that stub does not name the site that signed it"
	MsgIDTaken            = "that job id belongs to another site"
	MsgAlreadyFinished    = "this job has already finished"
	MsgUnsupportedVersion = "this relay speaks protocol version 0 only"
	MsgRateLimited        = "too many requests from this caller; wait retryAfter seconds and try again"
	MsgStoreUnavailable   = "the relay's routing store is unavailable; try again"
	// relayd's stale-seal refusals (decision P2-D11): the envelope names a
	// device other than the one holding the job.
	MsgSealedForOtherDevice  = "job is awaiting a payload for another device"
	MsgResultFromOtherDevice = "that result is not sealed by the device that holds the job"
)

// ClockSkew builds the stale-timestamp refusal, which carries the server's
// clock so the caller can correct its own.
func ClockSkew(serverTime int64) *Refusal {
	r := Refuse(CodeClockSkew, MsgClockSkew)
	r.Body.ServerTime = serverTime
	r.Body.MaxSkewMs = MaxClockSkewMs
	return r
}

// NotFoundPath is the unknown-path 404, the one refusal without a message.
func NotFoundPath() *Refusal {
	return &Refusal{Status: http.StatusNotFound, Body: ErrorBody{Error: CodeNotFound}}
}

// UnsupportedVersion is relayd's refusal of a daemon body that names another
// protocol version (design.md §3, RB-G4).
func UnsupportedVersion() *Refusal {
	r := Refuse(CodeUnsupportedProtocolVersion, MsgUnsupportedVersion)
	r.Body.Supported = []string{Version}
	r.Body.Minimum = Version
	return r
}

// RateLimited is relayd's refusal of a caller over its rate (design.md §3,
// RB-G26). retryAfterSeconds is how long the caller must wait; the body's
// retryAfter is whole seconds, as WireError defines it, and at least 1.
func RateLimited(retryAfterSeconds int64) *Refusal {
	r := Refuse(CodeRateLimited, MsgRateLimited)
	r.Body.RetryAfter = max(retryAfterSeconds, 1)
	return r
}

// StoreUnavailable is the answer when the routing store cannot answer:
// retryable after a second, and nothing was half-written, because every
// store operation is atomic.
func StoreUnavailable() *Refusal {
	r := RefuseWith(http.StatusServiceUnavailable, CodeServerError, MsgStoreUnavailable)
	r.Body.RetryAfter = 1
	return r
}
