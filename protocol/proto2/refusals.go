package proto2

import (
	"net/http"
	"strings"

	"github.com/byollm/relayd/protocol"
)

// Codes "2" adds to "0"'s. DaemonBelowFloor is in WireErrorCode; the three
// enqueue-policy codes are not, and the site SDK reads them raw (§3.11).
const (
	CodeDaemonBelowFloor   protocol.Code = "daemon-below-floor"
	CodePurposeNotDeclared protocol.Code = "purpose-not-declared"
	CodeSlotUnsatisfiable  protocol.Code = "slot-unsatisfiable"
	CodeSlotWaiting        protocol.Code = "slot-waiting"
)

// ErrorBody is the JSON body of a v2 refusal: WireError's fields in the
// reference's order. Each refusal carries only its own extras: clock-skew
// serverTime and maxSkewMs, the version refusal supported and minimum,
// the floor refusal floor, and relayd's retryable refusals retryAfter in
// whole seconds (decision P2-D1).
type ErrorBody struct {
	Error      protocol.Code `json:"error"`
	Message    string        `json:"message,omitempty"`
	ServerTime int64         `json:"serverTime,omitempty"`
	MaxSkewMs  int64         `json:"maxSkewMs,omitempty"`
	Supported  []string      `json:"supported,omitzero"`
	Minimum    string        `json:"minimum,omitempty"`
	Floor      string        `json:"floor,omitempty"`
	RetryAfter int64         `json:"retryAfter,omitempty"`
}

// Refusal is a complete v2 refusal: status and body. It is protocol's
// Refusal with room for floor, which "0" never sends.
type Refusal struct {
	Status int
	Body   ErrorBody
}

// Error makes a Refusal usable as an error value.
func (r *Refusal) Error() string {
	return strings.TrimSuffix(string(r.Body.Error)+": "+r.Body.Message, ": ")
}

// Wire is the refusal as a writer sends it, as protocol.Refusal's Wire is.
func (r *Refusal) Wire() (status int, body any, retryAfter int64) {
	return r.Status, r.Body, r.Body.RetryAfter
}

// FromV0 carries one of relayd's shared refusals (clock-skew, rate-limited,
// store unavailable, body too large, …) into a v2 answer unchanged.
func FromV0(r *protocol.Refusal) *Refusal {
	b := r.Body
	return &Refusal{Status: r.Status, Body: ErrorBody{
		Error: b.Error, Message: b.Message, ServerTime: b.ServerTime, MaxSkewMs: b.MaxSkewMs,
		Supported: b.Supported, Minimum: b.Minimum, RetryAfter: b.RetryAfter,
	}}
}

func refusal(status int, code protocol.Code, message string) *Refusal {
	return &Refusal{Status: status, Body: ErrorBody{Error: code, Message: message}}
}

// Every fixed message of §3.17, byte for byte. Those "0" already sends are
// the same constants; the em dashes are U+2014.
const (
	MsgNotSigned          = protocol.MsgNotSigned
	MsgRunnerNotKnown     = protocol.MsgRunnerNotKnown
	MsgSiteNotRegistered  = protocol.MsgSiteNotRegistered
	MsgClockSkew          = protocol.MsgClockSkew
	MsgBadSignature       = protocol.MsgBadSignature
	MsgRevoked            = protocol.MsgRevoked
	MsgSchema             = protocol.MsgSchema
	MsgNotYourSite        = protocol.MsgNotYourSite
	MsgRunnerMismatch     = protocol.MsgRunnerMismatch
	MsgUnknownJob         = protocol.MsgUnknownJob
	MsgNotHolder          = protocol.MsgNotHolder
	MsgStaleLease         = protocol.MsgStaleLease
	MsgNotSealed          = protocol.MsgNotSealed
	MsgAlreadyFinished    = protocol.MsgAlreadyFinished
	MsgPairSchema         = protocol.MsgPairSchema
	MsgInconsistentDevice = protocol.MsgInconsistentDevice
	MsgNoConsent          = protocol.MsgNoConsent
	MsgDeviceNotApproved  = protocol.MsgDeviceNotApproved
	MsgDeviceOtherOwner   = protocol.MsgDeviceOtherOwner
	MsgStubWrongSite      = protocol.MsgStubWrongSite

	MsgNoVersion         = "this request declared no protocol version. " + upgradeAdvice
	MsgNoDeviceCode      = "this relay does not offer device-code pairing"
	MsgPairingBusy       = "too many pairings are in progress right now — try again in a few minutes"
	MsgCheckFailed       = "we could not check this just now — try again shortly"
	MsgSlotUnsatisfiable = "nobody has chosen what answers this yet"
	MsgSlotWaiting       = "nothing can answer this right now — try again later"
	MsgStubNotAccepted   = "that stub was not accepted"
	MsgEnvelopeCeiling   = "Every plan has the same ceiling."
	UpgradeCommand       = "npm i -g byollm@latest"
	upgradeAdvice        = "Upgrade the daemon: `" + UpgradeCommand + "`."
	newerAdvice          = "This daemon is newer than the server; the server needs upgrading."
)

// NotFoundPath is the unknown-path 404, which has no message (#1). The
// reference sends the same body for /debug when debug is off (#2).
func NotFoundPath() *Refusal {
	return &Refusal{Status: http.StatusNotFound, Body: ErrorBody{Error: protocol.CodeNotFound}}
}

// DebugNoSite is the debug page's 400 when no registered site is named
// (#3), also without a message.
func DebugNoSite() *Refusal {
	return &Refusal{Status: http.StatusBadRequest, Body: ErrorBody{Error: protocol.CodeBadRequest}}
}

// UnsupportedVersion is the handshake's refusal of d (#4, #5) by a relay
// serving supported, lowest first: ["2"] answers as the reference does,
// ["0","2"] as relayd's dual relay (§2.4.1, P2-A10). The advice to upgrade is
// chosen by comparing the declared version, in JavaScript string order,
// with the newest supported one; with "2" alone that is the reference's
// comparison with its minimum.
func UnsupportedVersion(supported []string, d Declaration) *Refusal {
	message := MsgNoVersion
	if d.Kind == Declared {
		advice := newerAdvice
		if jsLess(d.Version, supported[len(supported)-1]) {
			advice = upgradeAdvice
		}
		message = "this server speaks protocol " + strings.Join(supported, ", ") +
			" and the daemon asked for " + d.Version + ". " + advice
	}
	r := refusal(http.StatusBadRequest, protocol.CodeUnsupportedProtocolVersion, message)
	r.Body.Supported = append([]string(nil), supported...)
	r.Body.Minimum = supported[0]
	return r
}

// NotSigned: either plane, no or malformed signature headers (#6).
func NotSigned() *Refusal {
	return refusal(http.StatusUnauthorized, protocol.CodeUnauthorized, MsgNotSigned)
}

// RunnerNotRecognised: the runner is in neither presence nor projection (#7).
func RunnerNotRecognised() *Refusal {
	return refusal(http.StatusUnauthorized, protocol.CodeUnauthorized, MsgRunnerNotKnown)
}

// SiteNotRegistered: the signing site is not in the projection (#8).
func SiteNotRegistered() *Refusal {
	return refusal(http.StatusUnauthorized, protocol.CodeUnauthorized, MsgSiteNotRegistered)
}

// ClockSkew: the signature's timestamp is stale (#9); it carries the
// relay's clock so the caller can correct its own.
func ClockSkew(serverTime int64) *Refusal { return FromV0(protocol.ClockSkew(serverTime)) }

// BadSignature: the signature does not verify (#10).
func BadSignature() *Refusal {
	return refusal(http.StatusUnauthorized, protocol.CodeUnauthorized, MsgBadSignature)
}

// Revoked: the device record says revoked, on every endpoint (#11).
func Revoked() *Refusal { return refusal(http.StatusForbidden, protocol.CodeRevoked, MsgRevoked) }

// SchemaRefusal: a body or query failed its schema, on either plane (#12, #13).
func SchemaRefusal() *Refusal {
	return refusal(http.StatusBadRequest, protocol.CodeBadRequest, MsgSchema)
}

// NotYourSite: the body's or query's siteId is not the signer (#14).
func NotYourSite() *Refusal {
	return refusal(http.StatusForbidden, protocol.CodeForbidden, MsgNotYourSite)
}

// RunnerMismatch: a claim's runnerId is not the caller; 403, where "0"
// said 401 (#15).
func RunnerMismatch() *Refusal {
	return refusal(http.StatusForbidden, protocol.CodeForbidden, MsgRunnerMismatch)
}

// UnknownJob: fetch, result or payload of a job the caller cannot see
// (#16, #36).
func UnknownJob() *Refusal {
	return refusal(http.StatusNotFound, protocol.CodeNotFound, MsgUnknownJob)
}

// NotHolder: another runner's current lease was presented (#17).
func NotHolder() *Refusal {
	return refusal(http.StatusForbidden, protocol.CodeForbidden, MsgNotHolder)
}

// StaleLease: the caller's own job under an old lease (#18).
func StaleLease() *Refusal {
	return refusal(http.StatusForbidden, protocol.CodeForbidden, MsgStaleLease)
}

// NotSealed: fetch before the site sealed the payload (#19).
func NotSealed() *Refusal { return refusal(http.StatusConflict, protocol.CodeNotReady, MsgNotSealed) }

// AlreadyFinished: fetch of a finished job (#20).
func AlreadyFinished() *Refusal {
	return refusal(http.StatusConflict, protocol.CodeTooLate, MsgAlreadyFinished)
}

// BelowFloor: a heartbeat from a daemon older than the floor (#22).
func BelowFloor(daemonVersion, floor string) *Refusal {
	r := refusal(http.StatusUpgradeRequired, CodeDaemonBelowFloor,
		"byollm "+daemonVersion+" is below the supported floor ("+floor+"). Run `"+UpgradeCommand+"`, then `byollm start`.")
	r.Body.Floor = floor
	return r
}

// PairSchemaRefusal: a pair body matched none of the three schemas (#23).
func PairSchemaRefusal() *Refusal {
	return refusal(http.StatusBadRequest, protocol.CodeBadRequest, MsgPairSchema)
}

// InconsistentDevice: the device's encryption key is not signed by its
// identity key (#24).
func InconsistentDevice() *Refusal {
	return refusal(http.StatusBadRequest, protocol.CodeBadRequest, MsgInconsistentDevice)
}

// NoConsent: a fixture pair by an owner with no consent to any site (#25).
func NoConsent() *Refusal { return refusal(http.StatusForbidden, protocol.CodeForbidden, MsgNoConsent) }

// DeviceNotApproved: a fixture pair of a device no one approved; 403
// forbidden, where "0" said unauthorized (#26).
func DeviceNotApproved() *Refusal {
	return refusal(http.StatusForbidden, protocol.CodeForbidden, MsgDeviceNotApproved)
}

// DeviceOtherOwner: a fixture pair of a device approved for someone else (#27).
func DeviceOtherOwner() *Refusal {
	return refusal(http.StatusForbidden, protocol.CodeForbidden, MsgDeviceOtherOwner)
}

// NoDeviceCode: start (or poll) on a relay without a verification URL:
// 501 with the code bad-request, as the reference pairs them (#28, P2-S6).
func NoDeviceCode() *Refusal {
	return refusal(http.StatusNotImplemented, protocol.CodeBadRequest, MsgNoDeviceCode)
}

// PairingBusy: the pending-code store is full (#29); no retryAfter, as in
// the reference (P2-S7).
func PairingBusy() *Refusal {
	return refusal(http.StatusTooManyRequests, protocol.CodeRateLimited, MsgPairingBusy)
}

// StubWrongSite: a stub naming other than the signer's current key id;
// 403 forbidden, where "0" said unauthorized (#30).
func StubWrongSite() *Refusal {
	return refusal(http.StatusForbidden, protocol.CodeForbidden, MsgStubWrongSite)
}

// CheckFailed: the enqueue policy could not answer (#31).
func CheckFailed() *Refusal {
	return refusal(http.StatusServiceUnavailable, protocol.CodeServerError, MsgCheckFailed)
}

// PurposeNotDeclared: the enqueue policy says the site declares no such
// purpose (#32); an absent purpose reads "that purpose".
func PurposeNotDeclared(purpose string) *Refusal {
	if purpose == "" {
		purpose = "that purpose"
	}
	return refusal(http.StatusConflict, CodePurposeNotDeclared, "this site does not declare "+purpose+
		" — declare it on Developer Sites, and the people who have already connected will each map the new slot before it routes")
}

// SlotUnsatisfiable: nobody mapped the slot (#33).
func SlotUnsatisfiable() *Refusal {
	return refusal(http.StatusConflict, CodeSlotUnsatisfiable, MsgSlotUnsatisfiable)
}

// SlotWaiting: the slot may recover with time (#34).
func SlotWaiting() *Refusal {
	return refusal(http.StatusConflict, CodeSlotWaiting, MsgSlotWaiting)
}

// StubNotAccepted: the store refused a stub (#35); dead code in the
// reference, kept for a store that can refuse.
func StubNotAccepted() *Refusal {
	return refusal(http.StatusBadRequest, protocol.CodeBadRequest, MsgStubNotAccepted)
}

// NotAwaiting: a payload for a job not awaiting one (#37). state is the
// job's state, or "" when the store gave none (the reference says "gone").
func NotAwaiting(state string) *Refusal {
	if state == "" {
		state = "gone"
	}
	return refusal(http.StatusConflict, protocol.CodeTooLate, "job is "+state+", not awaiting payload")
}
