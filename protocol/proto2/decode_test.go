package proto2

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/strictjson"
)

// edit is one change to a seed body: old is replaced by new, once, and old
// must be there.
type edit struct{ old, new string }

func apply(t *testing.T, body string, e edit) string {
	t.Helper()
	require.Contains(t, body, e.old)
	return strings.Replace(body, e.old, e.new, 1)
}

// schemaCase is one rule of one schema: the seed with an edit, and the
// refusal it must get (nil: accepted).
type schemaCase struct {
	name   string
	schema string
	edit   edit
	want   error
}

var requestCases = []schemaCase{
	// The version is a literal in every body, fetch included (unlike "0").
	{"claim version 0", "claim", edit{`"protocolVersion":"2"`, `"protocolVersion":"0"`}, protocol.ErrNotAllowed},
	{"claim version number", "claim", edit{`"protocolVersion":"2"`, `"protocolVersion":2`}, protocol.ErrWrongType},
	{"claim no version", "claim", edit{`"protocolVersion":"2",`, ``}, protocol.ErrMissingField},
	{"fetch any version refused", "fetch", edit{`"protocolVersion":"2"`, `"protocolVersion":"x"`}, protocol.ErrNotAllowed},
	// Integers as zod's .int(): 2.0 and 1e1 are integers, bounds 1..64.
	{"claim max 2.0", "claim", edit{`"max":1`, `"max":2.0`}, nil},
	{"claim max 1e1", "claim", edit{`"max":1`, `"max":1e1`}, nil},
	{"claim max 64", "claim", edit{`"max":1`, `"max":64`}, nil},
	{"claim max 65", "claim", edit{`"max":1`, `"max":65`}, protocol.ErrOutOfRange},
	{"claim max 0", "claim", edit{`"max":1`, `"max":0`}, protocol.ErrOutOfRange},
	{"claim max 1.5", "claim", edit{`"max":1`, `"max":1.5`}, protocol.ErrNotInteger},
	{"claim max string", "claim", edit{`"max":1`, `"max":"1"`}, protocol.ErrWrongType},
	{"claim empty runner", "claim", edit{`"runnerId":"runner_alice"`, `"runnerId":""`}, protocol.ErrEmptyString},
	{"claim no capabilities", "claim", edit{`"capabilities":[` + capabilityJSON + `]`, `"capabilities":[]`}, nil},
	{"claim extra key", "claim", edit{`"max":1`, `"max":1,"paused":false`}, protocol.ErrUnknownField},
	// Capability: service required, knownModels optional, 19 backends, new scopes.
	{"capability no service", "claim", edit{`"service":"echo",`, ``}, protocol.ErrMissingField},
	{"capability no knownModels", "claim", edit{`"knownModels":["gpt-5"],`, ``}, nil},
	{"capability empty knownModels", "claim", edit{`"knownModels":["gpt-5"]`, `"knownModels":[]`}, nil},
	{"capability empty known model", "claim", edit{`"knownModels":["gpt-5"]`, `"knownModels":[""]`}, protocol.ErrEmptyString},
	{"capability knownModels null", "claim", edit{`"knownModels":["gpt-5"]`, `"knownModels":null`}, protocol.ErrWrongType},
	{"capability openai-http", "claim", edit{`"codex-cli"`, `"openai-http"`}, nil},
	{"capability unknown backend", "claim", edit{`"codex-cli"`, `"codex"`}, protocol.ErrNotAllowed},
	{"capability v0 scope", "claim", edit{`"offerScope":"team"`, `"offerScope":"public"`}, protocol.ErrNotAllowed},
	{"capability extra key", "claim", edit{`"model":"m"`, `"model":"m","cost":"free"`}, protocol.ErrUnknownField},
	// Heartbeat: paused is gone, withheld optional, leases strict.
	{"heartbeat paused", "heartbeat", edit{`"activeLeases"`, `"paused":false,"activeLeases"`}, protocol.ErrUnknownField},
	{"heartbeat no withheld", "heartbeat", edit{`"withheld":[` + withheldJSON + `],`, ``}, nil},
	{"heartbeat one claimant", "heartbeat", edit{`,{"service":"b","offer":"team"}`, ``}, protocol.ErrOutOfRange},
	{"heartbeat claimant extra", "heartbeat", edit{`"offer":"team"}`, `"offer":"team","x":1}`}, protocol.ErrUnknownField},
	{"heartbeat lease extra", "heartbeat", edit{`"leaseId":"lease-1"}`, `"leaseId":"lease-1","expiresAt":1}`}, protocol.ErrUnknownField},
	{"heartbeat empty daemon version", "heartbeat", edit{`"daemonVersion":"0.1.1"`, `"daemonVersion":""`}, protocol.ErrEmptyString},
	// Result: v0's extra fields are gone; disposition enum.
	{"result v0 model", "result", edit{`"disposition":"ok"`, `"disposition":"ok","model":"m"`}, protocol.ErrUnknownField},
	{"result disposition", "result", edit{`"disposition":"ok"`, `"disposition":"cancelled"`}, protocol.ErrNotAllowed},
	{"envelope extra", "result", edit{`"deadlineAt":1800086400000}`, `"deadlineAt":1800086400000,"x":1}`}, protocol.ErrUnknownField},
	{"envelope direction", "result", edit{`"direction":"payload"`, `"direction":"other"`}, protocol.ErrNotAllowed},
	{"envelope deadline 0", "result", edit{`"deadlineAt":1800086400000}`, `"deadlineAt":0}`}, protocol.ErrOutOfRange},
	{"envelope deadline unsafe", "result", edit{`"deadlineAt":1800086400000}`, `"deadlineAt":9007199254740992}`}, protocol.ErrNotInteger},
	// Release: reason required, leases strict.
	{"release no reason", "release", edit{`,"reason":"refused"`, ``}, protocol.ErrMissingField},
	{"release reason", "release", edit{`"reason":"refused"`, `"reason":"done"`}, protocol.ErrNotAllowed},
	{"release retryAfter", "release", edit{`"reason":"refused"`, `"reason":"refused","retryAfter":1`}, protocol.ErrUnknownField},
	// Enqueue: strict stub, new audiences, optional purpose.
	{"stub team", "site/enqueue", edit{`"audience":"private"`, `"audience":"team"`}, nil},
	{"stub v0 audience", "site/enqueue", edit{`"audience":"private"`, `"audience":"self"`}, protocol.ErrNotAllowed},
	{"stub no purpose", "site/enqueue", edit{`"purpose":"summarise",`, ``}, nil},
	{"stub empty purpose", "site/enqueue", edit{`"purpose":"summarise"`, `"purpose":""`}, protocol.ErrEmptyString},
	{"stub payload field", "site/enqueue", edit{`"streaming":false`, `"streaming":false,"payload":{}`}, protocol.ErrUnknownField},
	{"stub audienceAllow", "site/enqueue", edit{`"streaming":false`, `"streaming":false,"audienceAllow":[]`}, protocol.ErrUnknownField},
	{"stub streaming string", "site/enqueue", edit{`"streaming":false`, `"streaming":"false"`}, protocol.ErrWrongType},
	{"enqueue no version", "site/enqueue", edit{`"protocolVersion":"2",`, ``}, protocol.ErrMissingField},
	{"cancel empty job", "site/cancel", edit{`"jobId":"job-1"`, `"jobId":""`}, protocol.ErrEmptyString},
	{"payload siteId number", "site/payload", edit{`"siteId":"site_main"`, `"siteId":1`}, protocol.ErrWrongType},
}

func TestRequestSchemaRules(t *testing.T) {
	decoders := requestDecoders(Decoder{})
	for _, c := range requestCases {
		t.Run(c.name, func(t *testing.T) {
			body := apply(t, validRequests[c.schema], c.edit)
			_, err := decoders[c.schema]([]byte(body))
			requireRefusal(t, err, c.want)
		})
	}
}

func requireRefusal(t *testing.T, err, want error) {
	t.Helper()
	if want == nil {
		require.NoError(t, err)
		return
	}
	require.Error(t, err)
	require.ErrorIs(t, err, want)
	var derr *protocol.DecodeError
	require.ErrorAs(t, err, &derr)
}

func TestPairTriesStartThenPollThenFixture(t *testing.T) {
	dec := Decoder{}
	start, err := dec.Pair([]byte(validRequests["pair/start"]))
	require.NoError(t, err)
	require.NotNil(t, start.Start)
	require.Nil(t, start.Poll)
	require.Nil(t, start.Fixture)
	require.Equal(t, "laptop", start.Start.Daemon.Label)

	poll, err := dec.Pair([]byte(validRequests["pair/poll"]))
	require.NoError(t, err)
	require.NotNil(t, poll.Poll)

	fixture, err := dec.Pair([]byte(validRequests["pair"]))
	require.NoError(t, err)
	require.Equal(t, "alice", fixture.Fixture.Owner)

	// A body mixing the shapes matches none (§5.1).
	mixed := `{"protocolVersion":"2","action":"start","owner":"alice","device":` + identityJSON + `}`
	_, err = dec.Pair([]byte(mixed))
	require.ErrorIs(t, err, protocol.ErrUnknownField)
	var derr *protocol.DecodeError
	require.ErrorAs(t, err, &derr)
	require.Equal(t, "pair/start", derr.Schema, "the error is the schema the action names")
}

// Lengths are code points, as the pinned zod 4.6.7 counts them (not
// JavaScript's UTF-16 units): a character outside the BMP counts once.
func TestPairLengthsCountCodePoints(t *testing.T) {
	dec := Decoder{}
	label := func(s string) string {
		return strings.Replace(validRequests["pair/start"], `"label":"laptop"`, `"label":"`+s+`"`, 1)
	}
	for body, want := range map[string]error{
		label(strings.Repeat("a", 120)):       nil,
		label(strings.Repeat("a", 121)):       protocol.ErrOutOfRange,
		label(strings.Repeat("😀", 120)):       nil,
		label(strings.Repeat("😀", 120) + "a"): protocol.ErrOutOfRange,
		label(strings.Repeat("é", 120)):       nil, // 240 bytes, 120 units
		label(""):                             protocol.ErrEmptyString,
	} {
		_, err := dec.Pair([]byte(body))
		requireRefusal(t, err, want)
	}
	code := func(s string) string {
		return strings.Replace(validRequests["pair/poll"], "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", s, 1)
	}
	_, err := dec.Pair([]byte(code(strings.Repeat("x", 20))))
	require.NoError(t, err)
	_, err = dec.Pair([]byte(code(strings.Repeat("😀", 20))))
	require.NoError(t, err)
	_, err = dec.Pair([]byte(code(strings.Repeat("😀", 19))))
	require.Error(t, err, "19 code points, though 38 UTF-16 units")
	_, err = dec.Pair([]byte(code(strings.Repeat("x", 19))))
	require.Error(t, err)
}

// Design RB-A0.3 and RB-A0.4 hold for "2" as for "0": bodies another parser would
// read differently are refused, nested or not.
func TestRB_A03A04_BodiesRelaydWillNotReadAreRefused(t *testing.T) {
	decoders := requestDecoders(Decoder{})
	for name, seed := range validRequests {
		for _, c := range []struct {
			body []byte
			want error
		}{
			{[]byte(strings.Replace(seed, `"protocolVersion":"2"`, `"protocolVersion":"2","protocolVersion":"2"`, 1)), strictjson.ErrDuplicateKey},
			{[]byte(strings.Replace(seed, `"protocolVersion":"2"`, `"protocolVersion":"2","protocol\u0056ersion":"2"`, 1)), strictjson.ErrDuplicateKey},
			{[]byte(strings.Replace(seed, `"2"`, "\"2\xff\"", 1)), strictjson.ErrInvalidUTF8},
			{[]byte(strings.Replace(seed, `"protocolVersion":"2"`, `"protocolVersion":"2\ud800"`, 1)), strictjson.ErrSurrogate},
			{append([]byte("\xef\xbb\xbf"), seed...), strictjson.ErrBOM},
			{[]byte(seed + " x"), strictjson.ErrTrailingData},
			{nil, strictjson.ErrEmpty},
		} {
			_, err := decoders[name](c.body)
			require.ErrorIs(t, err, c.want, "%s: %q", name, c.body)
		}
	}
	nested := strings.Replace(validRequests["site/enqueue"], `"owner":"alice"`, `"owner":"alice","owner":"bob"`, 1)
	_, err := Decoder{}.Enqueue([]byte(nested))
	require.ErrorIs(t, err, strictjson.ErrDuplicateKey)
}

func TestListsAreCapped(t *testing.T) {
	dec := Decoder{Limits: Limits{MaxListItems: 2}}
	leases := func(n int) string {
		items := strings.TrimSuffix(strings.Repeat(`{"jobId":"j","leaseId":"l"},`, n), ",")
		return strings.Replace(validRequests["release"], `[{"jobId":"job-1","leaseId":"lease-1"}]`, "["+items+"]", 1)
	}
	_, err := dec.Release([]byte(leases(2)))
	require.NoError(t, err)
	_, err = dec.Release([]byte(leases(3)))
	require.ErrorIs(t, err, protocol.ErrOverLimit)
	_, err = dec.Release([]byte(leases(1000)))
	require.ErrorIs(t, err, strictjson.ErrTooMany, "a body over the value budget is refused before it is read")
}

func TestDecodeSiteQuery(t *testing.T) {
	for raw, want := range map[string]string{
		"siteId=site_main&protocolVersion=2": "site_main",
		"protocolVersion=2&siteId=a%20b":     "a b",
		"siteId=a+b&siteId=other":            "a b",
		"siteId=a;b":                         "a;b",
		"siteId=%zz":                         "%zz",
	} {
		q, err := DecodeSiteQuery(raw)
		require.NoError(t, err, raw)
		require.Equal(t, want, q.SiteID, raw)
	}
	for raw, want := range map[string]error{
		"protocolVersion=2": protocol.ErrEmptyString,
		"siteId=":           protocol.ErrEmptyString,
		"siteId=%FF":        strictjson.ErrInvalidUTF8,
	} {
		_, err := DecodeSiteQuery(raw)
		require.ErrorIs(t, err, want, raw)
	}
}

func TestDecodedValuesAreTyped(t *testing.T) {
	hb, err := Decoder{}.Heartbeat([]byte(validRequests["heartbeat"]))
	require.NoError(t, err)
	require.Equal(t, HeartbeatRequest{
		ProtocolVersion: "2", RunnerID: "runner_alice", DaemonVersion: "0.1.1",
		Capabilities: []Capability{{Kind: "llm.chat", Service: "echo", BackendID: "codex-cli", BackendClass: "process", Model: "m", KnownModels: []string{"gpt-5"}, OfferScope: "team"}},
		Withheld:     []WithheldKind{{Kind: "llm.chat", Claimants: []Claimant{{Service: "a", Offer: "private"}, {Service: "b", Offer: "team"}}}},
		ActiveLeases: []GrantRef{{JobID: "job-1", LeaseID: "lease-1"}},
	}, hb)
	noWithheld := strings.Replace(validRequests["heartbeat"], `"withheld":[`+withheldJSON+`],`, ``, 1)
	hb, err = Decoder{}.Heartbeat([]byte(noWithheld))
	require.NoError(t, err)
	require.NotNil(t, hb.Withheld, "an absent withheld is [], as zod's default says")
	require.Empty(t, hb.Withheld)
	require.Len(t, BackendIDs(), 19)
}

func TestRefusalIsADecodeErrorNamingItsSchema(t *testing.T) {
	_, err := Decoder{}.Claim([]byte(`{"protocolVersion":"2"}`))
	var derr *protocol.DecodeError
	require.True(t, errors.As(err, &derr))
	require.Equal(t, "claim", derr.Schema)
	require.Equal(t, "runnerId", derr.Path)
}

func TestAnswersAreNotCappedLikeRequests(t *testing.T) {
	job := `{"jobId":"j","device":` + identityJSON + `,"runnerId":"r","leaseId":"l","awaitingUntil":1,"leaseExpiresAt":2}`
	body := `{"jobs":[` + strings.TrimSuffix(strings.Repeat(job+",", 1000), ",") + `]}`
	got, err := DecodePendingResponse([]byte(body))
	require.NoError(t, err)
	require.Len(t, got.Jobs, 1000)
}
