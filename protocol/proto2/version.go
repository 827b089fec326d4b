package proto2

import (
	"errors"
	"strings"
	"unicode/utf16"

	"github.com/byollm/relayd/protocol/strictjson"
)

// DeclKind says what a request declared about its protocol version.
type DeclKind int

// The kinds of declaration (§2.1.3, §2.4.1).
const (
	// Undeclared: no protocolVersion key in the body and no
	// ?protocolVersion= in the query.
	Undeclared DeclKind = iota
	// Declared: a non-empty string, in Declaration.Version.
	Declared
	// NotAString: a protocolVersion that is present but is not a non-empty
	// string (a number, null, "", …). The reference answers it exactly as
	// it answers no version at all.
	NotAString
	// Unreadable: the body is JSON the reference would read but relayd
	// refuses to (invalid UTF-8, a repeated key, a lone surrogate, a byte
	// order mark, too deep or too many values; design RB-A0.3, RB-A0.4). It
	// declares nothing relayd trusts, so the query is not asked either: the
	// codec serving it refuses it with its schema answer after
	// authentication, as "0" does today.
	Unreadable
)

// Declaration is the version a request declared.
type Declaration struct {
	Kind DeclKind
	// Version is the declared string when Kind is Declared.
	Version string
}

// DeclaredVersion reads the version a POST declares, as the reference's
// declaredVersion does: the body's own protocolVersion when the body is a
// JSON object with that key, whatever the value's type; otherwise the first
// protocolVersion query parameter, for POST as well as GET; otherwise none.
// A body that is empty or not JSON counts as no body. rawQuery is the URL's
// query without the '?'. Pass a nil body for a GET, whose body the
// reference never reads.
func (dec Decoder) DeclaredVersion(body []byte, rawQuery string) Declaration {
	if len(body) > 0 {
		limits := dec.Limits.withDefaults()
		v, err := strictjson.ParseWith(body, strictjson.Options{MaxValues: limits.MaxValues()})
		switch {
		case err != nil && readableByReference(err):
			return Declaration{Kind: Unreadable}
		case err == nil && v.Kind == strictjson.Object:
			if pv, ok := v.Get("protocolVersion"); ok {
				return declaration(pv.Kind == strictjson.String, pv.Text)
			}
		}
	}
	return QueryDeclaredVersion(rawQuery)
}

// DeclaredVersion is Decoder.DeclaredVersion under the default limits.
func DeclaredVersion(body []byte, rawQuery string) Declaration {
	return Decoder{}.DeclaredVersion(body, rawQuery)
}

// QueryDeclaredVersion reads the version a site-plane GET declares: the
// first ?protocolVersion= value, percent-decoded as URLSearchParams does
// (bytes that are not UTF-8 become U+FFFD).
func QueryDeclaredVersion(rawQuery string) Declaration {
	v, ok := FirstQueryValue(rawQuery, "protocolVersion")
	if !ok {
		return Declaration{Kind: Undeclared}
	}
	return declaration(true, strings.ToValidUTF8(v, "\uFFFD"))
}

func declaration(isString bool, s string) Declaration {
	if !isString || s == "" {
		return Declaration{Kind: NotAString}
	}
	return Declaration{Kind: Declared, Version: s}
}

// readableByReference tells the strict parser's refusals that JSON.parse
// would have accepted (so the body had a meaning relayd declines to read)
// from those it refuses too (so the body is no body).
func readableByReference(err error) bool {
	return !errors.Is(err, strictjson.ErrEmpty) && !errors.Is(err, strictjson.ErrSyntax) &&
		!errors.Is(err, strictjson.ErrTrailingData)
}

// FirstQueryValue returns the first value of name in rawQuery, both
// percent-decoded as URLSearchParams decodes them: '+' is a space, a '%'
// not followed by two hex digits stays as it is, and ';' is an ordinary
// character (Go's url.ParseQuery would drop such a pair). The value is the
// decoded bytes, which may not be valid UTF-8.
func FirstQueryValue(rawQuery, name string) (string, bool) {
	for pair := range strings.SplitSeq(rawQuery, "&") {
		if pair == "" {
			continue
		}
		key, value, _ := strings.Cut(pair, "=")
		if percentDecode(key) == name {
			return percentDecode(value), true
		}
	}
	return "", false
}

func percentDecode(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// jsLess is JavaScript's a < b for strings: by UTF-16 code units.
func jsLess(a, b string) bool {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}
