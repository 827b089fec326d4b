package codec2

import (
	"net/http"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// PairingRetryAfterSeconds is the retryAfter of a start refused because
// too many codes are pending (decision P2-D1): codes live ten minutes, so a
// minute later some have usually gone.
const PairingRetryAfterSeconds = 60

// pairingBusy is the reference's at-capacity refusal with the wait that
// relayd, unlike the reference, states in the body and in Retry-After.
func pairingBusy() *proto2.Refusal {
	r := proto2.PairingBusy()
	r.Body.RetryAfter = PairingRetryAfterSeconds
	return r
}

// Relayd's refusals of work for a site whose consent was withdrawn (RD-D12).
// Neither is revoked: the daemon stops for good on that code, and the
// owner may still consent to other sites.
const (
	// MsgConsentWithdrawn: a holder's fetch or result on a job of a site
	// its owner no longer consents to (403 forbidden).
	MsgConsentWithdrawn = "this device's owner no longer consents to the site of this job"
	// MsgHolderWithdrew: a payload sealed to a device whose owner no
	// longer consents to the site (409 too-late).
	MsgHolderWithdrew = "the device that claimed this job no longer serves this site: its owner withdrew consent"
)

// holderWithdrew is the payload refusal of RD-D12.
func holderWithdrew() *proto2.Refusal {
	return &proto2.Refusal{Status: http.StatusConflict, Body: proto2.ErrorBody{Error: protocol.CodeTooLate, Message: MsgHolderWithdrew}}
}

// storeError is the answer to an error from store operation op: the wire
// refusal a store refusal maps to, or else a store failure.
func storeError(op store.Op, err error) error { return codec.StoreError(op, err, wireRefusal) }

// wireRefusal is the one table from a store refusal to protocol "2"'s
// answer (§3.7, §3.12, §3.17): holder refusals are 403 forbidden, a
// finished job is 409 too-late, relayd's stale-seal refusal (P2-D11) is the
// late seal's 409, and its withdrawn-consent refusal (RD-D12) a 403. A code
// it does not know answers as a failure.
func wireRefusal(op store.Op, r *store.Refusal) codec.Refusal {
	switch r.Code {
	case store.RefusedNotFound:
		return proto2.UnknownJob()
	case store.RefusedNotHolder:
		return proto2.NotHolder()
	case store.RefusedStaleLease:
		return proto2.StaleLease()
	case store.RefusedNotReady:
		return proto2.NotSealed()
	case store.RefusedFinished:
		return proto2.AlreadyFinished()
	case store.RefusedTooLate:
		return proto2.NotAwaiting(string(r.Was))
	case store.RefusedAtCapacity:
		return pairingBusy()
	case store.RefusedWithdrawn:
		// A 403 other than revoked: the 0.1.1 daemon gives up the job
		// (its lease lapses) and goes on serving its other sites.
		return &proto2.Refusal{Status: http.StatusForbidden, Body: proto2.ErrorBody{Error: protocol.CodeForbidden, Message: MsgConsentWithdrawn}}
	case store.RefusedIDTaken:
		// Protocol "2" never refuses an enqueue; should a store do so,
		// the reference's answer for a refused stub is the one to give.
		return proto2.StubNotAccepted()
	case store.RefusedOtherDevice:
		// As protocol "0" answers (P2-D11): a payload sealed for an earlier
		// holder is a late seal; a result the holder did not seal could
		// never be verified by the site.
		if op == store.OpPayload {
			return &proto2.Refusal{Status: http.StatusConflict, Body: proto2.ErrorBody{Error: protocol.CodeTooLate, Message: protocol.MsgSealedForOtherDevice}}
		}
		return &proto2.Refusal{Status: http.StatusBadRequest, Body: proto2.ErrorBody{Error: protocol.CodeBadRequest, Message: protocol.MsgResultFromOtherDevice}}
	}
	return nil
}
