package store

// Op names one RoutingStore operation. The name is the one the wire uses
// for the call the operation serves (fetch, result, pair, pending,
// results), and it is the only name: the Valkey script file, the metric
// label and the log label of a store failure are all this string.
type Op string

// The operations, one per RoutingStore method but Close.
const (
	OpNow            Op = "now"
	OpEnqueue        Op = "enqueue"
	OpClaim          Op = "claim"
	OpSettleGrants   Op = "settleGrants"
	OpFetch          Op = "fetch"
	OpResult         Op = "result"
	OpRelease        Op = "release"
	OpPayload        Op = "payload"
	OpCancel         Op = "cancel"
	OpCancelRequests Op = "cancelRequests"
	OpRenew          Op = "renew"
	OpPair           Op = "pair"
	OpTouch          Op = "touch"
	OpHeartbeat      Op = "heartbeat"
	OpSweep          Op = "sweep"
	OpJob            Op = "job"
	OpJobs           Op = "jobs"
	OpJobSummaries   Op = "jobSummaries"
	OpPending        Op = "pending"
	OpResults        Op = "results"
	OpPresence       Op = "presence"
	OpRunners        Op = "runners"
	OpPing           Op = "ping"

	// Pairings.
	OpStartPairing        Op = "startPairing"
	OpPairingByDeviceCode Op = "pairingByDeviceCode"
	OpPairingByUserCode   Op = "pairingByUserCode"
	OpApprovePairing      Op = "approvePairing"
	OpDropPairing         Op = "dropPairing"
)

// Ops lists every RoutingStore operation, in the order RoutingStore
// declares them.
func Ops() []Op {
	return []Op{
		OpNow, OpEnqueue, OpClaim, OpSettleGrants, OpFetch, OpResult, OpRelease, OpPayload, OpCancel, OpCancelRequests,
		OpRenew, OpPair, OpTouch, OpHeartbeat, OpSweep, OpJob, OpJobs, OpJobSummaries, OpPending, OpResults, OpPresence, OpRunners, OpPing,
	}
}

// PairingOps lists every Pairings operation, in the order Pairings declares
// them.
func PairingOps() []Op {
	return []Op{OpStartPairing, OpPairingByDeviceCode, OpPairingByUserCode, OpApprovePairing, OpDropPairing}
}

// String returns the operation's name.
func (o Op) String() string { return string(o) }
