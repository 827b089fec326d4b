package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol/strictjson"
)

// jobj is a request body under construction. Values are strings, numbers,
// booleans, nil, nested jobj and []any, or json.RawMessage for number
// literals that encoding/json would rewrite (2.0, 1e1).
type jobj = map[string]any

// deleted marks a field to remove in with.
var deleted = &struct{}{}

// with returns a deep copy of body with the value at path replaced (or
// removed when val is deleted). Path segments are keys, or indexes into
// arrays: "capabilities.0.kind".
func with(body jobj, path string, val any) jobj {
	out := deepCopy(body).(jobj)
	segs := strings.Split(path, ".")
	var cur any = out
	for _, seg := range segs[:len(segs)-1] {
		switch c := cur.(type) {
		case jobj:
			cur = c[seg]
		case []any:
			i, _ := strconv.Atoi(seg)
			cur = c[i]
		}
	}
	last := segs[len(segs)-1]
	switch c := cur.(type) {
	case jobj:
		if val == deleted {
			delete(c, last)
		} else {
			c[last] = val
		}
	case []any:
		i, _ := strconv.Atoi(last)
		c[i] = val
	default:
		panic("with: no container at " + path)
	}
	return out
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case jobj:
		out := make(jobj, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// Valid parts, shared by the bodies below.

const (
	testSiteKeyID   = "BYOLLM-CC6W-TAB6-RGSP-D48J-AH4B-QCJV"
	testDeviceKeyID = "BYOLLM-CSM7-NBFR-CAYQ-EV4F-R65R-X7WE"
	testDeadline    = 1_700_000_000_000
)

func identityBody() jobj {
	return jobj{"identity": "aWQ", "encryption": "ZW5j", "encryptionSig": "c2ln"}
}

func capabilityBody() jobj {
	return jobj{"kind": "llm.chat", "backendId": "ollama", "backendClass": "http", "model": "llama3", "offerScope": "self"}
}

func envelopeBody() jobj {
	return jobj{"ciphertext": "Y2lwaGVy", "recipientKeyId": testSiteKeyID, "senderKeyId": testDeviceKeyID, "direction": "result", "deadlineAt": testDeadline}
}

func stubBody() jobj {
	return jobj{"id": "job-1", "kind": "llm.generate", "owner": "alice", "site": testSiteKeyID, "audience": "self", "sizeClass": "small", "streaming": true, "deadlineAt": testDeadline}
}

func leaseBody() jobj { return jobj{"jobId": "job-1", "leaseId": "lease-1"} }

var (
	wantIdentity   = PublicIdentity{Identity: "aWQ", Encryption: "ZW5j", EncryptionSig: "c2ln"}
	wantCapability = Capability{Kind: KindChat, BackendID: "ollama", BackendClass: BackendClassHTTP, Model: "llama3", OfferScope: OfferScopeSelf}
	wantEnvelope   = SealedEnvelope{Ciphertext: "Y2lwaGVy", RecipientKeyID: testSiteKeyID, SenderKeyID: testDeviceKeyID, Direction: DirectionResult, DeadlineAt: testDeadline}
	wantStub       = JobStub{ID: "job-1", Kind: KindGenerate, Owner: "alice", Site: testSiteKeyID, Audience: AudienceSelf, SizeClass: SizeClassSmall, Streaming: true, DeadlineAt: testDeadline}
	wantLease      = LeaseRef{JobID: "job-1", LeaseID: "lease-1"}
)

// schema describes one decoder for the tests every decoder shares.
type schema struct {
	name   string
	decode func([]byte) (any, error)
	valid  func() jobj
	want   any
}

func erase[T any](f func([]byte) (T, error)) func([]byte) (any, error) {
	return func(b []byte) (any, error) { return f(b) }
}

var schemas = []schema{
	{
		name:   "pair",
		decode: erase(DecodePair),
		valid:  func() jobj { return jobj{"protocolVersion": "0", "owner": "alice", "device": identityBody()} },
		want:   PairRequest{ProtocolVersion: "0", Owner: "alice", Device: wantIdentity},
	},
	{
		name:   "claim",
		decode: erase(DecodeClaim),
		valid: func() jobj {
			return jobj{"protocolVersion": "0", "runnerId": "runner-1", "capabilities": []any{capabilityBody()}, "max": 4}
		},
		want: ClaimRequest{ProtocolVersion: "0", RunnerID: "runner-1", Capabilities: []Capability{wantCapability}, Max: 4},
	},
	{
		name:   "fetch",
		decode: erase(DecodeFetch),
		valid: func() jobj {
			return jobj{"protocolVersion": "0", "runnerId": "runner-1", "jobId": "job-1", "leaseId": "lease-1"}
		},
		want: FetchRequest{ProtocolVersion: "0", RunnerID: "runner-1", JobID: "job-1", LeaseID: "lease-1"},
	},
	{
		name:   "result",
		decode: erase(DecodeResult),
		valid: func() jobj {
			return jobj{"protocolVersion": "0", "runnerId": "runner-1", "jobId": "job-1", "leaseId": "lease-1", "envelope": envelopeBody(), "disposition": "ok"}
		},
		want: ResultRequest{ProtocolVersion: "0", RunnerID: "runner-1", JobID: "job-1", LeaseID: "lease-1", Envelope: wantEnvelope, Disposition: DispositionOK},
	},
	{
		name:   "heartbeat",
		decode: erase(DecodeHeartbeat),
		valid: func() jobj {
			return jobj{"protocolVersion": "0", "runnerId": "runner-1", "daemonVersion": "0.1.0", "capabilities": []any{capabilityBody()}, "activeLeases": []any{leaseBody()}, "paused": false}
		},
		want: HeartbeatRequest{ProtocolVersion: "0", RunnerID: "runner-1", DaemonVersion: "0.1.0", Capabilities: []Capability{wantCapability}, ActiveLeases: []LeaseRef{wantLease}, Paused: false},
	},
	{
		name:   "release",
		decode: erase(DecodeRelease),
		valid: func() jobj {
			return jobj{"protocolVersion": "0", "runnerId": "runner-1", "leases": []any{leaseBody()}, "reason": "shutdown"}
		},
		want: ReleaseRequest{ProtocolVersion: "0", RunnerID: "runner-1", Leases: []LeaseRef{wantLease}, Reason: ReasonShutdown},
	},
	{
		name:   "enqueue",
		decode: erase(DecodeEnqueue),
		valid:  func() jobj { return jobj{"siteId": "site-1", "stub": stubBody()} },
		want:   EnqueueRequest{SiteID: "site-1", Stub: wantStub},
	},
	{
		name:   "payload",
		decode: erase(DecodePayload),
		valid:  func() jobj { return jobj{"siteId": "site-1", "jobId": "job-1", "envelope": envelopeBody()} },
		want:   PayloadRequest{SiteID: "site-1", JobID: "job-1", Envelope: wantEnvelope},
	},
	{
		name:   "cancel",
		decode: erase(DecodeCancel),
		valid:  func() jobj { return jobj{"siteId": "site-1", "jobId": "job-1"} },
		want:   CancelRequest{SiteID: "site-1", JobID: "job-1"},
	},
}

func schemaNamed(name string) schema {
	for _, s := range schemas {
		if s.name == name {
			return s
		}
	}
	panic("no schema " + name)
}

// refusal is one body a decoder must refuse, and the reason it must give.
type refusal struct {
	name string
	body []byte
	want error
}

func checkRefusals(t *testing.T, s schema, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.decode(tc.body)
			require.ErrorIs(t, err, tc.want, "body %s", tc.body)
			var derr *DecodeError
			require.ErrorAs(t, err, &derr)
			require.Zero(t, reflectZero(got), "a refused body decodes to nothing")
		})
	}
}

// reflectZero returns 0 when v is its type's zero value, so a refusal can
// be checked to leak no half-decoded request.
func reflectZero(v any) int {
	switch x := v.(type) {
	case PairRequest:
		return btoi(x != PairRequest{})
	case ClaimRequest:
		return btoi(x.Capabilities != nil || x.ProtocolVersion != "" || x.RunnerID != "" || x.Max != 0)
	case FetchRequest:
		return btoi(x != FetchRequest{})
	case ResultRequest:
		return btoi(x != ResultRequest{})
	case HeartbeatRequest:
		return btoi(x.Capabilities != nil || x.ActiveLeases != nil || x.RunnerID != "")
	case ReleaseRequest:
		return btoi(x.Leases != nil || x.RunnerID != "" || x.Reason != "")
	case EnqueueRequest:
		return btoi(x != EnqueueRequest{})
	case PayloadRequest:
		return btoi(x != PayloadRequest{})
	case CancelRequest:
		return btoi(x != CancelRequest{})
	}
	return 1
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// accept decodes body and returns the request.
func accept(t *testing.T, s schema, body []byte) any {
	t.Helper()
	got, err := s.decode(body)
	require.NoError(t, err, "body %s", body)
	return got
}

// wrongTypeFor returns a value of another JSON type than v.
func wrongTypeFor(v any) any {
	switch v.(type) {
	case string:
		return 1
	case int, float64:
		return "1"
	case bool:
		return "true"
	case []any:
		return jobj{}
	case jobj:
		return []any{}
	}
	panic(fmt.Sprintf("wrongTypeFor %T", v))
}

// TestDecodersShared runs what every schema must do the same way: decode
// the valid body, and refuse malformed JSON, non-objects, unknown and
// missing fields, nulls, wrong types, repeated keys, bad UTF-8, a BOM and
// deep nesting.
func TestDecodersShared(t *testing.T) {
	for _, s := range schemas {
		t.Run(s.name, func(t *testing.T) {
			valid := mustJSON(t, s.valid())
			require.Equal(t, s.want, accept(t, s, valid))
			require.Equal(t, s.want, accept(t, s, []byte(" \r\n\t"+string(valid)+"\n ")), "JSON whitespace around the body is fine")

			cases := []refusal{
				{"empty body", nil, strictjson.ErrEmpty},
				{"invalid JSON", []byte(`{"protocolVersion":`), strictjson.ErrSyntax},
				{"null body", []byte(`null`), ErrWrongType},
				{"array body", []byte(`[]`), ErrWrongType},
				{"string body", []byte(`"x"`), ErrWrongType},
				{"number body", []byte(`1`), ErrWrongType},
				{"empty object", []byte(`{}`), ErrMissingField},
				{"byte order mark", append([]byte("\xEF\xBB\xBF"), valid...), strictjson.ErrBOM},
				{"invalid UTF-8 in a key", []byte("{\"\xff\":1," + string(valid[1:])), strictjson.ErrInvalidUTF8},
				{"invalid UTF-8 in a value", []byte(`{"x":"` + "\xc3\x28" + `",` + string(valid[1:])), strictjson.ErrInvalidUTF8},
				{"trailing data", append(slices.Clone(valid), []byte(` {}`)...), strictjson.ErrTrailingData},
				{"two bodies", append(slices.Clone(valid), valid...), strictjson.ErrTrailingData},
				{"unknown top-level field", mustJSON(t, with(s.valid(), "extra", 1)), ErrUnknownField},
				{"unknown top-level field named like a prototype", mustJSON(t, with(s.valid(), "__proto__", jobj{})), ErrUnknownField},
				{"too deep", []byte(`{"x":` + strings.Repeat("[", strictjson.MaxDepth) + strings.Repeat("]", strictjson.MaxDepth) + "," + string(valid[1:])), strictjson.ErrTooDeep},
			}
			for key, val := range s.valid() {
				cases = append(cases,
					refusal{"missing " + key, mustJSON(t, with(s.valid(), key, deleted)), ErrMissingField},
					refusal{"null " + key, mustJSON(t, with(s.valid(), key, nil)), ErrWrongType},
					refusal{"wrong type " + key, mustJSON(t, with(s.valid(), key, wrongTypeFor(val))), ErrWrongType},
					refusal{"duplicate " + key, []byte(`{"` + key + `":` + string(mustJSON(t, val)) + "," + string(valid[1:])), strictjson.ErrDuplicateKey},
				)
				if _, isString := val.(string); isString {
					cases = append(cases, refusal{"empty " + key, mustJSON(t, with(s.valid(), key, "")), emptyReason(s.name, key)})
				}
			}
			checkRefusals(t, s, cases)
		})
	}
}

// emptyReason is why an empty top-level string is refused: enums and the
// version literal do not allow it, plain strings must be non-empty.
func emptyReason(schemaName, key string) error {
	switch {
	case key == "protocolVersion" && schemaName != "fetch", key == "disposition", key == "reason":
		return ErrNotAllowed
	}
	return ErrEmptyString
}

func TestDecodePair(t *testing.T) {
	s := schemaNamed("pair")
	v := s.valid
	checkRefusals(t, s, []refusal{
		{"protocolVersion 1", mustJSON(t, with(v(), "protocolVersion", "1")), ErrNotAllowed},
		{"protocolVersion number 0", mustJSON(t, with(v(), "protocolVersion", 0)), ErrWrongType},
		{"protocolVersion with a space", mustJSON(t, with(v(), "protocolVersion", "0 ")), ErrNotAllowed},
		{"unknown device field", mustJSON(t, with(v(), "device.name", "laptop")), ErrUnknownField},
		{"device missing identity", mustJSON(t, with(v(), "device.identity", deleted)), ErrMissingField},
		{"device missing encryption", mustJSON(t, with(v(), "device.encryption", deleted)), ErrMissingField},
		{"device missing encryptionSig", mustJSON(t, with(v(), "device.encryptionSig", deleted)), ErrMissingField},
		{"device empty identity", mustJSON(t, with(v(), "device.identity", "")), ErrEmptyString},
		{"device null encryptionSig", mustJSON(t, with(v(), "device.encryptionSig", nil)), ErrWrongType},
		{"device identity as number", mustJSON(t, with(v(), "device.identity", 1)), ErrWrongType},
		{"device duplicate key", []byte(`{"protocolVersion":"0","owner":"alice","device":{"identity":"aWQ","identity":"aWQ","encryption":"ZW5j","encryptionSig":"c2ln"}}`), strictjson.ErrDuplicateKey},
		{"device code pairing shape", []byte(`{"protocolVersion":"0","deviceCode":"x","device":{"identity":"aWQ","encryption":"ZW5j","encryptionSig":"c2ln"}}`), ErrUnknownField},
	})
}

func TestDecodeClaim(t *testing.T) {
	s := schemaNamed("claim")
	v := s.valid

	t.Run("empty capabilities", func(t *testing.T) {
		got := accept(t, s, mustJSON(t, with(v(), "capabilities", []any{}))).(ClaimRequest)
		require.NotNil(t, got.Capabilities)
		require.Empty(t, got.Capabilities)
	})
	t.Run("every kind, backend, class and scope", func(t *testing.T) {
		for field, values := range map[string][]string{
			"kind": kinds, "backendId": backendIDs, "backendClass": backendClasses, "offerScope": offerScopes,
		} {
			for _, val := range values {
				got := accept(t, s, mustJSON(t, with(v(), "capabilities.0."+field, val))).(ClaimRequest)
				require.Len(t, got.Capabilities, 1)
			}
		}
		require.Len(t, backendIDs, 18)
	})
	t.Run("several capabilities keep their order", func(t *testing.T) {
		second := with(capabilityBody(), "backendId", "claude-cli")
		second = with(second, "backendClass", "process")
		got := accept(t, s, mustJSON(t, with(v(), "capabilities", []any{capabilityBody(), second}))).(ClaimRequest)
		require.Equal(t, []Capability{wantCapability, {Kind: KindChat, BackendID: "claude-cli", BackendClass: BackendClassProcess, Model: "llama3", OfferScope: OfferScopeSelf}}, got.Capabilities)
	})
	t.Run("max accepted", func(t *testing.T) {
		for lit, want := range map[string]int{"1": 1, "64": 64, "2.0": 2, "1e1": 10, "1E1": 10, "1e+1": 10, "0.5e1": 5, "100e-2": 1, "64.0": 64, "6.4e1": 64} {
			got := accept(t, s, mustJSON(t, with(v(), "max", raw(lit)))).(ClaimRequest)
			require.Equal(t, want, got.Max, "max %s", lit)
		}
	})

	checkRefusals(t, s, claimRefusals(t, v))

	t.Run("reason names the place", func(t *testing.T) {
		_, err := DecodeClaim(mustJSON(t, with(v(), "capabilities.0.kind", "llm.embed")))
		var derr *DecodeError
		require.ErrorAs(t, err, &derr)
		require.Equal(t, "claim", derr.Schema)
		require.Equal(t, "capabilities[0].kind", derr.Path)
		require.Equal(t, `protocol: decode claim capabilities[0].kind: value not allowed: "llm.embed"`, err.Error())

		_, err = DecodeClaim(mustJSON(t, with(v(), "capabilities.0.extra", 1)))
		require.ErrorAs(t, err, &derr)
		require.Equal(t, "capabilities[0]", derr.Path)
		require.Equal(t, `protocol: decode claim capabilities[0]: unknown field: "extra"`, err.Error())

		_, err = DecodeClaim(mustJSON(t, with(v(), "max", nil)))
		require.Equal(t, "protocol: decode claim max: wrong type: want number, got null", err.Error())
	})
}

// claimRefusals are the claim bodies the schema refuses, each one edit
// away from the valid body v makes: the capabilities, then max.
func claimRefusals(t *testing.T, v func() jobj) []refusal {
	return []refusal{
		{"protocolVersion 2", mustJSON(t, with(v(), "protocolVersion", "2")), ErrNotAllowed},
		{"capabilities null", mustJSON(t, with(v(), "capabilities", nil)), ErrWrongType},
		{"capability null", mustJSON(t, with(v(), "capabilities", []any{nil})), ErrWrongType},
		{"capability as string", mustJSON(t, with(v(), "capabilities", []any{"llm.chat"})), ErrWrongType},
		{"unknown capability field", mustJSON(t, with(v(), "capabilities.0.contextWindow", 8192)), ErrUnknownField},
		{"unknown field in the second capability", mustJSON(t, with(v(), "capabilities", []any{capabilityBody(), with(capabilityBody(), "x", 1)})), ErrUnknownField},
		{"capability duplicate key", []byte(`{"protocolVersion":"0","runnerId":"r","max":1,"capabilities":[{"kind":"llm.chat","kind":"llm.chat","backendId":"ollama","backendClass":"http","model":"m","offerScope":"self"}]}`), strictjson.ErrDuplicateKey},
		{"kind llm.embed", mustJSON(t, with(v(), "capabilities.0.kind", "llm.embed")), ErrNotAllowed},
		{"kind in capitals", mustJSON(t, with(v(), "capabilities.0.kind", "LLM.CHAT")), ErrNotAllowed},
		{"backendId Ollama", mustJSON(t, with(v(), "capabilities.0.backendId", "Ollama")), ErrNotAllowed},
		{"backendId unknown", mustJSON(t, with(v(), "capabilities.0.backendId", "llama.cpp")), ErrNotAllowed},
		{"backendId empty", mustJSON(t, with(v(), "capabilities.0.backendId", "")), ErrNotAllowed},
		{"backendClass HTTP", mustJSON(t, with(v(), "capabilities.0.backendClass", "HTTP")), ErrNotAllowed},
		{"offerScope private", mustJSON(t, with(v(), "capabilities.0.offerScope", "private")), ErrNotAllowed},
		{"model empty", mustJSON(t, with(v(), "capabilities.0.model", "")), ErrEmptyString},
		{"model null", mustJSON(t, with(v(), "capabilities.0.model", nil)), ErrWrongType},
		{"offerScope missing", mustJSON(t, with(v(), "capabilities.0.offerScope", deleted)), ErrMissingField},
		{"max 0", mustJSON(t, with(v(), "max", 0)), ErrOutOfRange},
		{"max 65", mustJSON(t, with(v(), "max", 65)), ErrOutOfRange},
		{"max -1", mustJSON(t, with(v(), "max", -1)), ErrOutOfRange},
		{"max -0", mustJSON(t, with(v(), "max", raw("-0"))), ErrOutOfRange},
		{"max 0.0", mustJSON(t, with(v(), "max", raw("0.0"))), ErrOutOfRange},
		{"max 1.5", mustJSON(t, with(v(), "max", raw("1.5"))), ErrNotInteger},
		{"max 64.5", mustJSON(t, with(v(), "max", raw("64.5"))), ErrNotInteger},
		{"max 1e-1", mustJSON(t, with(v(), "max", raw("1e-1"))), ErrNotInteger},
		{"max 1e400", mustJSON(t, with(v(), "max", raw("1e400"))), ErrNotInteger},
		{"max safe but too big", mustJSON(t, with(v(), "max", raw("9007199254740991"))), ErrOutOfRange},
		{"max unsafe", mustJSON(t, with(v(), "max", raw("9007199254740992"))), ErrNotInteger},
		{"max string", mustJSON(t, with(v(), "max", "1")), ErrWrongType},
		{"max boolean", mustJSON(t, with(v(), "max", true)), ErrWrongType},
		{"max array", mustJSON(t, with(v(), "max", []any{1})), ErrWrongType},
	}
}

func TestDecodeFetch(t *testing.T) {
	s := schemaNamed("fetch")
	v := s.valid

	// RB-G4: fetch alone takes any non-empty protocolVersion.
	for _, pv := range []string{"0", "1", "2", "anything"} {
		got := accept(t, s, mustJSON(t, with(v(), "protocolVersion", pv))).(FetchRequest)
		require.Equal(t, pv, got.ProtocolVersion)
	}
	checkRefusals(t, s, []refusal{
		{"protocolVersion empty", mustJSON(t, with(v(), "protocolVersion", "")), ErrEmptyString},
		{"protocolVersion number", mustJSON(t, with(v(), "protocolVersion", 0)), ErrWrongType},
		{"runnerId empty", mustJSON(t, with(v(), "runnerId", "")), ErrEmptyString},
		{"leaseId empty", mustJSON(t, with(v(), "leaseId", "")), ErrEmptyString},
		{"unknown field", mustJSON(t, with(v(), "envelope", envelopeBody())), ErrUnknownField},
	})
}

// envelopeRefusals are the SealedEnvelope cases, for the two bodies that
// carry one at "envelope".
func envelopeRefusals(t *testing.T, v func() jobj) []refusal {
	return []refusal{
		{"unknown envelope field", mustJSON(t, with(v(), "envelope.nonce", "x")), ErrUnknownField},
		{"envelope null", mustJSON(t, with(v(), "envelope", nil)), ErrWrongType},
		{"envelope as array", mustJSON(t, with(v(), "envelope", []any{})), ErrWrongType},
		{"envelope duplicate key", duplicateIn(t, v(), "envelope", "ciphertext"), strictjson.ErrDuplicateKey},
		{"ciphertext empty", mustJSON(t, with(v(), "envelope.ciphertext", "")), ErrEmptyString},
		{"recipientKeyId missing", mustJSON(t, with(v(), "envelope.recipientKeyId", deleted)), ErrMissingField},
		{"senderKeyId null", mustJSON(t, with(v(), "envelope.senderKeyId", nil)), ErrWrongType},
		{"direction request", mustJSON(t, with(v(), "envelope.direction", "request")), ErrNotAllowed},
		{"direction capitalised", mustJSON(t, with(v(), "envelope.direction", "Payload")), ErrNotAllowed},
		{"deadlineAt 0", mustJSON(t, with(v(), "envelope.deadlineAt", 0)), ErrOutOfRange},
		{"deadlineAt -1", mustJSON(t, with(v(), "envelope.deadlineAt", -1)), ErrOutOfRange},
		{"deadlineAt 1.5", mustJSON(t, with(v(), "envelope.deadlineAt", raw("1.5"))), ErrNotInteger},
		{"deadlineAt unsafe", mustJSON(t, with(v(), "envelope.deadlineAt", raw("9007199254740992"))), ErrNotInteger},
		{"deadlineAt string", mustJSON(t, with(v(), "envelope.deadlineAt", "1700000000000")), ErrWrongType},
		{"deadlineAt missing", mustJSON(t, with(v(), "envelope.deadlineAt", deleted)), ErrMissingField},
	}
}

// duplicateIn writes body with the member key of the object at field
// repeated.
func duplicateIn(t *testing.T, body jobj, field, key string) []byte {
	inner := body[field].(jobj)
	innerJSON := mustJSON(t, inner)
	dup := `{"` + key + `":` + string(mustJSON(t, inner[key])) + "," + string(innerJSON[1:])
	rest := mustJSON(t, with(body, field, deleted))
	return []byte(`{"` + field + `":` + dup + "," + string(rest[1:]))
}

func TestDecodeResult(t *testing.T) {
	s := schemaNamed("result")
	v := s.valid

	for _, d := range dispositions {
		got := accept(t, s, mustJSON(t, with(v(), "disposition", d))).(ResultRequest)
		require.Equal(t, d, got.Disposition)
	}
	for _, d := range directions {
		got := accept(t, s, mustJSON(t, with(v(), "envelope.direction", d))).(ResultRequest)
		require.Equal(t, d, got.Envelope.Direction, "direction is not checked against the leg")
	}
	for lit, want := range map[string]int64{"1": 1, "9007199254740991": 9007199254740991, "1.7e12": 1_700_000_000_000, "1700000000000.0": 1_700_000_000_000} {
		got := accept(t, s, mustJSON(t, with(v(), "envelope.deadlineAt", raw(lit)))).(ResultRequest)
		require.Equal(t, want, got.Envelope.DeadlineAt, "deadlineAt %s", lit)
	}

	cases := []refusal{
		{"disposition cancelled", mustJSON(t, with(v(), "disposition", "cancelled")), ErrNotAllowed},
		{"disposition empty", mustJSON(t, with(v(), "disposition", "")), ErrNotAllowed},
		{"protocolVersion 1", mustJSON(t, with(v(), "protocolVersion", "1")), ErrNotAllowed},
	}
	checkRefusals(t, s, append(cases, envelopeRefusals(t, v)...))

	_, err := DecodeResult(mustJSON(t, with(v(), "envelope.deadlineAt", 0)))
	var derr *DecodeError
	require.ErrorAs(t, err, &derr)
	require.Equal(t, "envelope.deadlineAt", derr.Path)
}

// leaseRefusals are the lease item cases, for heartbeat.activeLeases and
// release.leases.
func leaseRefusals(t *testing.T, v func() jobj, field string) []refusal {
	return []refusal{
		{"lease item null", mustJSON(t, with(v(), field, []any{nil})), ErrWrongType},
		{"lease item as string", mustJSON(t, with(v(), field, []any{"job-1"})), ErrWrongType},
		{"lease list as object", mustJSON(t, with(v(), field, leaseBody())), ErrWrongType},
		{"lease item missing jobId", mustJSON(t, with(v(), field+".0.jobId", deleted)), ErrMissingField},
		{"lease item missing leaseId", mustJSON(t, with(v(), field+".0.leaseId", deleted)), ErrMissingField},
		{"lease item empty jobId", mustJSON(t, with(v(), field+".0.jobId", "")), ErrEmptyString},
		{"lease item empty leaseId", mustJSON(t, with(v(), field+".0.leaseId", "")), ErrEmptyString},
		{"lease item null leaseId", mustJSON(t, with(v(), field+".0.leaseId", nil)), ErrWrongType},
		{"lease item numeric jobId", mustJSON(t, with(v(), field+".0.jobId", 7)), ErrWrongType},
		{"second lease item bad", mustJSON(t, with(v(), field, []any{leaseBody(), jobj{"jobId": "job-2"}})), ErrMissingField},
		{"lease item duplicate key", []byte(strings.Replace(string(mustJSON(t, v())), `{"jobId":"job-1"`, `{"jobId":"job-1","jobId":"job-1"`, 1)), strictjson.ErrDuplicateKey},
		{"lease item duplicate unknown key", []byte(strings.Replace(string(mustJSON(t, v())), `{"jobId":"job-1"`, `{"x":1,"x":1,"jobId":"job-1"`, 1)), strictjson.ErrDuplicateKey},
		{"lease item too deep", []byte(strings.Replace(string(mustJSON(t, v())), `{"jobId":"job-1"`, `{"x":`+strings.Repeat("[", strictjson.MaxDepth)+strings.Repeat("]", strictjson.MaxDepth)+`,"jobId":"job-1"`, 1)), strictjson.ErrTooDeep},
	}
}

func TestDecodeHeartbeat(t *testing.T) {
	s := schemaNamed("heartbeat")
	v := s.valid

	t.Run("lease items drop unknown keys", func(t *testing.T) {
		item := with(leaseBody(), "expiresAt", 123)
		item = with(item, "state", jobj{"nested": []any{1, nil}})
		got := accept(t, s, mustJSON(t, with(v(), "activeLeases", []any{item, jobj{"leaseId": "lease-2", "jobId": "job-2", "jobID": "ignored"}}))).(HeartbeatRequest)
		require.Equal(t, []LeaseRef{wantLease, {JobID: "job-2", LeaseID: "lease-2"}}, got.ActiveLeases)
	})
	t.Run("empty lists", func(t *testing.T) {
		body := with(with(v(), "activeLeases", []any{}), "capabilities", []any{})
		got := accept(t, s, mustJSON(t, body)).(HeartbeatRequest)
		require.NotNil(t, got.ActiveLeases)
		require.Empty(t, got.ActiveLeases)
		require.NotNil(t, got.Capabilities)
		require.Empty(t, got.Capabilities)
	})
	t.Run("paused true", func(t *testing.T) {
		got := accept(t, s, mustJSON(t, with(v(), "paused", true))).(HeartbeatRequest)
		require.True(t, got.Paused)
	})

	cases := []refusal{
		{"protocolVersion 1", mustJSON(t, with(v(), "protocolVersion", "1")), ErrNotAllowed},
		{"paused as string", mustJSON(t, with(v(), "paused", "false")), ErrWrongType},
		{"paused as number", mustJSON(t, with(v(), "paused", 0)), ErrWrongType},
		{"capabilities still validated", mustJSON(t, with(v(), "capabilities.0.kind", "llm.embed")), ErrNotAllowed},
		{"capability strict in heartbeat", mustJSON(t, with(v(), "capabilities.0.extra", true)), ErrUnknownField},
		{"awaitingConsent is a response field", mustJSON(t, with(v(), "awaitingConsent", true)), ErrUnknownField},
	}
	checkRefusals(t, s, append(cases, leaseRefusals(t, v, "activeLeases")...))
}

func TestDecodeRelease(t *testing.T) {
	s := schemaNamed("release")
	v := s.valid

	for _, reason := range releaseReasons {
		got := accept(t, s, mustJSON(t, with(v(), "reason", reason))).(ReleaseRequest)
		require.Equal(t, reason, got.Reason)
	}
	got := accept(t, s, mustJSON(t, with(v(), "leases", []any{with(leaseBody(), "reason", "x")}))).(ReleaseRequest)
	require.Equal(t, []LeaseRef{wantLease}, got.Leases, "lease items drop unknown keys")
	got = accept(t, s, mustJSON(t, with(v(), "leases", []any{}))).(ReleaseRequest)
	require.NotNil(t, got.Leases)

	cases := []refusal{
		{"reason timeout", mustJSON(t, with(v(), "reason", "timeout")), ErrNotAllowed},
		{"reason backend_down", mustJSON(t, with(v(), "reason", "backend_down")), ErrNotAllowed},
		{"protocolVersion empty", mustJSON(t, with(v(), "protocolVersion", "")), ErrNotAllowed},
	}
	checkRefusals(t, s, append(cases, leaseRefusals(t, v, "leases")...))
}

func TestDecodeEnqueue(t *testing.T) {
	s := schemaNamed("enqueue")
	v := s.valid

	for field, values := range map[string][]string{"kind": kinds, "audience": audiences, "sizeClass": sizeClasses} {
		for _, val := range values {
			accept(t, s, mustJSON(t, with(v(), "stub."+field, val)))
		}
	}
	got := accept(t, s, mustJSON(t, with(v(), "stub.streaming", false))).(EnqueueRequest)
	require.False(t, got.Stub.Streaming)
	got = accept(t, s, mustJSON(t, with(v(), "stub.deadlineAt", raw("9007199254740991")))).(EnqueueRequest)
	require.Equal(t, int64(9007199254740991), got.Stub.DeadlineAt)
	got = accept(t, s, mustJSON(t, with(v(), "stub.deadlineAt", 1))).(EnqueueRequest)
	require.Equal(t, int64(1), got.Stub.DeadlineAt, "a past deadline is the store's business")

	cases := []refusal{
		{"stub audienceAllow", mustJSON(t, with(v(), "stub.audienceAllow", []any{"bob"})), ErrUnknownField},
		{"stub payload", mustJSON(t, with(v(), "stub.payload", jobj{"prompt": "hi"})), ErrUnknownField},
		{"stub null", mustJSON(t, with(v(), "stub", nil)), ErrWrongType},
		{"stub duplicate key", duplicateIn(t, v(), "stub", "owner"), strictjson.ErrDuplicateKey},
		{"stub invalid UTF-8", []byte(strings.Replace(string(mustJSON(t, v())), `"id":"job-1"`, "\"id\":\"job-\xff\"", 1)), strictjson.ErrInvalidUTF8},
		{"stub lone surrogate", []byte(strings.Replace(string(mustJSON(t, v())), `"id":"job-1"`, `"id":"job-\ud800"`, 1)), strictjson.ErrSurrogate},
		{"kind llm.embed", mustJSON(t, with(v(), "stub.kind", "llm.embed")), ErrNotAllowed},
		{"audience private", mustJSON(t, with(v(), "stub.audience", "private")), ErrNotAllowed},
		{"sizeClass huge", mustJSON(t, with(v(), "stub.sizeClass", "huge")), ErrNotAllowed},
		{"sizeClass capitalised", mustJSON(t, with(v(), "stub.sizeClass", "Small")), ErrNotAllowed},
		{"streaming as string", mustJSON(t, with(v(), "stub.streaming", "true")), ErrWrongType},
		{"streaming null", mustJSON(t, with(v(), "stub.streaming", nil)), ErrWrongType},
		{"id empty", mustJSON(t, with(v(), "stub.id", "")), ErrEmptyString},
		{"owner missing", mustJSON(t, with(v(), "stub.owner", deleted)), ErrMissingField},
		{"site empty", mustJSON(t, with(v(), "stub.site", "")), ErrEmptyString},
		{"deadlineAt 0", mustJSON(t, with(v(), "stub.deadlineAt", 0)), ErrOutOfRange},
		{"deadlineAt negative", mustJSON(t, with(v(), "stub.deadlineAt", -1700000000000)), ErrOutOfRange},
		{"deadlineAt fractional", mustJSON(t, with(v(), "stub.deadlineAt", raw("1700000000000.5"))), ErrNotInteger},
		{"deadlineAt unsafe", mustJSON(t, with(v(), "stub.deadlineAt", raw("9007199254740992"))), ErrNotInteger},
		{"deadlineAt huge exponent", mustJSON(t, with(v(), "stub.deadlineAt", raw("1e16"))), ErrNotInteger},
	}
	checkRefusals(t, s, cases)

	_, err := DecodeEnqueue(mustJSON(t, with(v(), "stub.audienceAllow", 1)))
	var derr *DecodeError
	require.ErrorAs(t, err, &derr)
	require.Equal(t, "stub", derr.Path)
	require.Equal(t, "site/enqueue", derr.Schema)
}

func TestDecodePayload(t *testing.T) {
	s := schemaNamed("payload")
	v := s.valid
	got := accept(t, s, mustJSON(t, with(v(), "envelope.direction", "payload"))).(PayloadRequest)
	require.Equal(t, DirectionPayload, got.Envelope.Direction)

	cases := []refusal{
		{"jobId empty", mustJSON(t, with(v(), "jobId", "")), ErrEmptyString},
		{"siteId empty", mustJSON(t, with(v(), "siteId", "")), ErrEmptyString},
		{"stub instead of envelope", mustJSON(t, with(v(), "stub", stubBody())), ErrUnknownField},
	}
	checkRefusals(t, s, append(cases, envelopeRefusals(t, v)...))
}

func TestDecodeCancel(t *testing.T) {
	s := schemaNamed("cancel")
	v := s.valid
	checkRefusals(t, s, []refusal{
		{"jobId empty", mustJSON(t, with(v(), "jobId", "")), ErrEmptyString},
		{"reason is not a cancel field", mustJSON(t, with(v(), "reason", "shutdown")), ErrUnknownField},
		{"jobId number", mustJSON(t, with(v(), "jobId", 1)), ErrWrongType},
	})
}

func TestDecodeSiteQuery(t *testing.T) {
	got, err := DecodeSiteQuery("site-1")
	require.NoError(t, err)
	require.Equal(t, SiteQuery{SiteID: "site-1"}, got)

	got, err = DecodeSiteQuery(" ")
	require.NoError(t, err, "a space is non-empty; the plane's siteId comparison refuses it")
	require.Equal(t, " ", got.SiteID)

	for _, tc := range []struct {
		name, siteID string
		want         error
	}{
		{"missing", "", ErrEmptyString},
		{"invalid UTF-8", "site-\xff", strictjson.ErrInvalidUTF8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeSiteQuery(tc.siteID)
			require.ErrorIs(t, err, tc.want)
			var derr *DecodeError
			require.ErrorAs(t, err, &derr)
			require.Equal(t, "siteId", derr.Path)
			require.Zero(t, got)
		})
	}
}

func TestDecodeErrorText(t *testing.T) {
	_, err := DecodeCancel([]byte(`{"siteId":"s","siteId":"s","jobId":"j"}`))
	require.Equal(t, `protocol: decode site/cancel: strictjson: offset 14: duplicate key: "siteId"`, err.Error())

	long := strings.Repeat("k", 1000)
	_, err = DecodeCancel([]byte(`{"siteId":"s","jobId":"j","` + long + `":1}`))
	require.ErrorIs(t, err, ErrUnknownField)
	require.Less(t, len(err.Error()), 120, "a hostile key is cut short in the reason")

	require.NotErrorIs(t, err, errors.New("unknown field"), "sentinels compare by identity")
}

func TestPeekProtocolVersion(t *testing.T) {
	cases := []struct {
		name        string
		body        string
		value       string
		present     bool
		unsupported bool
	}{
		{"version 0", `{"protocolVersion":"0","runnerId":"r"}`, "0", true, false},
		{"version 2", `{"runnerId":"r","protocolVersion":"2"}`, "2", true, true},
		{"empty version", `{"protocolVersion":""}`, "", true, true},
		{"number 0", `{"protocolVersion":0}`, "", true, true},
		{"null", `{"protocolVersion":null}`, "", true, true},
		{"array", `{"protocolVersion":["0"]}`, "", true, true},
		{"padded 0", `{"protocolVersion":" 0"}`, " 0", true, true},
		{"escaped 0", `{"protocolVersion":"\u0030"}`, "0", true, false},
		{"absent", `{"runnerId":"r"}`, "", false, false},
		{"only nested", `{"x":{"protocolVersion":"2"}}`, "", false, false},
		{"empty body", ``, "", false, false},
		{"array body", `[{"protocolVersion":"2"}]`, "", false, false},
		{"string body", `"protocolVersion"`, "", false, false},
		{"malformed", `{"protocolVersion":"2"`, "", false, false},
		{"duplicate key", `{"protocolVersion":"2","protocolVersion":"0"}`, "", false, false},
		{"byte order mark", "\xEF\xBB\xBF{\"protocolVersion\":\"2\"}", "", false, false},
		{"invalid UTF-8 elsewhere", "{\"protocolVersion\":\"2\",\"x\":\"\xff\"}", "", false, false},
		{"other fields invalid", `{"protocolVersion":"2","max":"lots","extra":1}`, "2", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			value, present := PeekProtocolVersion([]byte(tc.body))
			require.Equal(t, tc.value, value)
			require.Equal(t, tc.present, present)
			require.Equal(t, tc.unsupported, HasUnsupportedVersion([]byte(tc.body)))
		})
	}
}

func TestSafeInteger(t *testing.T) {
	for lit, want := range map[string]int64{
		"0": 0, "-0": 0, "1": 1, "2.0": 2, "1e1": 10, "-5": -5,
		"9007199254740991": 9007199254740991, "-9007199254740991": -9007199254740991,
		"9007199254740991.0": 9007199254740991, "1e-400": 0,
		// Rounded to the nearest double before the integer test, as
		// JSON.parse and zod see it (see strictjson's SafeInteger).
		"1.0000000000000001": 1,
	} {
		n, ok := strictjson.Value{Kind: strictjson.Number, Text: lit}.SafeInteger()
		require.True(t, ok, lit)
		require.Equal(t, want, n, lit)
	}
	for _, lit := range []string{"1.5", "0.1", "9007199254740992", "-9007199254740992", "9007199254740993", "1e16", "1e400", "-1e400"} {
		_, ok := strictjson.Value{Kind: strictjson.Number, Text: lit}.SafeInteger()
		require.False(t, ok, lit)
	}
}
