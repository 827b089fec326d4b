package protocol

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
)

// Signature header names. The caller header differs by plane.
const (
	HeaderRunner    = "X-Byollm-Runner"
	HeaderSite      = "X-Byollm-Site"
	HeaderIssuedAt  = "X-Byollm-Issued-At"
	HeaderSignature = "X-Byollm-Signature"
)

// Signature is a parsed request signature.
type Signature struct {
	CallerID  string
	IssuedAt  int64
	Signature string
}

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER, the bound the
// reference puts on issuedAt.
const maxSafeInteger = 1<<53 - 1

// ParseSignature reads the three signature headers of a request. callerHeader
// is HeaderRunner or HeaderSite. It returns false when the request counts as
// unsigned: a header is missing or empty, or issuedAt is not a positive safe
// integer written in decimal digits (relayd accepts no other number forms, RB-G17).
func ParseSignature(h http.Header, callerHeader string) (Signature, bool) {
	caller := joinedHeader(h, callerHeader)
	issued := joinedHeader(h, HeaderIssuedAt)
	sig := joinedHeader(h, HeaderSignature)
	if caller == "" || issued == "" || sig == "" {
		return Signature{}, false
	}
	at, ok := parseIssuedAt(issued)
	if !ok {
		return Signature{}, false
	}
	return Signature{CallerID: caller, IssuedAt: at, Signature: sig}, true
}

// joinedHeader reads a header the way the Fetch API does: repeated values
// joined with ", ". One join, not repeated concatenation, so that thousands
// of repeats cost linear time.
func joinedHeader(h http.Header, name string) string {
	return strings.Join(h.Values(name), ", ")
}

// parseIssuedAt accepts decimal digits only. Leading zeros are allowed, as
// JavaScript's Number() allows them, so no length cap: ParseInt refuses
// overflow itself.
func parseIssuedAt(s string) (int64, bool) {
	if len(s) == 0 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > maxSafeInteger {
		return 0, false
	}
	return n, true
}

// EmptyBodyDigest is the SHA-256 of an empty body, what reads sign.
const EmptyBodyDigest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// SignedMessage is the exact byte string a request signature covers.
// endpoint is the daemon endpoint name or "site/"+name on the site plane.
func SignedMessage(endpoint, callerID string, issuedAt int64, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte("byollm/v1/request\n" + endpoint + "\n" + callerID + "\n" +
		strconv.FormatInt(issuedAt, 10) + "\n" + hex.EncodeToString(sum[:]))
}

// Verdict is the outcome of verifying a request signature.
type Verdict int

// Verdicts, in the order they are checked: freshness before the key.
const (
	Valid Verdict = iota
	Stale
	BadSignature
)

// Verify checks freshness against nowMs and then the signature against the
// caller's base64url Ed25519 identity key.
func Verify(sig Signature, endpoint string, body []byte, identityKey string, nowMs int64) Verdict {
	skew := nowMs - sig.IssuedAt
	if skew > MaxClockSkewMs || skew < -MaxClockSkewMs {
		return Stale
	}
	if !VerifyEd25519(identityKey, SignedMessage(endpoint, sig.CallerID, sig.IssuedAt, body), sig.Signature) {
		return BadSignature
	}
	return Valid
}

// SignRequest sets the three signature headers on h for a request signed by
// key. Clients use it; the relay never holds a private key.
func SignRequest(h http.Header, callerHeader string, key ed25519.PrivateKey, endpoint, callerID string, issuedAt int64, body []byte) {
	sig := ed25519.Sign(key, SignedMessage(endpoint, callerID, issuedAt, body))
	h.Set(callerHeader, callerID)
	h.Set(HeaderIssuedAt, strconv.FormatInt(issuedAt, 10))
	h.Set(HeaderSignature, EncodeKey(sig))
}
