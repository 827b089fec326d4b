// Package proto2 holds the vocabulary of byollm wire protocol "2" (the npm
// 0.1.1 packages) as relayd speaks it beside protocol "0": the request and
// response bodies with strict decoders, the version classifier that picks a
// codec per request, the catalogue of refusals with their exact messages,
// and the 6 MiB envelope rule (shared/spec/protocol-2.md §2, §3, §10).
//
// What "2" did not change is not repeated here: public identities, sealed
// envelopes, key ids, lease references and request signatures are package
// protocol's types, and bodies are read with protocol/strictjson, so that a
// body that is not valid UTF-8 or repeats a key is refused exactly as it is
// under "0" (design RB-A0.3, RB-A0.4).
//
// Nothing here touches a store, a projection or HTTP: every function is a
// pure reading or writing of bytes, for the relay's v2 codec and for Go test
// clients alike.
package proto2

// Version is the protocol version this package speaks.
const Version = "2"

// Timing and size constants of protocol "2".
const (
	// MaxClaim is the largest number of jobs one claim may ask for.
	MaxClaim = 64
	// DefaultLeaseMs is the reference's lease length.
	DefaultLeaseMs = 60_000
	// MaxEnvelopeBytes is the largest serialised envelope, in UTF-16 code
	// units, that payload and result accept (§3.12.1).
	MaxEnvelopeBytes = 6 << 20
	// MaxSuccessionChain is the longest succession list a heartbeat may
	// carry per site.
	MaxSuccessionChain = 64
	// MaxDaemonLabel is the longest pairing label, in code points.
	MaxDaemonLabel = 120
	// MinDeviceCode is the shortest device code, in code points.
	MinDeviceCode = 20
	// PollIntervalMs is how often the reference tells a pairing daemon to poll.
	PollIntervalMs = 2000
)
