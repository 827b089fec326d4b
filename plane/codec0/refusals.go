package codec0

import (
	"fmt"
	"net/http"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// storeError is the answer to an error from store operation op: the wire
// refusal a store refusal maps to, or else a store failure.
func storeError(op store.Op, err error) error { return codec.StoreError(op, err, wireRefusal) }

// wireRefusal is the one table from a store refusal to protocol "0"'s
// answer: the reference's lease-scoped refusals (RB-A7.2) with relayd's 403
// "unauthorized" pairs (RB-G1) and finished-job refusal (RB-G9), the site
// plane's (RB-A11.3, RB-A12.2), and relayd's stale-seal refusals (P2-D11). A code
// it does not know is no refusal of this protocol's, and answers as a
// failure; an admission's rate charge is answered by codec.StoreError.
func wireRefusal(op store.Op, r *store.Refusal) codec.Refusal {
	switch r.Code {
	case store.RefusedNotFound:
		return protocol.Refuse(protocol.CodeNotFound, protocol.MsgUnknownJob)
	case store.RefusedNotHolder:
		return protocol.RefuseWith(http.StatusForbidden, protocol.CodeUnauthorized, protocol.MsgNotHolder)
	case store.RefusedStaleLease:
		return protocol.RefuseWith(http.StatusForbidden, protocol.CodeUnauthorized, protocol.MsgStaleLease)
	case store.RefusedNotReady:
		return protocol.Refuse(protocol.CodeNotReady, protocol.MsgNotSealed)
	case store.RefusedFinished:
		return protocol.Refuse(protocol.CodeTooLate, protocol.MsgAlreadyFinished)
	case store.RefusedTooLate:
		return protocol.Refuse(protocol.CodeTooLate, fmt.Sprintf("job is %s, not awaiting payload", r.Was))
	case store.RefusedIDTaken:
		return protocol.Refuse(protocol.CodeForbidden, protocol.MsgIDTaken)
	case store.RefusedUnknownRunner:
		// An admission's presence check (identify, owed): the runner is not
		// paired as the projection has it, as authenticate would refuse.
		return protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgRunnerNotKnown)
	case store.RefusedOtherDevice:
		// The one code whose answer depends on the call. A payload sealed
		// for an earlier holder gets the status and code of a late seal,
		// which sites already handle; a result the holder did not seal
		// could never be verified by the site, so it is a bad request.
		if op == store.OpPayload {
			return protocol.Refuse(protocol.CodeTooLate, protocol.MsgSealedForOtherDevice)
		}
		return protocol.Refuse(protocol.CodeBadRequest, protocol.MsgResultFromOtherDevice)
	}
	return nil
}
