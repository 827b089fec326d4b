package proto2

import (
	"slices"

	"github.com/byollm/relayd/protocol"
)

// Audiences of a job stub, and the offer scopes of a capability: "2" uses
// the same two words for both (§4.8).
const (
	AudiencePrivate = "private"
	AudienceTeam    = "team"
)

// Pairing actions of the device-code flow.
const (
	ActionStart = "start"
	ActionPoll  = "poll"
)

// Platforms a pairing daemon may report.
const (
	PlatformDarwin = "darwin"
	PlatformLinux  = "linux"
	PlatformWin32  = "win32"
)

// Statuses of a device-code poll.
const (
	PollPending  = "pending"
	PollDenied   = "denied"
	PollExpired  = "expired"
	PollApproved = "approved"
)

// The value sets the strict decoders accept. Kinds, size classes,
// directions, dispositions, release reasons and backend classes are the
// words "0" already used.
var (
	kinds          = []string{protocol.KindGenerate, protocol.KindChat}
	audiences      = []string{AudiencePrivate, AudienceTeam}
	sizeClasses    = []string{protocol.SizeClassSmall, protocol.SizeClassMedium, protocol.SizeClassLarge, protocol.SizeClassUnbounded}
	directions     = []string{protocol.DirectionPayload, protocol.DirectionResult}
	dispositions   = []string{protocol.DispositionOK, protocol.DispositionError, protocol.DispositionCanceled}
	releaseReasons = []string{protocol.ReasonShutdown, protocol.ReasonPause, protocol.ReasonRevoked, protocol.ReasonBackendDown, protocol.ReasonRefused}
	backendClasses = []string{protocol.BackendClassHTTP, protocol.BackendClassProcess}
	platforms      = []string{PlatformDarwin, PlatformLinux, PlatformWin32}

	// backendIDs are the 19 backends "2" knows: those of "0" and codex-cli
	// (protocol/backends.ts:261-278).
	backendIDs = append(protocol.BackendIDs(), "codex-cli")
)

// BackendIDs returns the backend ids a Capability may name, in a fresh
// slice the caller may keep or change.
func BackendIDs() []string { return slices.Clone(backendIDs) }
