package proto2

import (
	"strings"
	"testing"
)

// Valid bodies of every schema, the seeds the table, golden, fuzz and
// differential tests start from.
const (
	identityJSON   = `{"identity":"aWQ","encryption":"ZW5j","encryptionSig":"c2ln"}`
	capabilityJSON = `{"kind":"llm.chat","service":"echo","backendId":"codex-cli","backendClass":"process","model":"m","knownModels":["gpt-5"],"offerScope":"team"}`
	envelopeJSON   = `{"ciphertext":"AAAA","recipientKeyId":"r","senderKeyId":"s","direction":"payload","deadlineAt":1800086400000}`
	stubJSON       = `{"id":"job-1","kind":"llm.generate","owner":"alice","site":"BYOLLM-SITE","audience":"private","purpose":"summarise","sizeClass":"small","streaming":false,"deadlineAt":1800086400000}`
	withheldJSON   = `{"kind":"llm.chat","claimants":[{"service":"a","offer":"private"},{"service":"b","offer":"team"}]}`
	leaseJSON      = `{"id":"lease-1","runnerId":"runner_alice","expiresAt":1800000060000}`
	grantJSON      = `{"grantId":"g","jobId":"job-1","site":"BYOLLM-SITE","user":"alice","owner":"alice","purpose":"default","kind":"llm.generate","service":"echo","issuedAt":1800000000000,"signature":"c2ln"}`
)

// validRequests maps each request schema to one body it accepts.
var validRequests = map[string]string{
	"pair/start":   `{"protocolVersion":"2","action":"start","daemon":{"version":"0.1.1","label":"laptop","platform":"linux"},"device":` + identityJSON + `,"capabilities":[` + capabilityJSON + `]}`,
	"pair/poll":    `{"protocolVersion":"2","action":"poll","deviceCode":"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"}`,
	"pair":         `{"protocolVersion":"2","owner":"alice","device":` + identityJSON + `}`,
	"claim":        `{"protocolVersion":"2","runnerId":"runner_alice","capabilities":[` + capabilityJSON + `],"max":1}`,
	"fetch":        `{"protocolVersion":"2","runnerId":"runner_alice","jobId":"job-1","leaseId":"lease-1"}`,
	"result":       `{"protocolVersion":"2","runnerId":"runner_alice","jobId":"job-1","leaseId":"lease-1","envelope":` + envelopeJSON + `,"disposition":"ok"}`,
	"heartbeat":    `{"protocolVersion":"2","runnerId":"runner_alice","daemonVersion":"0.1.1","capabilities":[` + capabilityJSON + `],"withheld":[` + withheldJSON + `],"activeLeases":[{"jobId":"job-1","leaseId":"lease-1"}]}`,
	"release":      `{"protocolVersion":"2","runnerId":"runner_alice","leases":[{"jobId":"job-1","leaseId":"lease-1"}],"reason":"refused"}`,
	"site/enqueue": `{"protocolVersion":"2","siteId":"site_main","stub":` + stubJSON + `}`,
	"site/payload": `{"protocolVersion":"2","siteId":"site_main","jobId":"job-1","envelope":` + envelopeJSON + `}`,
	"site/cancel":  `{"protocolVersion":"2","siteId":"site_main","jobId":"job-1"}`,
}

// validResponses maps each response schema to one body it accepts.
var validResponses = map[string]string{
	"pair response":         `{"protocolVersion":"2","runnerId":"runner_alice","sites":{"BYOLLM-SITE":` + identityJSON + `}}`,
	"pair/start response":   `{"deviceCode":"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG","userCode":"ABCD-EFGH","verificationUrl":"https://relay.example/pair","expiresAt":1800000600000,"pollIntervalMs":2000}`,
	"pair/poll response":    `{"status":"approved","runnerId":"runner_alice","owner":"alice","sites":{"BYOLLM-SITE":` + identityJSON + `}}`,
	"claim response":        `{"jobs":[` + strings.TrimSuffix(stubJSON, "}") + `,"lease":` + leaseJSON + `,"grant":` + grantJSON + `}],"leaseMs":60000}`,
	"fetch response":        `{"envelope":` + envelopeJSON + `}`,
	"result response":       `{"accepted":false,"duplicate":true,"state":"done"}`,
	"heartbeat response":    `{"sites":{"BYOLLM-SITE":` + identityJSON + `},"successions":{"BYOLLM-SITE":{"succeeds":[{"identity":` + identityJSON + `,"signature":"c2ln"}],"retiringUntil":1800000000000}},"updateTo":"0.1.2","awaitingConsent":["BYOLLM-OTHER"],"cancel":[{"jobId":"job-1","leaseId":"lease-1"}],"lost":[],"serverTime":1800000000000}`,
	"release response":      `{"released":["job-1"]}`,
	"site/enqueue response": `{"jobId":"job-1","state":"queued"}`,
	"site/payload response": `{"jobId":"job-1","state":"ready"}`,
	"site/cancel response":  `{"cancelled":true}`,
	"site/pending response": `{"jobs":[{"jobId":"job-1","device":` + identityJSON + `,"runnerId":"runner_alice","leaseId":"lease-1","awaitingUntil":1800000010000,"leaseExpiresAt":1800000060000}]}`,
	"site/results response": `{"jobs":[{"jobId":"job-1","envelope":` + envelopeJSON + `,"disposition":"ok","runnerId":"runner_alice","leaseId":"lease-1","device":` + identityJSON + `,"runnerOwner":"alice"}]}`,
	"error":                 `{"error":"unsupported-protocol-version","message":"m","supported":["0","2"],"minimum":"0"}`,
}

// schemaDecoder is one decoder with its output erased, for tables.
type schemaDecoder func([]byte) (any, error)

func erase[T any](f func([]byte) (T, error)) schemaDecoder {
	return func(b []byte) (any, error) { return f(b) }
}

// requestDecoders lists every request decoder of dec by schema name. The
// pair schemas all go through Pair, which tries them in order.
func requestDecoders(dec Decoder) map[string]schemaDecoder {
	pair := erase(dec.Pair)
	return map[string]schemaDecoder{
		"pair/start": pair, "pair/poll": pair, "pair": pair,
		"claim":        erase(dec.Claim),
		"fetch":        erase(dec.Fetch),
		"result":       erase(dec.Result),
		"heartbeat":    erase(dec.Heartbeat),
		"release":      erase(dec.Release),
		"site/enqueue": erase(dec.Enqueue),
		"site/payload": erase(dec.Payload),
		"site/cancel":  erase(dec.Cancel),
	}
}

// responseDecoders lists every response decoder by schema name.
var responseDecoders = map[string]schemaDecoder{
	"pair response":         erase(DecodePairFixtureResponse),
	"pair/start response":   erase(DecodePairStartResponse),
	"pair/poll response":    erase(DecodePairPollResponse),
	"claim response":        erase(DecodeClaimResponse),
	"fetch response":        erase(DecodeFetchResponse),
	"result response":       erase(DecodeResultResponse),
	"heartbeat response":    erase(DecodeHeartbeatResponse),
	"release response":      erase(DecodeReleaseResponse),
	"site/enqueue response": erase(DecodeEnqueueResponse),
	"site/payload response": erase(DecodePayloadResponse),
	"site/cancel response":  erase(DecodeCancelResponse),
	"site/pending response": erase(DecodePendingResponse),
	"site/results response": erase(DecodeResultsResponse),
	"error":                 erase(DecodeWireError),
}

func TestEverySeedIsAccepted(t *testing.T) {
	decoders := requestDecoders(Decoder{})
	for name, body := range validRequests {
		if _, err := decoders[name]([]byte(body)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, body := range validResponses {
		if _, err := responseDecoders[name]([]byte(body)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(decoders) != len(validRequests) || len(responseDecoders) != len(validResponses) {
		t.Fatal("every decoder needs a seed")
	}
}
