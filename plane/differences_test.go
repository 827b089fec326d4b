package plane_test

// relayd's deliberate differences from the reference (design.md §3), each
// named after its number in relay-behaviour.md §G.

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// requireUnsupportedVersion checks relayd's RB-G4 refusal, which names every
// version the relay serves.
func requireUnsupportedVersion(t *testing.T, b *bundle, resp peer.RawResponse) {
	t.Helper()
	supported := `["0"]`
	if b.servesV2() {
		supported = `["0","2"]`
	}
	require.Equal(t, 400, resp.Status, "%s", resp.Body)
	require.Equal(t, []string{"application/json"}, resp.Header.Values("Content-Type"))
	var body map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(resp.Body, &body))
	require.JSONEq(t, `"unsupported-protocol-version"`, string(body["error"]))
	require.JSONEq(t, supported, string(body["supported"]))
	require.JSONEq(t, `"0"`, string(body["minimum"]))
	var msg string
	require.NoError(t, json.Unmarshal(body["message"], &msg))
	require.NotEmpty(t, msg)
	for k := range body {
		require.Contains(t, []string{"error", "message", "supported", "minimum"}, k, "no other fields")
	}
}

func TestRB_G4_UnsupportedProtocolVersionIsNamedBeforeTheSignature(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		other := `{"protocolVersion":"1","runnerId":"runner_alice","capabilities":[],"max":1}`
		// Unsigned, and from a runner nobody knows: the version is checked first.
		requireUnsupportedVersion(t, b, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: []byte(other)}))
		requireUnsupportedVersion(t, b, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: b.daemonAt(t, "stranger", b.url, "nobody").SignHeaders("claim", []byte(other)), Body: []byte(other)}))
		// Signed: the same answer.
		resp, err := d.Do(b.ctx, "claim", []byte(other))
		require.NoError(t, err)
		requireUnsupportedVersion(t, b, resp)

		// Every daemon endpoint, pair included; fetch too, which upstream
		// lets through with any version string. "2" is a version the relay
		// does not speak until it serves "2" too.
		unspoken := "2"
		if b.servesV2() {
			unspoken = "3"
		}
		for endpoint, body := range map[string]string{
			"pair":      `{"protocolVersion":"` + unspoken + `","owner":"alice","device":` + string(mustJSON(t, b.keys["alice"].Public())) + `}`,
			"fetch":     `{"protocolVersion":"0.1","runnerId":"runner_alice","jobId":"j","leaseId":"l"}`,
			"heartbeat": `{"protocolVersion":"","runnerId":"runner_alice"}`,
			"result":    `{"protocolVersion":0}`,
			"release":   `{"protocolVersion":null,"leases":[],"reason":"shutdown"}`,
		} {
			requireUnsupportedVersion(t, b, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/" + endpoint, Body: []byte(body)}))
		}

		// A missing version is an ordinary schema failure after auth, until
		// "2" is served too (P2-A1).
		resp, err = d.Do(b.ctx, "claim", []byte(`{"runnerId":"runner_alice","capabilities":[],"max":1}`))
		require.NoError(t, err)
		b.requireUndeclared(t, resp, 400, bodySchema)
		b.requireUndeclared(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: []byte(`{"runnerId":"runner_alice"}`)}), 401, bodyNotSigned)
	})
}

func TestRB_G7_PresenceIsStampedOnEveryAuthenticatedCallFromTheStoreClock(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		before := b.storeNow(t)
		d := b.paired(t, "alice")
		p, ok := b.presence(t, "runner_alice")
		require.True(t, ok)
		require.GreaterOrEqual(t, p.LastSeenAt, before, "pair stamps from the store clock")
		paired := p.LastSeenAt

		b.advance(5 * time.Second)
		before = b.storeNow(t)
		_, err := d.Claim(b.ctx, []string{protocol.KindGenerate}, 1)
		require.NoError(t, err)
		p, _ = b.presence(t, "runner_alice")
		require.Greater(t, p.LastSeenAt, paired, "a claim moves lastSeenAt")
		require.GreaterOrEqual(t, p.LastSeenAt, before)
		require.LessOrEqual(t, p.LastSeenAt, b.storeNow(t))
		claimed := p.LastSeenAt

		// Stamped before the schema: a malformed call counts as seen too.
		b.advance(5 * time.Second)
		resp, err := d.Do(b.ctx, "release", []byte(`{"protocolVersion":"0"}`))
		require.NoError(t, err)
		requireAnswer(t, resp, 400, bodySchema)
		p, _ = b.presence(t, "runner_alice")
		require.Greater(t, p.LastSeenAt, claimed)
		malformed := p.LastSeenAt

		// Every way through the daemon plane stamps: claim, fetch and result
		// within their own store operation, refused there or not, and
		// before it when refused earlier.
		for _, call := range []struct{ endpoint, body string }{
			{"claim", `{"protocolVersion":"0"}`},
			{"claim", `{"protocolVersion":"0","runnerId":"runner_bob","capabilities":[],"max":1}`},
			{"fetch", `{"protocolVersion":"0"}`},
			{"fetch", `{"protocolVersion":"0","runnerId":"runner_alice","jobId":"nope","leaseId":"nope"}`},
			{"result", `{"protocolVersion":"0"}`},
			{"heartbeat", `{"protocolVersion":"0"}`},
		} {
			b.advance(5 * time.Second)
			resp, err := d.Do(b.ctx, call.endpoint, []byte(call.body))
			require.NoError(t, err)
			require.Contains(t, []int{400, 401, 404}, resp.Status, "%s %s: %s", call.endpoint, call.body, resp.Body)
			p, _ = b.presence(t, "runner_alice")
			require.Greater(t, p.LastSeenAt, malformed, "%s %s", call.endpoint, call.body)
			malformed = p.LastSeenAt
		}

		// A refused signature is no sign of life.
		b.advance(5 * time.Second)
		resp, err = b.daemonAt(t, "stranger", b.url, "runner_alice").Do(b.ctx, "heartbeat", heartbeatBody(t, "runner_alice"))
		require.NoError(t, err)
		requireAnswer(t, resp, 401, bodyBadSignature)
		p, _ = b.presence(t, "runner_alice")
		require.Equal(t, malformed, p.LastSeenAt)
	})
}

// setDevice replaces the approved keys and owner of runner's device row.
func setDevice(runner, owner string, keys protocol.PublicIdentity) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		for i, d := range f.Devices {
			if d.RunnerID == runner {
				f.Devices[i] = projection.DeviceRecord{Owner: owner, RunnerID: runner, Device: keys}
			}
		}
	}
}

func TestRB_G7_RePairRefreshesTheStoredKeysAndOwner(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		old := b.paired(t, "alice")
		// The device rotates its encryption key and the control plane
		// records it; the identity key stays.
		rotated, err := peer.NewKeys(old.Keys().IdentityPrivate(), genKeys(t).EncryptionPrivate())
		require.NoError(t, err)
		require.NotEqual(t, old.Keys().Public().Encryption, rotated.Public().Encryption)
		b.project(t, setDevice("runner_alice", "alice", rotated.Public()))
		d, err := peer.NewDaemon(b.clientConfig(b.url), rotated, "")
		require.NoError(t, err)
		_, err = d.Pair(b.ctx, "alice")
		require.NoError(t, err)

		p, ok := b.presence(t, "runner_alice")
		require.True(t, ok)
		require.Equal(t, rotated.Public(), p.Device, "the second pairing's keys are stored")

		// Sites now seal to the new key, and the device can open it.
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		require.Equal(t, rotated.Public(), b.pending(t, "job-1").Device)
		env := b.seal(t, c, `{"prompt":"to the new key"}`)
		_, err = peer.Open(rotated, env, peer.Expectation{JobID: "job-1", Direction: protocol.DirectionPayload, SenderIdentity: b.keys["site"].Public().Identity})
		require.NoError(t, err)

		// The device changes hands: a re-pair for its new owner takes effect.
		b.project(t, setDevice("runner_alice", "bob", rotated.Public()))
		_, err = d.Pair(b.ctx, "bob")
		require.NoError(t, err)
		p, _ = b.presence(t, "runner_alice")
		require.Equal(t, "bob", p.Owner)
		b.enqueue(t, b.stub(t, "bobs", "bob"), b.stub(t, "alices", "alice"))
		b.claimOne(t, d, "bobs")
		require.Empty(t, b.claim(t, d, 8), "alice's self job is no longer this device's")
	})
}

func TestRB_G7_AnUnsignedRePairCannotRollADeviceBackToARetiredKey(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		old := b.paired(t, "alice")
		retired := old.Keys().Public()
		rotated, err := peer.NewKeys(old.Keys().IdentityPrivate(), genKeys(t).EncryptionPrivate())
		require.NoError(t, err)
		b.project(t, setDevice("runner_alice", "alice", rotated.Public()))

		// The retired set is still self-consistent and was public; anyone can
		// present it to the unsigned pair. The relay stores what it approved.
		stranger, err := peer.NewDaemon(b.clientConfig(b.url), old.Keys(), "")
		require.NoError(t, err)
		_, err = stranger.Pair(b.ctx, "alice")
		require.NoError(t, err)
		p, ok := b.presence(t, "runner_alice")
		require.True(t, ok)
		require.Equal(t, rotated.Public(), p.Device)
		require.NotEqual(t, retired.Encryption, p.Device.Encryption)

		d, err := peer.NewDaemon(b.clientConfig(b.url), rotated, "runner_alice")
		require.NoError(t, err)
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		b.claimOne(t, d, "job-1")
		require.Equal(t, rotated.Public(), b.pending(t, "job-1").Device, "sites seal to the approved key only")
	})
}

func TestRB_G7_ARunnerWhoseApprovedKeysOrOwnerChangedMustPairAgain(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "alices", "alice", audience(protocol.AudienceSelf)))

		// The device now belongs to bob: until it pairs again it serves no one.
		b.project(t, setDevice("runner_alice", "bob", d.Keys().Public()))
		_, err := d.Claim(b.ctx, []string{protocol.KindGenerate}, 8)
		requireRefused(t, err, http.StatusUnauthorized, bodyRunnerUnknown)
		b.requireState(t, "alices", store.Queued)

		// Re-approved with another encryption key: the same.
		rotated, err := peer.NewKeys(d.Keys().IdentityPrivate(), genKeys(t).EncryptionPrivate())
		require.NoError(t, err)
		b.project(t, setDevice("runner_alice", "alice", rotated.Public()))
		_, err = d.Claim(b.ctx, []string{protocol.KindGenerate}, 8)
		requireRefused(t, err, http.StatusUnauthorized, bodyRunnerUnknown)
	})
}

func TestRB_G7_RunnerWhoseDeviceRowIsGoneIsNotRecognised(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.project(t, withoutDevice("runner_alice"))
		for endpoint, body := range map[string][]byte{
			"claim":     claimBody(t, "runner_alice"),
			"heartbeat": heartbeatBody(t, "runner_alice"),
		} {
			resp, err := d.Do(b.ctx, endpoint, body)
			require.NoError(t, err)
			requireAnswer(t, resp, 401, bodyRunnerUnknown)
		}
		// And pairing again is now refused as unapproved.
		_, err := b.daemon(t, "alice").Pair(b.ctx, "alice")
		requireRefused(t, err, 403, bodyDeviceNotApproved)
	})
}

func TestRB_G7_RunnerWhoseDeviceWasReapprovedUnderAnotherKeyIsNotRecognised(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		old := b.paired(t, "alice")
		replacement := genKeys(t)
		b.project(t, setDevice("runner_alice", "alice", replacement.Public()))
		// The stored presence still holds the old key, which signs validly,
		// but the projection no longer approves it.
		resp, err := old.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireAnswer(t, resp, 401, bodyRunnerUnknown)

		// The replacement device pairs under the same runner id and works.
		d, err := peer.NewDaemon(b.clientConfig(b.url), replacement, "")
		require.NoError(t, err)
		_, err = d.Pair(b.ctx, "alice")
		require.NoError(t, err)
		_, err = d.Claim(b.ctx, []string{protocol.KindGenerate}, 1)
		require.NoError(t, err)
		p, _ := b.presence(t, "runner_alice")
		require.Equal(t, replacement.Public(), p.Device)
	})
}

func TestRB_G8_LatePayloadIsTooLateEvenWhenNoSweepRan(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		s := b.stub(t, "job-1", "alice")
		b.enqueue(t, s)
		c := b.claimOne(t, d, s.ID)
		p := b.pending(t, s.ID)
		require.Equal(t, c.Lease.ID, p.LeaseID)

		// Exactly at the end of the window, with no pending, claim,
		// heartbeat or sweep in between.
		b.advance(protocol.AwaitingPayloadMs * time.Millisecond)
		env, err := b.site.SealFor(p, s.ID, s.DeadlineAt, json.RawMessage(`{"prompt":"late"}`))
		require.NoError(t, err)
		_, err = b.site.Payload(b.ctx, s.ID, env)
		requireRefused(t, err, 409, bodyTooLate(store.Queued))
		j := b.requireState(t, s.ID, store.Queued)
		require.Nil(t, j.Payload, "the late payload was not stored")
	})
}

func TestRB_G8_PayloadJustInsideTheWindowIsAccepted(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		p := b.pending(t, "job-1")
		b.advance((protocol.AwaitingPayloadMs - 1000) * time.Millisecond)
		env, err := b.site.SealFor(p, c.ID, c.DeadlineAt, json.RawMessage(`{"prompt":"in time"}`))
		require.NoError(t, err)
		_, err = b.site.Payload(b.ctx, c.ID, env)
		require.NoError(t, err)
		b.requireState(t, "job-1", store.Ready)
	})
}

func TestRB_G9_FetchAfterResultIsTooLateAndTheJobStaysDone(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		b.runToDone(t, d, c)
		first := b.job(t, "job-1").Result

		_, err := d.Fetch(b.ctx, c.ID, c.Lease.ID)
		requireRefused(t, err, 409, bodyAlreadyFinished)
		j := b.requireState(t, "job-1", store.Done)
		require.Equal(t, first, j.Result)

		res, err := b.site.Results(b.ctx)
		require.NoError(t, err)
		require.Len(t, res.Jobs, 1, "results still lists the job")
		// A second result is a duplicate and overwrites nothing.
		env, err := peer.Seal(d.Keys(), b.keys["site"].Public(), c.ID, protocol.DirectionResult, c.DeadlineAt, json.RawMessage(`{"second":true}`))
		require.NoError(t, err)
		resp, err := d.Result(b.ctx, c.ID, c.Lease.ID, env, protocol.DispositionError)
		require.NoError(t, err)
		require.Equal(t, protocol.ResultResponse{Accepted: false, Duplicate: true, State: "done"}, resp)
		j = b.requireState(t, "job-1", store.Done)
		require.Equal(t, first, j.Result)
		require.Equal(t, protocol.DispositionOK, j.Disposition)
	})
}

func TestRB_G10_ReleaseOfADoneJobReleasesNothing(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		b.runToDone(t, d, c)

		for _, reason := range []string{protocol.ReasonShutdown, protocol.ReasonRefused} {
			resp, err := d.Do(b.ctx, "release", mustJSON(t, protocol.ReleaseRequest{ProtocolVersion: "0", RunnerID: "runner_alice", Leases: []protocol.LeaseRef{lease(c)}, Reason: reason}))
			require.NoError(t, err)
			requireAnswer(t, resp, 200, `{"released":[]}`)
		}
		b.requireState(t, "job-1", store.Done)
		res, err := b.site.Results(b.ctx)
		require.NoError(t, err)
		require.Len(t, res.Jobs, 1)
		require.Empty(t, b.claim(t, b.paired(t, "alice2"), 8), "nobody can run it again")
	})
}

func TestRB_G11_CancelledJobThatIsDoneIsNotListedInHeartbeatCancel(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		b.seal(t, c, `{"prompt":"p"}`)
		_, err := d.Fetch(b.ctx, c.ID, c.Lease.ID)
		require.NoError(t, err)

		cancelled, err := b.site.Cancel(b.ctx, "job-1")
		require.NoError(t, err)
		require.True(t, cancelled.Cancelled)
		hb, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{lease(c)})
		require.NoError(t, err)
		require.Equal(t, []string{"job-1"}, hb.Cancel, "while it runs, the holder is told")

		b.finish(t, d, c, `{"outcome":{"kind":"canceled"}}`)
		hb, err = d.Heartbeat(b.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, hb.Cancel, "once it is done, it is never listed")
		res, err := b.site.Results(b.ctx)
		require.NoError(t, err)
		require.Len(t, res.Jobs, 1, "the site still collects the result of a cancelled job")

		// A job cancelled only after it finished is never listed either.
		b.enqueue(t, b.stub(t, "job-2", "alice"))
		c2 := b.claimOne(t, d, "job-2")
		b.runToDone(t, d, c2)
		cancelled, err = b.site.Cancel(b.ctx, "job-2")
		require.NoError(t, err)
		require.True(t, cancelled.Cancelled, "a done job can still be cancelled")
		hb, err = d.Heartbeat(b.ctx, []protocol.LeaseRef{lease(c2)})
		require.NoError(t, err)
		require.Empty(t, hb.Cancel)
	})
}

func TestRB_G17_IssuedAtIsDecimalDigitsOnly(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		now := b.relayNow()
		// The first forms are the relay's own now to JavaScript's Number(),
		// with the signature over that decimal now, so only the form is
		// wrong; the rest are not positive safe integers at all. (Surrounding
		// spaces are not here: HTTP strips them before the relay sees them.)
		forms := []string{
			strconv.FormatFloat(float64(now), 'e', -1, 64),
			"0x" + strconv.FormatInt(now, 16),
			"0X" + strings.ToUpper(strconv.FormatInt(now, 16)),
			"+" + itoa(now),
			itoa(now) + ".0",
			"1.7e12",
			"-" + itoa(now),
			"0",
			"9007199254740992",
		}
		for _, form := range forms {
			h := d.SignHeadersAt("claim", body, now)
			h.Set(protocol.HeaderIssuedAt, form)
			resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: h, Body: body})
			requireAnswer(t, resp, 401, bodyNotSigned)

			hs := b.site.SignHeadersAt("site/pending", nil, now)
			hs.Set(protocol.HeaderIssuedAt, form)
			resp = b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/pending?siteId=" + siteMain, Header: hs})
			requireAnswer(t, resp, 401, bodyNotSigned)
		}

		// Leading zeros are still decimal digits; the signature covers the
		// normalised number.
		h := d.SignHeadersAt("claim", body, now)
		h.Set(protocol.HeaderIssuedAt, "00"+itoa(now))
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: h, Body: body}), 200, emptyClaim)
	})
}

func TestRB_A03_BodyThatIsNotValidUTF8IsRefusedAfterAuth(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		// Well-formed but for one byte: a parser that replaced it with
		// U+FFFD would accept this claim.
		claim := []byte(strings.Replace(string(claimBody(t, "runner_alice")), `"model":"relayd-test"`, "\"model\":\"relayd-\xff\"", 1))
		require.Contains(t, string(claim), "\xff")
		resp, err := d.Do(b.ctx, "claim", claim)
		require.NoError(t, err)
		requireAnswer(t, resp, 400, bodySchema)
		// Auth came first: the same bytes unsigned are refused as unsigned.
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: claim}), 401, bodyNotSigned)

		enq := []byte(strings.Replace(string(enqueueBody(t, siteMain, b.stub(t, "job-1", "alice"))), `"owner":"alice"`, "\"owner\":\"alice\xff\"", 1))
		requireAnswer(t, siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", enq), 400, bodySchema)
		b.requireNoJob(t, "job-1")

		requireAnswer(t, postPair(t, b, []byte(strings.Replace(string(pairBody(t, "alice", b.keys["alice"].Public())), `"owner":"alice"`, "\"owner\":\"ali\xc3\x28ce\"", 1))), 400, bodyPairSchema)
	})
}

func TestRB_A04_BodyThatRepeatsAKeyIsRefusedAfterAuth(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))

		dup := []byte(`{"protocolVersion":"0","runnerId":"runner_alice","capabilities":[],"max":1,"max":2}`)
		resp, err := d.Do(b.ctx, "claim", dup)
		require.NoError(t, err)
		requireAnswer(t, resp, 400, bodySchema)
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: dup}), 401, bodyNotSigned)

		// A repeated siteId is how one parser would see site_other and another
		// site_main: refused, not resolved either way.
		smuggle := []byte(`{"siteId":"site_other","siteId":"site_main","jobId":"job-1"}`)
		requireAnswer(t, siteDo(b.ctx, t, b.site, http.MethodPost, "cancel", smuggle), 400, bodySchema)
		require.False(t, b.job(t, "job-1").Cancelled)

		// Nested objects too.
		nested := strings.Replace(string(enqueueBody(t, siteMain, b.stub(t, "job-2", "alice"))), `"owner":"alice"`, `"owner":"alice","owner":"bob"`, 1)
		requireAnswer(t, siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", []byte(nested)), 400, bodySchema)
		b.requireNoJob(t, "job-2")

		pairDup := strings.Replace(string(pairBody(t, "alice", b.keys["alice"].Public())), `"owner":"alice"`, `"owner":"bob","owner":"alice"`, 1)
		requireAnswer(t, postPair(t, b, []byte(pairDup)), 400, bodyPairSchema)
	})
}

// padTo pads a JSON object body with spaces to exactly n bytes.
func padTo(t *testing.T, body []byte, n int) []byte {
	t.Helper()
	require.LessOrEqual(t, len(body), n)
	out := append([]byte(nil), body[:len(body)-1]...)
	out = append(out, []byte(strings.Repeat(" ", n-len(body)))...)
	return append(out, '}')
}

func TestRB_G26_BodyOverTheCapIs413WithAJSONBody(t *testing.T) {
	const limit = 1024
	eachStore(t, &setupOpts{MaxBodyBytes: limit}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		require413 := func(t *testing.T, resp peer.RawResponse) {
			t.Helper()
			require.Equal(t, http.StatusRequestEntityTooLarge, resp.Status, "%s", resp.Body)
			require.Equal(t, []string{"application/json"}, resp.Header.Values("Content-Type"))
			var e protocol.ErrorBody
			require.NoError(t, json.Unmarshal(resp.Body, &e))
			require.NotEmpty(t, e.Error)
			require.NotEmpty(t, e.Message)
		}

		claim := claimBody(t, "runner_alice")
		atCap, overCap := padTo(t, claim, limit), padTo(t, claim, limit+1)
		resp, err := d.Do(b.ctx, "claim", atCap)
		require.NoError(t, err)
		requireAnswer(t, resp, 200, emptyClaim)
		resp, err = d.Do(b.ctx, "claim", overCap)
		require.NoError(t, err)
		require413(t, resp)
		// Far over, and unsigned: the cap comes before everything else.
		require413(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: padTo(t, claim, 1<<20)}))

		enq := enqueueBody(t, siteMain, b.stub(t, "job-1", "alice"))
		require413(t, siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", padTo(t, enq, limit+1)))
		b.requireNoJob(t, "job-1")
		requireAnswer(t, siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", padTo(t, enq, limit)), 200, `{"jobId":"job-1","state":"queued"}`)

		require413(t, postPair(t, b, padTo(t, pairBody(t, "alice", b.keys["alice"].Public()), limit+1)))
	})
}

func TestRB_G26_OversizedBodyKeepsAWireCodeEveryClientKnows(t *testing.T) {
	eachStore(t, &setupOpts{MaxBodyBytes: 64}, func(t *testing.T, b *bundle) {
		// Deliberate: 413 with the known code bad-request, as the reference
		// pairs statuses and codes freely (RB-G1). A code outside the wire set
		// could make a strict client fail to parse the refusal at all.
		resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: padTo(t, claimBody(t, "runner_alice"), 4096)})
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.Status)
		var e protocol.ErrorBody
		require.NoError(t, json.Unmarshal(resp.Body, &e))
		require.Equal(t, protocol.CodeBadRequest, e.Error)
		require.NotEmpty(t, e.Message)
	})
}

// P2-D11: the race a fault run found. The site reads pending while alice's
// laptop holds the job; the laptop's sealing window lapses and her second
// device claims the job; the payload the site sealed to the laptop then
// arrives. It is refused with the status and code of a late seal, so the
// second device is never handed a payload it cannot open, and the site's
// next pending read names the device to seal to.
func TestP2_D11_StaleSealIsRefused(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		laptop, second := b.paired(t, "alice"), b.paired(t, "alice2")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		b.claimOne(t, laptop, "job-1")
		read := b.pending(t, "job-1")
		require.Equal(t, b.keys["alice"].Public(), read.Device)

		b.advance(protocol.AwaitingPayloadMs * time.Millisecond)
		c := b.claimOne(t, second, "job-1")
		stale, err := b.site.SealFor(read, "job-1", c.DeadlineAt, json.RawMessage(`{"prompt":"for the laptop"}`))
		require.NoError(t, err)
		_, err = b.site.Payload(b.ctx, "job-1", stale)
		requireRefused(t, err, http.StatusConflict, `{"error":"too-late","message":"job is awaiting a payload for another device"}`)
		require.Nil(t, b.requireState(t, "job-1", store.AwaitingPayload).Payload)

		b.seal(t, c, `{"prompt":"for the second device"}`)
		got, err := second.Fetch(b.ctx, "job-1", c.Lease.ID)
		require.NoError(t, err)
		plain, err := peer.Open(b.keys["alice2"], got.Envelope, peer.Expectation{JobID: "job-1", Direction: protocol.DirectionPayload, SenderIdentity: b.keys["site"].Public().Identity})
		require.NoError(t, err)
		require.JSONEq(t, `{"prompt":"for the second device"}`, string(plain))
	})
}

// P2-D11's mirror on result: a result the holder's device did not seal could
// never be verified by the site, so it is refused and the job stays open
// for the holder's own.
func TestP2_D11_ResultFromAnotherDeviceIsRefused(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		b.seal(t, c, `{"prompt":"p"}`)
		_, err := d.Fetch(b.ctx, "job-1", c.Lease.ID)
		require.NoError(t, err)

		forged, err := peer.Seal(b.keys["bob"], b.keys["site"].Public(), c.ID, protocol.DirectionResult, c.DeadlineAt, json.RawMessage(`{"outcome":{"text":"not mine"}}`))
		require.NoError(t, err)
		_, err = d.Result(b.ctx, c.ID, c.Lease.ID, forged, protocol.DispositionOK)
		requireRefused(t, err, http.StatusBadRequest, `{"error":"bad-request","message":"that result is not sealed by the device that holds the job"}`)
		require.Nil(t, b.requireState(t, "job-1", store.Running).Result)

		b.finish(t, d, c, `{"outcome":{"text":"mine"}}`)
	})
}
