package admission

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// grantContext is the domain separator every grant statement starts with
// (protocol/grant.ts GRANT_CONTEXT), so that the bytes of a grant can never
// verify as any other kind of statement.
const grantContext = "byollm/v1/grant"

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER, the largest
// issuedAt the daemon's schema accepts.
const maxSafeInteger = 1<<53 - 1

// Claims is everything a signed grant says, before it is signed: the
// reference's GrantClaims (protocol/grant.ts:105-177, spec grants.md G-R27).
type Claims struct {
	GrantID  string
	JobID    string
	Site     string // the stub's site key id, verbatim
	User     string // the job's owner
	Owner    string // the device's owner
	Purpose  string // the stub's purpose, "default" when it has none
	Kind     string
	Service  string // the service the device must run it on
	IssuedAt int64  // epoch milliseconds on the relay clock
}

// ErrInvalidClaims is returned for claims no daemon would accept: an empty
// field, text that is not valid UTF-8, or an issuedAt that is not a
// positive safe integer.
var ErrInvalidClaims = errors.New("admission: invalid grant claims")

// errKeyUnavailable is a device enrolled with a key this replica lacks.
var errKeyUnavailable = errors.New("admission: the device's grant key is not in this replica's key ring")

// Validate checks what the daemon's strict SignedGrant schema requires of
// every field (G-R27).
func (c Claims) Validate() error {
	var errs []error
	for _, f := range c.fields() {
		switch {
		case f.value == "":
			errs = append(errs, fmt.Errorf("%w: %s is empty", ErrInvalidClaims, f.name))
		case !utf8.ValidString(f.value):
			errs = append(errs, fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidClaims, f.name))
		}
	}
	if c.IssuedAt < 1 || c.IssuedAt > maxSafeInteger {
		errs = append(errs, fmt.Errorf("%w: issuedAt %d is not a positive safe integer", ErrInvalidClaims, c.IssuedAt))
	}
	return errors.Join(errs...)
}

type field struct{ name, value string }

// fields lists the string claims in sorted key order, the order of the
// signed bytes; issuedAt goes between grantId and jobId.
func (c Claims) fields() []field {
	return []field{
		{"grantId", c.GrantID}, {"jobId", c.JobID}, {"kind", c.Kind}, {"owner", c.Owner},
		{"purpose", c.Purpose}, {"service", c.Service}, {"site", c.Site}, {"user", c.User},
	}
}

// Statement returns the exact bytes a grant's signature covers (G-R28): the
// UTF-8 of the JSON array of the context string and the nine claims in
// sorted key order, strings encoded exactly as JavaScript's JSON.stringify
// encodes them and issuedAt as a bare decimal.
func Statement(c Claims) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 256)
	b = append(b, '[')
	b = appendJSString(b, grantContext)
	for i, f := range c.fields() {
		b = append(b, ',')
		b = appendJSString(b, f.value)
		if i == 0 { // issuedAt sorts right after grantId
			b = append(b, ',')
			b = strconv.AppendInt(b, c.IssuedAt, 10)
		}
	}
	return append(b, ']'), nil
}

// appendJSString appends s as JSON.stringify writes a string
// (ECMA-262 QuoteJSONString): the quote and the backslash escaped, the five
// controls with short escapes as such, every other control below U+0020 as
// \u00xx in lowercase hex, and everything else raw. encoding/json is not
// this encoder: it escapes U+2028, U+2029 and, by default, < > &. s must be
// valid UTF-8 (Validate checks it), so no lone surrogate can occur.
func appendJSString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				b = append(b, c)
			}
		}
	}
	return append(b, '"')
}
