// Package pairing holds the rules of protocol "2"'s device-code pairing
// (spec §5) as pure functions and types: the formats of user codes and
// device codes and their generation from a caller's random source, how a
// typed user code is normalised, how long a code lives and how often a
// daemon polls, and what the approving side may learn of a pending code
// (Details). It stores nothing and speaks no HTTP: the pending codes and
// the rules of their capacity and expiry are store.Pairings', and the
// daemon plane builds on both.
//
// It also holds the approval writer of decision P2-D3 (Approve): with no
// control plane, an operator approves a pending device by adding it to the
// fixture file, which every replica already watches.
package pairing

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// UserCodeAlphabet is Crockford's base32 alphabet without I, L, O and U,
// the characters a user code is made of.
const UserCodeAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// Code sizes.
const (
	// userCodeChars random characters make a user code, grouped 4-4.
	userCodeChars = 8
	// UserCodeLength is a user code's length, dash included: XXXX-XXXX.
	UserCodeLength = userCodeChars + 1
	// DeviceCodeBytes random bytes make a device code.
	DeviceCodeBytes = 32
	// DeviceCodeLength is a device code's length: 32 bytes in unpadded
	// base64url.
	DeviceCodeLength = 43
)

// Codes is the pair of codes one device-code start hands out: the secret
// the daemon polls with, and the short code its user reads out.
type Codes struct {
	DeviceCode string
	UserCode   string
}

// NewCodes draws a device code and then a user code from random, in that
// order (the reference's), so a test with a fixed source knows both.
// Production callers pass crypto/rand.Reader.
func NewCodes(random io.Reader) (Codes, error) {
	device, err := NewDeviceCode(random)
	if err != nil {
		return Codes{}, err
	}
	user, err := NewUserCode(random)
	if err != nil {
		return Codes{}, err
	}
	return Codes{DeviceCode: device, UserCode: user}, nil
}

// NewDeviceCode draws DeviceCodeBytes bytes from random and returns them
// in unpadded base64url.
func NewDeviceCode(random io.Reader) (string, error) {
	var b [DeviceCodeBytes]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", fmt.Errorf("pairing: draw a device code: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// NewUserCode draws 8 bytes from random and maps each to
// UserCodeAlphabet[b % 32], which is uniform because 32 divides 256, then
// groups them as XXXX-XXXX. Like the reference it checks nothing for
// collisions: 32^8 codes live for ten minutes each.
func NewUserCode(random io.Reader) (string, error) {
	var b [userCodeChars]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", fmt.Errorf("pairing: draw a user code: %w", err)
	}
	var sb strings.Builder
	for i, x := range b {
		if i == userCodeChars/2 {
			sb.WriteByte('-')
		}
		sb.WriteByte(UserCodeAlphabet[int(x)%len(UserCodeAlphabet)])
	}
	return sb.String(), nil
}

// NormalizeUserCode turns what a user typed into the form codes are stored
// in, as the reference's lookup does: JavaScript's trim, then JavaScript's
// toUpperCase. The result is compared exactly, dash included; nothing else
// (inner spaces, a missing dash, O for 0) is forgiven, because the
// reference forgives nothing else either.
func NormalizeUserCode(typed string) string {
	trimmed := strings.TrimFunc(typed, isJSWhitespace)
	var sb strings.Builder
	sb.Grow(len(trimmed))
	for _, r := range trimmed {
		if expansion, ok := specialUpper[r]; ok {
			sb.WriteString(expansion)
			continue
		}
		sb.WriteRune(unicode.ToUpper(r))
	}
	return sb.String()
}

// specialUpper lists the characters whose JavaScript upper case is longer
// than one character and entirely ASCII, which Go's unicode.ToUpper leaves
// alone. Only ASCII results can ever match a user code, so the others
// (such as U+0149) need not be expanded to refuse the same inputs.
var specialUpper = map[rune]string{
	'\u00DF': "SS",  // ß
	'\uFB00': "FF",  // ﬀ
	'\uFB01': "FI",  // ﬁ
	'\uFB02': "FL",  // ﬂ
	'\uFB03': "FFI", // ﬃ
	'\uFB04': "FFL", // ﬄ
	'\uFB05': "ST",  // ﬅ
	'\uFB06': "ST",  // ﬆ
}

// isJSWhitespace is JavaScript's WhiteSpace or LineTerminator, what
// String.prototype.trim removes. It differs from unicode.IsSpace in two
// places: U+FEFF is JavaScript whitespace and U+0085 is not.
func isJSWhitespace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', '\u00A0', '\u1680', '\u2028', '\u2029', '\u202F', '\u205F', '\u3000', '\uFEFF':
		return true
	}
	return r >= '\u2000' && r <= '\u200A'
}

// ErrMalformedUserCode is what ParseUserCode returns for text that cannot
// be any user code.
var ErrMalformedUserCode = errors.New("pairing: not a user code (expected XXXX-XXXX from " + UserCodeAlphabet + ")")

// ValidUserCode reports whether code is a user code exactly as generated:
// four alphabet characters, a dash, four more.
func ValidUserCode(code string) bool {
	if len(code) != UserCodeLength {
		return false
	}
	for i := 0; i < len(code); i++ {
		if i == userCodeChars/2 {
			if code[i] != '-' {
				return false
			}
			continue
		}
		if strings.IndexByte(UserCodeAlphabet, code[i]) < 0 {
			return false
		}
	}
	return true
}

// ParseUserCode normalises typed (NormalizeUserCode) and checks the result
// is well-formed, so an approving tool can tell a typo from an unknown or
// expired code. Looking a malformed code up would find nothing anyway.
func ParseUserCode(typed string) (string, error) {
	code := NormalizeUserCode(typed)
	if !ValidUserCode(code) {
		return "", ErrMalformedUserCode
	}
	return code, nil
}
