package proto2

import (
	"fmt"

	"github.com/byollm/relayd/protocol"
)

// DecodeEnqueueResponse reads the answer to an enqueue.
func DecodeEnqueueResponse(body []byte) (EnqueueResponse, error) {
	return decode(answers, body, "site/enqueue response", func(n node) EnqueueResponse {
		o := n.strict("jobId", "state")
		return EnqueueResponse{JobID: o.key("jobId").nonEmpty(), State: o.key("state").nonEmpty()}
	})
}

// DecodePayloadResponse reads the answer to a seal.
func DecodePayloadResponse(body []byte) (PayloadResponse, error) {
	return decode(answers, body, "site/payload response", func(n node) PayloadResponse {
		o := n.strict("jobId", "state")
		return PayloadResponse{JobID: o.key("jobId").nonEmpty(), State: o.key("state").nonEmpty()}
	})
}

// DecodeCancelResponse reads the answer to a cancel.
func DecodeCancelResponse(body []byte) (CancelResponse, error) {
	return decode(answers, body, "site/cancel response", func(n node) CancelResponse {
		return CancelResponse{Cancelled: n.strict("cancelled").key("cancelled").boolean()}
	})
}

// DecodePendingResponse reads the answer to GET /relay/site/pending.
func DecodePendingResponse(body []byte) (PendingResponse, error) {
	return decode(answers, body, "site/pending response", func(n node) PendingResponse {
		return PendingResponse{Jobs: each(n.strict("jobs").key("jobs"), 0, func(n node) PendingJob {
			o := n.strict("jobId", "device", "runnerId", "leaseId", "awaitingUntil", "leaseExpiresAt")
			return PendingJob{
				JobID:          o.key("jobId").nonEmpty(),
				Device:         readIdentity(o.key("device")),
				RunnerID:       o.key("runnerId").nonEmpty(),
				LeaseID:        o.key("leaseId").nonEmpty(),
				AwaitingUntil:  o.key("awaitingUntil").positive(),
				LeaseExpiresAt: o.key("leaseExpiresAt").positive(),
			}
		})}
	})
}

// DecodeResultsResponse reads the answer to GET /relay/site/results.
func DecodeResultsResponse(body []byte) (ResultsResponse, error) {
	return decode(answers, body, "site/results response", func(n node) ResultsResponse {
		return ResultsResponse{Jobs: each(n.strict("jobs").key("jobs"), 0, func(n node) FinishedJob {
			o := n.strict("jobId", "envelope", "disposition", "runnerId", "leaseId", "device", "runnerOwner")
			return FinishedJob{
				JobID:       o.key("jobId").nonEmpty(),
				Envelope:    readEnvelope(o.key("envelope")),
				Disposition: o.key("disposition").oneOf(dispositions...),
				RunnerID:    o.key("runnerId").nonEmpty(),
				LeaseID:     o.key("leaseId").nonEmpty(),
				Device:      readIdentity(o.key("device")),
				RunnerOwner: o.key("runnerOwner").nonEmpty(),
			}
		})}
	})
}

// wireErrorCodes is WireErrorCode: the codes a strict WireError may carry.
// The three enqueue-policy codes are outside it, and so fail this parse
// (the site SDK reads them raw).
var wireErrorCodes = []string{
	string(protocol.CodeBadRequest), string(protocol.CodeUnsupportedProtocolVersion), string(CodeDaemonBelowFloor),
	string(protocol.CodeUnauthorized), string(protocol.CodeForbidden), string(protocol.CodeRevoked),
	string(protocol.CodeNotFound), string(protocol.CodeNotReady), string(protocol.CodeTooLate),
	string(protocol.CodeClockSkew), string(protocol.CodeRateLimited), string(protocol.CodeServerError),
}

// DecodeWireError reads a refusal body as the daemon's strict WireError
// does: a known code, a non-empty message, and each extra only on its own
// code (§3.18). Bodies without a message, such as the unknown-path 404,
// fail it, as they fail the reference's (P2-S5).
func DecodeWireError(body []byte) (ErrorBody, error) {
	return decode(answers, body, "error", func(n node) ErrorBody {
		o := n.strict("error", "message", "supported", "minimum", "floor", "retryAfter", "serverTime", "maxSkewMs")
		e := ErrorBody{
			Error:   protocol.Code(o.key("error").oneOf(wireErrorCodes...)),
			Message: o.key("message").nonEmpty(),
			Minimum: optionalText(o, "minimum"),
			Floor:   optionalText(o, "floor"),
		}
		if o.has("supported") {
			e.Supported = each(o.key("supported"), 0, node.nonEmpty)
		}
		if o.has("retryAfter") {
			e.RetryAfter = o.key("retryAfter").integer(0, maxSafeInteger)
		}
		if o.has("serverTime") {
			e.ServerTime = o.key("serverTime").positive()
		}
		if o.has("maxSkewMs") {
			e.MaxSkewMs = o.key("maxSkewMs").positive()
		}
		checkExtras(o, e.Error)
		return e
	})
}

// checkExtras applies WireError's refinements: clock-skew must carry
// serverTime or maxSkewMs and nothing else may; likewise floor for
// daemon-below-floor, and supported or minimum for the version code.
func checkExtras(o node, code protocol.Code) {
	rules := []struct {
		code protocol.Code
		keys []string
	}{
		{protocol.CodeClockSkew, []string{"serverTime", "maxSkewMs"}},
		{CodeDaemonBelowFloor, []string{"floor"}},
		{protocol.CodeUnsupportedProtocolVersion, []string{"supported", "minimum"}},
	}
	for _, rule := range rules {
		carried := false
		for _, k := range rule.keys {
			carried = carried || o.has(k)
		}
		if carried != (code == rule.code) && !o.failed() {
			o.refuse(fmt.Errorf("%w: %s and %v", protocol.ErrNotAllowed, code, rule.keys))
		}
	}
}
