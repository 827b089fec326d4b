package admission

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func mustStdBase64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

// vector1 and vector2 are grants.md G-R28's golden vectors, each signed by
// @byollm/protocol 0.1.1's signGrant with the seed key.
var (
	vector1 = Claims{
		GrantID: "grant_00000000-0000-4000-8000-000000000000", JobID: "job_1", Site: "BYOLLM-SITE-KEY-ID",
		User: "alice", Owner: "bob", Purpose: "default", Kind: "llm.generate", Service: "echo", IssuedAt: 1800000000000,
	}
	vector2 = Claims{
		GrantID: "grant_x", IssuedAt: 1,
		JobID: "j<>&\u2028\u2029\u0001\u0008\u000c\u007f\"\\/é\U0001F600",
		User:  "al\nice", Owner: "bob\t", Purpose: "summarise", Kind: "llm.chat", Service: "qwen", Site: "BYOLLM-SITE-KEY-ID",
	}
)

func TestGoldenVectorStatements(t *testing.T) {
	got, err := Statement(vector1)
	require.NoError(t, err)
	require.Equal(t, `["byollm/v1/grant","grant_00000000-0000-4000-8000-000000000000",1800000000000,"job_1","llm.generate","bob","default","echo","BYOLLM-SITE-KEY-ID","alice"]`, string(got))

	got, err = Statement(vector2)
	require.NoError(t, err)
	require.Equal(t, "5b2262796f6c6c6d2f76312f6772616e74222c226772616e745f78222c312c226a3c3e26e280a8e280a95c75303030315c625c667f5c225c5c2fc3a9f09f9880222c226c6c6d2e63686174222c22626f625c74222c2273756d6d6172697365222c227177656e222c2242594f4c4c4d2d534954452d4b45592d4944222c22616c5c6e696365225d", hex.EncodeToString(got))
}

func TestGoldenVectorSignatures(t *testing.T) {
	signer := seedSigner(t)
	require.Equal(t, seedPublic, signer.PublicKey())
	for want, claims := range map[string]Claims{
		"vpPZrE5ZM8g7wlHRlvm7gM6r9zwxO9aLpRIPdVGxo14rhPG17QlEm9BKPvbeVQNpvQWp7C3QoSgEWx4LqEesCw": vector1,
		"EP9RCfpLkgJyab-H7lChcwdc_bg2u5kwDFrB-ncwNWeNDslJTPrUmU1w5YJu0KefBSm8eKQMCatgvYJMpvkhAg": vector2,
	} {
		g, err := Sign(context.Background(), signer, claims)
		require.NoError(t, err)
		require.Equal(t, want, g.Signature)
		require.Len(t, g.Signature, 86)
		require.Equal(t, claims, ClaimsOf(g))
		require.True(t, Verify(seedPublic, g))
	}
}

// encoding/json is not JSON.stringify: the second vector is exactly the
// input on which it would sign other bytes, which the device refuses.
func TestEncodingJSONWouldSignOtherBytes(t *testing.T) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(vector2.JobID))
	require.NotEqual(t, string(appendJSString(nil, vector2.JobID)), strings.TrimSuffix(b.String(), "\n"))
}

func TestStatementRefusesWhatNoDaemonAccepts(t *testing.T) {
	for name, mutate := range map[string]func(*Claims){
		"empty grantId":     func(c *Claims) { c.GrantID = "" },
		"empty service":     func(c *Claims) { c.Service = "" },
		"invalid UTF-8":     func(c *Claims) { c.User = "al\xffice" },
		"zero issuedAt":     func(c *Claims) { c.IssuedAt = 0 },
		"unsafe issuedAt":   func(c *Claims) { c.IssuedAt = 1 << 53 },
		"negative issuedAt": func(c *Claims) { c.IssuedAt = -5 },
	} {
		t.Run(name, func(t *testing.T) {
			c := vector1
			mutate(&c)
			_, err := Statement(c)
			require.ErrorIs(t, err, ErrInvalidClaims)
			_, err = Sign(context.Background(), seedSigner(t), c)
			require.ErrorIs(t, err, ErrInvalidClaims)
		})
	}
}

func TestVerifyRefusesEveryChangedClaim(t *testing.T) {
	g, err := Sign(context.Background(), seedSigner(t), vector1)
	require.NoError(t, err)
	tampered := g
	tampered.Service = "other"
	require.False(t, Verify(seedPublic, tampered))
	tampered = g
	tampered.IssuedAt++
	require.False(t, Verify(seedPublic, tampered))
	other := newKeySigner(mustKey(t, 7))
	require.False(t, Verify(other.PublicKey(), g), "another key")
}

// quoteJSONString is ECMA-262's QuoteJSONString written from the standard,
// code unit by code unit, as the oracle of the encoder: a second reading
// of the same rules that shares no code with appendJSString.
func quoteJSONString(s string) string {
	short := map[uint16]string{0x08: `\b`, 0x09: `\t`, 0x0a: `\n`, 0x0c: `\f`, 0x0d: `\r`, 0x22: `\"`, 0x5c: `\\`}
	var out []uint16
	for _, c := range utf16.Encode([]rune(s)) {
		if e, ok := short[c]; ok {
			out = append(out, utf16.Encode([]rune(e))...)
			continue
		}
		if c < 0x20 {
			out = append(out, utf16.Encode([]rune(`\u00`+hex.EncodeToString([]byte{byte(c)})))...)
			continue
		}
		out = append(out, c)
	}
	return `"` + string(utf16.Decode(out)) + `"`
}

func TestEncoderMatchesQuoteJSONStringForEveryRuneClass(t *testing.T) {
	classes := []rune{0, 1, 7, 8, 9, 10, 11, 12, 13, 14, 0x1f, ' ', '!', '"', '/', '<', '>', '&', '\\', '~', 0x7f, 0x80, 0x9f, 0xa0, 0xe9, 0x7ff, 0x800,
		0x2028, 0x2029, 0xd7ff, 0xe000, 0xfeff, 0xfffd, 0xffff, 0x10000, 0x1f600, 0x10ffff}
	for _, r := range classes {
		s := "a" + string(r) + "b"
		require.Equal(t, quoteJSONString(s), string(appendJSString(nil, s)), "U+%04X", r)
	}
}

func FuzzEncoderMatchesQuoteJSONString(f *testing.F) {
	f.Add(vector2.JobID)
	f.Add("al\nice\t\u2028<>&\x00\x7f")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // Validate refuses it before the encoder runs
		}
		require.Equal(t, quoteJSONString(s), string(appendJSString(nil, s)))
	})
}
