package proto2

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
)

// Every refusal of §3.17, status and body byte for byte, written out here
// rather than built from the constants so a changed message fails.
func TestRefusalCatalogue(t *testing.T) {
	for _, c := range []struct {
		n      int
		got    *Refusal
		status int
		body   string
	}{
		{1, NotFoundPath(), 404, `{"error":"not-found"}`},
		{3, DebugNoSite(), 400, `{"error":"bad-request"}`},
		{6, NotSigned(), 401, `{"error":"unauthorized","message":"this request is not signed"}`},
		{7, RunnerNotRecognised(), 401, `{"error":"unauthorized","message":"this runner is not recognised"}`},
		{8, SiteNotRegistered(), 401, `{"error":"unauthorized","message":"this site is not registered"}`},
		{9, ClockSkew(1800000000000), 401, `{"error":"clock-skew","message":"this request's timestamp is too far from the server's clock; check the machine's time and try again","serverTime":1800000000000,"maxSkewMs":120000}`},
		{10, BadSignature(), 401, `{"error":"unauthorized","message":"signature check failed"}`},
		{11, Revoked(), 403, `{"error":"revoked","message":"routing for this runner has been revoked"}`},
		{12, SchemaRefusal(), 400, `{"error":"bad-request","message":"request failed schema validation"}`},
		{14, NotYourSite(), 403, `{"error":"forbidden","message":"that is not your site"}`},
		{15, RunnerMismatch(), 403, `{"error":"forbidden","message":"runner id does not match the key"}`},
		{16, UnknownJob(), 404, `{"error":"not-found","message":"unknown job"}`},
		{17, NotHolder(), 403, `{"error":"forbidden","message":"this runner does not hold the job"}`},
		{18, StaleLease(), 403, `{"error":"forbidden","message":"that lease is no longer current"}`},
		{19, NotSealed(), 409, `{"error":"not-ready","message":"the site has not sealed this job yet"}`},
		{20, AlreadyFinished(), 409, `{"error":"too-late","message":"this job has already finished"}`},
		{22, BelowFloor("0.1.0", "0.1.1"), 426, "{\"error\":\"daemon-below-floor\",\"message\":\"byollm 0.1.0 is below the supported floor (0.1.1). Run `npm i -g byollm@latest`, then `byollm start`.\",\"floor\":\"0.1.1\"}"},
		{23, PairSchemaRefusal(), 400, `{"error":"bad-request","message":"pair request failed schema validation"}`},
		{24, InconsistentDevice(), 400, `{"error":"bad-request","message":"the device identity is not consistent"}`},
		{25, NoConsent(), 403, `{"error":"forbidden","message":"no consent record for this user"}`},
		{26, DeviceNotApproved(), 403, `{"error":"forbidden","message":"this device has not been approved by its owner"}`},
		{27, DeviceOtherOwner(), 403, `{"error":"forbidden","message":"this device belongs to another owner"}`},
		{28, NoDeviceCode(), 501, `{"error":"bad-request","message":"this relay does not offer device-code pairing"}`},
		{29, PairingBusy(), 429, "{\"error\":\"rate-limited\",\"message\":\"too many pairings are in progress right now \u2014 try again in a few minutes\"}"},
		{30, StubWrongSite(), 403, `{"error":"forbidden","message":"that stub does not name the site that signed it"}`},
		{31, CheckFailed(), 503, "{\"error\":\"server-error\",\"message\":\"we could not check this just now \u2014 try again shortly\"}"},
		{32, PurposeNotDeclared("summarise"), 409, "{\"error\":\"purpose-not-declared\",\"message\":\"this site does not declare summarise \u2014 declare it on Developer Sites, and the people who have already connected will each map the new slot before it routes\"}"},
		{32, PurposeNotDeclared(""), 409, "{\"error\":\"purpose-not-declared\",\"message\":\"this site does not declare that purpose \u2014 declare it on Developer Sites, and the people who have already connected will each map the new slot before it routes\"}"},
		{33, SlotUnsatisfiable(), 409, `{"error":"slot-unsatisfiable","message":"nobody has chosen what answers this yet"}`},
		{34, SlotWaiting(), 409, "{\"error\":\"slot-waiting\",\"message\":\"nothing can answer this right now \u2014 try again later\"}"},
		{35, StubNotAccepted(), 400, `{"error":"bad-request","message":"that stub was not accepted"}`},
		{37, NotAwaiting("running"), 409, `{"error":"too-late","message":"job is running, not awaiting payload"}`},
		{37, NotAwaiting(""), 409, `{"error":"too-late","message":"job is gone, not awaiting payload"}`},
	} {
		require.Equal(t, c.status, c.got.Status, "#%d", c.n)
		body, err := Marshal(c.got.Body)
		require.NoError(t, err)
		require.Equal(t, c.body, string(body), "#%d", c.n)
	}
	// The em dashes are U+2014, nothing that looks like one.
	require.Contains(t, MsgPairingBusy, "\u2014")
	require.Equal(t, "unauthorized: this request is not signed", NotSigned().Error())
	require.Equal(t, "not-found", NotFoundPath().Error())
}

// relayd's own refusals (rate limits, store outages) reach a v2 caller
// unchanged, retryAfter in seconds included (P2-D1).
func TestFromV0KeepsEveryField(t *testing.T) {
	r := FromV0(protocol.RateLimited(3))
	require.Equal(t, 429, r.Status)
	body, err := Marshal(r.Body)
	require.NoError(t, err)
	v0, err := Marshal(protocol.RateLimited(3).Body)
	require.NoError(t, err)
	require.Equal(t, string(v0), string(body))
	require.Equal(t, protocol.UnsupportedVersion().Body.Supported, FromV0(protocol.UnsupportedVersion()).Body.Supported)
}

func envelopeOf(ciphertext string) SealedEnvelope {
	return SealedEnvelope{Ciphertext: ciphertext, RecipientKeyID: "r", SenderKeyID: "s", Direction: "payload", DeadlineAt: 1800086400000}
}

// §3.12.1: the size is JSON.stringify's length in UTF-16 units, and
// exactly 6 MiB is accepted.
func TestP2_D2_EnvelopeSizeRule(t *testing.T) {
	require.EqualValues(t, 109, EnvelopeBytes(envelopeOf("AAAA")), "the spec's worked example")
	encoded, err := Marshal(envelopeOf("AAAA"))
	require.NoError(t, err)
	require.Len(t, encoded, 109)

	for s, units := range map[string]int64{
		`"`: 2, `\`: 2, "\n": 2, "\b": 2, "\x01": 6, "\x1f": 6, "é": 1, "😀": 2, "\u2028": 1, "<": 1,
	} {
		require.Equal(t, 83+units+1+1+7+13, EnvelopeBytes(envelopeOf(s)), "%q", s)
	}

	fill := MaxEnvelopeBytes - 105 // the envelope around the ciphertext
	require.Nil(t, EnvelopeTooLarge(envelopeOf(strings.Repeat("A", fill))), "exactly the limit is accepted")
	over := EnvelopeTooLarge(envelopeOf(strings.Repeat("A", fill+1)))
	require.NotNil(t, over)
	require.Equal(t, 400, over.Status)
	body, err := Marshal(over.Body)
	require.NoError(t, err)
	require.Equal(t, "{\"error\":\"bad-request\",\"message\":\"this message is 6.1 MB and the limit is 6.0 MB \u2014 it is a limit on one message rather than on how many you send. Split the work into smaller jobs and send them separately. Every plan has the same ceiling.\"}", string(body))
	require.Equal(t, "0.1 MB", describeBytes(1))
	require.Equal(t, "6.0 MB", describeBytes(MaxEnvelopeBytes))
	require.Equal(t, "12.0 MB", describeBytes(12<<20))
}
