package peer

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/nacl/box"

	"github.com/byollm/relayd/protocol"
)

const deadline = int64(1_900_000_000_000)

// pair returns a site and a device and a payload sealed from one to the other.
func sealedPayload(t *testing.T, plaintext string) (site, device Keys, env protocol.SealedEnvelope) {
	t.Helper()
	site, device = mustKeys(t), mustKeys(t)
	env, err := Seal(site, device.Public(), "job-1", protocol.DirectionPayload, deadline, json.RawMessage(plaintext))
	require.NoError(t, err)
	return site, device, env
}

func payloadExpect(site Keys) Expectation {
	return Expectation{JobID: "job-1", Direction: protocol.DirectionPayload, SenderIdentity: site.Public().Identity}
}

// openInner opens the sealed box directly and returns the decoded inner
// object, bypassing Open's checks.
func openInner(t *testing.T, recipient Keys, env protocol.SealedEnvelope) (body, sig []byte) {
	t.Helper()
	boxed, err := protocol.DecodeKey(env.Ciphertext)
	require.NoError(t, err)
	pub := recipient.encryptionPub
	priv := recipient.EncryptionPrivate()
	innerJSON, ok := box.OpenAnonymous(nil, boxed, &pub, &priv)
	require.True(t, ok)
	require.True(t, bytes.HasPrefix(innerJSON, []byte(`{"body":"`)), "inner is {body, signature} in that order: %s", innerJSON)
	var inner struct{ Body, Signature string }
	require.NoError(t, json.Unmarshal(innerJSON, &inner))
	body, err = protocol.DecodeKey(inner.Body)
	require.NoError(t, err)
	sig, err = protocol.DecodeKey(inner.Signature)
	require.NoError(t, err)
	return body, sig
}

func TestSealOpenRoundTrip(t *testing.T) {
	site, device, env := sealedPayload(t, `{"prompt": "hello <world> & \"you\""}`)
	require.Equal(t, device.KeyID(), env.RecipientKeyID)
	require.Equal(t, site.KeyID(), env.SenderKeyID)
	require.Equal(t, protocol.DirectionPayload, env.Direction)
	require.Equal(t, deadline, env.DeadlineAt)
	require.NotContains(t, env.Ciphertext, "=")

	got, err := Open(device, env, payloadExpect(site))
	require.NoError(t, err)
	require.JSONEq(t, `{"prompt":"hello <world> & \"you\""}`, string(got))

	// And back the other way, as a daemon returns a result.
	result := `{"outcome":{"text":"hi"},"ran":{"model":"m","backendClass":"http","durationMs":12}}`
	renv, err := Seal(device, site.Public(), "job-1", protocol.DirectionResult, deadline, json.RawMessage(result))
	require.NoError(t, err)
	got, err = Open(site, renv, Expectation{JobID: "job-1", Direction: protocol.DirectionResult, SenderIdentity: device.Public().Identity})
	require.NoError(t, err)
	require.Equal(t, result, string(got))
}

func TestSignedBodyLayout(t *testing.T) {
	site, device, env := sealedPayload(t, "{\n  \"prompt\": \"a<b\"\n}")
	body, sig := openInner(t, device, env)

	want := `{"v":"byollm/v1/envelope","jobId":"job-1","senderKeyId":"` + site.KeyID() +
		`","recipientKeyId":"` + device.KeyID() + `","deadlineAt":` + strconv.FormatInt(deadline, 10) +
		`,"direction":"payload","plaintext":{"prompt":"a<b"}}`
	require.Equal(t, want, string(body), "key order, compacted plaintext, no HTML escaping")
	require.True(t, bytes.HasPrefix(body, []byte(`{"v":"byollm/v1/envelope","jobId":`)))
	require.True(t, ed25519.Verify(site.IdentityPublic(), body, sig), "the inner signature is over S itself")
}

func TestOpenRefusesUnpinnedSender(t *testing.T) {
	// The daemon refuses work sealed by a key it never pinned: here an
	// impostor seals to the device, and the device pins the real site.
	site, device := mustKeys(t), mustKeys(t)
	impostor := mustKeys(t)
	env, err := Seal(impostor, device.Public(), "job-1", protocol.DirectionPayload, deadline, json.RawMessage(`{"prompt":"x"}`))
	require.NoError(t, err)
	_, err = Open(device, env, payloadExpect(site))
	require.ErrorContains(t, err, "pinned sender")

	// Even when the impostor lies about the sender key id, the signature
	// check against the pinned key catches it.
	env.SenderKeyID = site.KeyID()
	_, err = Open(device, env, payloadExpect(site))
	require.ErrorContains(t, err, "signature does not verify")
}

func TestOpenRefusesTamperedCiphertext(t *testing.T) {
	site, device, env := sealedPayload(t, `{"prompt":"x"}`)
	raw, err := protocol.DecodeKey(env.Ciphertext)
	require.NoError(t, err)
	for _, i := range []int{0, 40, len(raw) - 1} { // ephemeral key, MAC, body
		bad := append([]byte(nil), raw...)
		bad[i] ^= 0x01
		tampered := env
		tampered.Ciphertext = protocol.EncodeKey(bad)
		_, err := Open(device, tampered, payloadExpect(site))
		require.ErrorContains(t, err, "does not open", "byte %d", i)
	}
	env.Ciphertext = "not*base64"
	_, err = Open(device, env, payloadExpect(site))
	require.ErrorContains(t, err, "not base64url")
}

func TestOpenRefusesMismatches(t *testing.T) {
	site, device, env := sealedPayload(t, `{"prompt":"x"}`)
	other := mustKeys(t)

	cases := map[string]struct {
		recipient Keys
		env       func(protocol.SealedEnvelope) protocol.SealedEnvelope
		expect    func(Expectation) Expectation
		msg       string
	}{
		"wrong job id": {
			expect: func(e Expectation) Expectation { e.JobID = "job-2"; return e },
			msg:    `signed for job "job-1", expected "job-2"`,
		},
		"wrong expected direction": {
			expect: func(e Expectation) Expectation { e.Direction = protocol.DirectionResult; return e },
			msg:    "direction",
		},
		"envelope direction relabelled": {
			env: func(e protocol.SealedEnvelope) protocol.SealedEnvelope {
				e.Direction = protocol.DirectionResult
				return e
			},
			expect: func(e Expectation) Expectation { e.Direction = protocol.DirectionResult; return e },
			msg:    "signed direction",
		},
		"envelope deadline changed": {
			env: func(e protocol.SealedEnvelope) protocol.SealedEnvelope { e.DeadlineAt++; return e },
			msg: "signed deadline",
		},
		"recipient key id not mine": {
			env: func(e protocol.SealedEnvelope) protocol.SealedEnvelope { e.RecipientKeyID = other.KeyID(); return e },
			msg: "not this peer",
		},
		"opened by the wrong peer": {
			recipient: other,
			env:       func(e protocol.SealedEnvelope) protocol.SealedEnvelope { e.RecipientKeyID = other.KeyID(); return e },
			msg:       "does not open",
		},
		"sender key id not the pinned key's": {
			env: func(e protocol.SealedEnvelope) protocol.SealedEnvelope { e.SenderKeyID = other.KeyID(); return e },
			msg: "pinned sender",
		},
		"no pinned sender": {
			expect: func(e Expectation) Expectation { e.SenderIdentity = ""; return e },
			msg:    "pinned sender identity",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			recipient := device
			if tc.recipient.identity != nil {
				recipient = tc.recipient
			}
			e := env
			if tc.env != nil {
				e = tc.env(e)
			}
			x := payloadExpect(site)
			if tc.expect != nil {
				x = tc.expect(x)
			}
			_, err := Open(recipient, e, x)
			require.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestOpenRefusesSignedClaimsThatDifferFromTheEnvelope(t *testing.T) {
	// A sender that signs one recipient key id but labels the envelope with
	// another: the clear-text label matches the opener, the signed one not.
	site, device := mustKeys(t), mustKeys(t)
	other := mustKeys(t)
	body := []byte(`{"v":"byollm/v1/envelope","jobId":"job-1","senderKeyId":"` + site.KeyID() +
		`","recipientKeyId":"` + other.KeyID() + `","deadlineAt":` + strconv.FormatInt(deadline, 10) +
		`,"direction":"payload","plaintext":{}}`)
	inner, err := json.Marshal(innerEnvelope{
		Body:      protocol.EncodeKey(body),
		Signature: protocol.EncodeKey(ed25519.Sign(site.identity, body)),
	})
	require.NoError(t, err)
	pub := device.encryptionPub
	boxed, err := box.SealAnonymous(nil, inner, &pub, rand.Reader)
	require.NoError(t, err)
	env := protocol.SealedEnvelope{
		Ciphertext:     protocol.EncodeKey(boxed),
		RecipientKeyID: device.KeyID(),
		SenderKeyID:    site.KeyID(),
		Direction:      protocol.DirectionPayload,
		DeadlineAt:     deadline,
	}
	_, err = Open(device, env, payloadExpect(site))
	require.ErrorContains(t, err, "signed recipient")
}

func TestSealRefusesBadInput(t *testing.T) {
	site, device := mustKeys(t), mustKeys(t)
	pt := json.RawMessage(`{"prompt":"x"}`)

	_, err := Seal(site, device.Public(), "", protocol.DirectionPayload, deadline, pt)
	require.ErrorContains(t, err, "job id")
	_, err = Seal(site, device.Public(), "j", "sideways", deadline, pt)
	require.ErrorContains(t, err, "direction")
	_, err = Seal(site, device.Public(), "j", protocol.DirectionPayload, 0, pt)
	require.ErrorContains(t, err, "deadlineAt")
	_, err = Seal(site, device.Public(), "j", protocol.DirectionPayload, deadline, json.RawMessage(`{"prompt":`))
	require.ErrorContains(t, err, "not JSON")

	swapped := device.Public()
	swapped.Encryption = mustKeys(t).Public().Encryption
	_, err = Seal(site, swapped, "j", protocol.DirectionPayload, deadline, pt)
	require.ErrorContains(t, err, "not consistent")
}

// TestSealerChecksEachIdentityOnceAndNeverRemembersABadOne: a Sealer seals
// exactly what Seal does, remembers identities that passed the check, and
// refuses an inconsistent one every time.
func TestSealerChecksEachIdentityOnceAndNeverRemembersABadOne(t *testing.T) {
	site, device := mustKeys(t), mustKeys(t)
	var s Sealer
	for range 2 {
		env, err := s.Seal(site, device.Public(), "job-1", protocol.DirectionPayload, deadline, json.RawMessage(`{"a":1}`))
		require.NoError(t, err)
		got, err := Open(device, env, payloadExpect(site))
		require.NoError(t, err)
		require.JSONEq(t, `{"a":1}`, string(got))
	}
	require.Len(t, s.checked, 1)

	swapped := device.Public()
	swapped.Encryption = mustKeys(t).Public().Encryption // not vouched for by device's identity key
	for range 2 {
		_, err := s.Seal(site, swapped, "job-1", protocol.DirectionPayload, deadline, json.RawMessage(`{"a":1}`))
		require.ErrorContains(t, err, "not consistent")
	}
	require.Len(t, s.checked, 1, "a failed check is not remembered")

	for range sealerCapacity {
		s.checked[protocol.PublicIdentity{Identity: strconv.Itoa(len(s.checked))}] = struct{}{}
	}
	_, err := s.Seal(site, mustKeys(t).Public(), "job-1", protocol.DirectionPayload, deadline, json.RawMessage(`{"a":1}`))
	require.NoError(t, err)
	require.Len(t, s.checked, 1, "a full Sealer starts over")
}
