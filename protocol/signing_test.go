package protocol

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseSignature(t *testing.T) {
	headers := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	full := func(issuedAt string) http.Header {
		return headers(HeaderRunner, "runner-1", HeaderIssuedAt, issuedAt, HeaderSignature, "c2ln")
	}

	cases := []struct {
		name   string
		h      http.Header
		caller string
		ok     bool
		want   Signature
	}{
		{"valid", full("1700000000000"), HeaderRunner, true, Signature{CallerID: "runner-1", IssuedAt: 1_700_000_000_000, Signature: "c2ln"}},
		{"lowercase header names", headers("x-byollm-runner", "r", "x-byollm-issued-at", "5", "x-byollm-signature", "s"), HeaderRunner, true, Signature{CallerID: "r", IssuedAt: 5, Signature: "s"}},
		{"site plane reads its own header", headers(HeaderSite, "site-1", HeaderIssuedAt, "7", HeaderSignature, "s"), HeaderSite, true, Signature{CallerID: "site-1", IssuedAt: 7, Signature: "s"}},
		{"leading zeros are digits", full("0017"), HeaderRunner, true, Signature{CallerID: "runner-1", IssuedAt: 17, Signature: "c2ln"}},
		{"many leading zeros", full("000000000000000000001700000000000"), HeaderRunner, true, Signature{CallerID: "runner-1", IssuedAt: 1_700_000_000_000, Signature: "c2ln"}},
		{"largest safe integer", full("9007199254740991"), HeaderRunner, true, Signature{CallerID: "runner-1", IssuedAt: 9007199254740991, Signature: "c2ln"}},
		{"repeated caller headers are joined", headers(HeaderRunner, "a", HeaderRunner, "b", HeaderIssuedAt, "1", HeaderSignature, "s"), HeaderRunner, true, Signature{CallerID: "a, b", IssuedAt: 1, Signature: "s"}},
		{"repeated signature headers are joined", headers(HeaderRunner, "r", HeaderIssuedAt, "1", HeaderSignature, "s1", HeaderSignature, "s2"), HeaderRunner, true, Signature{CallerID: "r", IssuedAt: 1, Signature: "s1, s2"}},

		{"no headers", http.Header{}, HeaderRunner, false, Signature{}},
		{"missing caller", headers(HeaderIssuedAt, "1", HeaderSignature, "s"), HeaderRunner, false, Signature{}},
		{"missing issuedAt", headers(HeaderRunner, "r", HeaderSignature, "s"), HeaderRunner, false, Signature{}},
		{"missing signature", headers(HeaderRunner, "r", HeaderIssuedAt, "1"), HeaderRunner, false, Signature{}},
		{"empty caller", headers(HeaderRunner, "", HeaderIssuedAt, "1", HeaderSignature, "s"), HeaderRunner, false, Signature{}},
		{"empty signature", headers(HeaderRunner, "r", HeaderIssuedAt, "1", HeaderSignature, ""), HeaderRunner, false, Signature{}},
		{"empty issuedAt", full(""), HeaderRunner, false, Signature{}},
		{"daemon header on the site plane", full("1"), HeaderSite, false, Signature{}},
		{"site header on the daemon plane", headers(HeaderSite, "s", HeaderIssuedAt, "1", HeaderSignature, "s"), HeaderRunner, false, Signature{}},
		{"exponent form", full("1.7e12"), HeaderRunner, false, Signature{}},
		{"hex", full("0x10"), HeaderRunner, false, Signature{}},
		{"leading space", full(" 12"), HeaderRunner, false, Signature{}},
		{"trailing space", full("12 "), HeaderRunner, false, Signature{}},
		{"fraction", full("12.0"), HeaderRunner, false, Signature{}},
		{"plus sign", full("+12"), HeaderRunner, false, Signature{}},
		{"negative", full("-12"), HeaderRunner, false, Signature{}},
		{"zero", full("0"), HeaderRunner, false, Signature{}},
		{"zeros", full("000"), HeaderRunner, false, Signature{}},
		{"above the safe range", full("9007199254740992"), HeaderRunner, false, Signature{}},
		{"beyond int64", full("99999999999999999999999"), HeaderRunner, false, Signature{}},
		{"Infinity", full("Infinity"), HeaderRunner, false, Signature{}},
		{"digit underscore", full("1_000"), HeaderRunner, false, Signature{}},
		{"repeated issuedAt headers are joined, then not digits", headers(HeaderRunner, "r", HeaderIssuedAt, "1", HeaderIssuedAt, "2", HeaderSignature, "s"), HeaderRunner, false, Signature{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseSignature(tc.h, tc.caller)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestSignedMessage(t *testing.T) {
	body := []byte(`{"a":1}`)
	sum := sha256.Sum256(body)
	want := "byollm/v1/request\nclaim\nrunner-1\n1700000000000\n" + hex.EncodeToString(sum[:])
	require.Equal(t, want, string(SignedMessage("claim", "runner-1", 1_700_000_000_000, body)))

	require.Equal(t, "byollm/v1/request\nsite/pending\nsite-1\n5\n"+EmptyBodyDigest,
		string(SignedMessage("site/pending", "site-1", 5, nil)))
	empty := sha256.Sum256(nil)
	require.Equal(t, hex.EncodeToString(empty[:]), EmptyBodyDigest)
}

func TestVerify(t *testing.T) {
	id, priv := newIdentity(7)
	_, otherPriv := newIdentity(8)
	const now = int64(1_700_000_000_000)
	body := []byte(`{"protocolVersion":"0"}`)

	sign := func(key ed25519.PrivateKey, endpoint string, issuedAt int64, body []byte) Signature {
		h := http.Header{}
		SignRequest(h, HeaderRunner, key, endpoint, "runner-1", issuedAt, body)
		sig, ok := ParseSignature(h, HeaderRunner)
		require.True(t, ok)
		return sig
	}

	cases := []struct {
		name     string
		sig      Signature
		endpoint string
		body     []byte
		key      string
		want     Verdict
	}{
		{"valid", sign(priv, "claim", now, body), "claim", body, id.Identity, Valid},
		{"exactly the skew behind", sign(priv, "claim", now-MaxClockSkewMs, body), "claim", body, id.Identity, Valid},
		{"exactly the skew ahead", sign(priv, "claim", now+MaxClockSkewMs, body), "claim", body, id.Identity, Valid},
		{"one ms too old", sign(priv, "claim", now-MaxClockSkewMs-1, body), "claim", body, id.Identity, Stale},
		{"one ms too new", sign(priv, "claim", now+MaxClockSkewMs+1, body), "claim", body, id.Identity, Stale},
		{"stale is checked before the key", sign(otherPriv, "claim", now-MaxClockSkewMs-1, body), "claim", body, id.Identity, Stale},
		{"stale with a malformed key", sign(priv, "claim", now+MaxClockSkewMs+1, body), "claim", body, "!!", Stale},
		{"signed by another key", sign(otherPriv, "claim", now, body), "claim", body, id.Identity, BadSignature},
		{"wrong endpoint", sign(priv, "claim", now, body), "fetch", body, id.Identity, BadSignature},
		{"daemon signature on the site plane", sign(priv, "claim", now, body), "site/claim", body, id.Identity, BadSignature},
		{"pending signature on results", sign(priv, "site/pending", now, nil), "site/results", nil, id.Identity, BadSignature},
		{"wrong body", sign(priv, "claim", now, body), "claim", []byte(`{"protocolVersion":"1"}`), id.Identity, BadSignature},
		{"body with a BOM", sign(priv, "claim", now, body), "claim", append([]byte("\xEF\xBB\xBF"), body...), id.Identity, BadSignature},
		{"malformed key", sign(priv, "claim", now, body), "claim", body, "!!", BadSignature},
		{"empty body signed and checked", sign(priv, "site/pending", now, nil), "site/pending", []byte{}, id.Identity, Valid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Verify(tc.sig, tc.endpoint, tc.body, tc.key, now))
		})
	}

	t.Run("other caller id", func(t *testing.T) {
		sig := sign(priv, "claim", now, body)
		sig.CallerID = "runner-2"
		require.Equal(t, BadSignature, Verify(sig, "claim", body, id.Identity, now))
	})
	t.Run("other issuedAt", func(t *testing.T) {
		sig := sign(priv, "claim", now, body)
		sig.IssuedAt++
		require.Equal(t, BadSignature, Verify(sig, "claim", body, id.Identity, now))
	})
	t.Run("zero-padded issuedAt verifies against the parsed number", func(t *testing.T) {
		h := http.Header{}
		SignRequest(h, HeaderRunner, priv, "claim", "runner-1", now, body)
		h.Set(HeaderIssuedAt, "000"+h.Get(HeaderIssuedAt))
		sig, ok := ParseSignature(h, HeaderRunner)
		require.True(t, ok)
		require.Equal(t, Valid, Verify(sig, "claim", body, id.Identity, now))
	})
}

func TestSignRequestHeaders(t *testing.T) {
	_, priv := newIdentity(9)
	h := http.Header{}
	SignRequest(h, HeaderSite, priv, "site/enqueue", "site-1", 42, []byte("{}"))
	require.Equal(t, "site-1", h.Get("x-byollm-site"))
	require.Equal(t, "42", h.Get("x-byollm-issued-at"))
	sig, err := DecodeKey(h.Get("x-byollm-signature"))
	require.NoError(t, err)
	require.Len(t, sig, ed25519.SignatureSize)
	require.Empty(t, h.Get(HeaderRunner))
}
