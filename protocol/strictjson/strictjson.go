// Package strictjson parses JSON the way relayd wants to read request
// bodies: into a plain tree, refusing anything another parser could read
// differently. On top of RFC 8259 it refuses a leading byte order mark,
// invalid UTF-8 anywhere, a key repeated in one object, unpaired surrogate
// escapes, nesting deeper than MaxDepth and anything after the value.
// Numbers are kept as the literal text the sender wrote, so callers decide
// how to read them.
//
// A tree costs far more memory than its text (a two-byte "0," becomes a
// Value of some seventy bytes), so ParseWith can also cap how many values
// a document may hold, and stops reading as soon as it has seen more.
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects Parse accepts. The
// top-level object or array is depth 1. No request schema needs more than 3.
const MaxDepth = 32

// Why a document was refused. Parse wraps one of these in an *Error.
var (
	ErrEmpty        = errors.New("empty document")
	ErrBOM          = errors.New("leading byte order mark")
	ErrInvalidUTF8  = errors.New("invalid UTF-8")
	ErrSyntax       = errors.New("invalid JSON")
	ErrSurrogate    = errors.New("unpaired surrogate escape")
	ErrDuplicateKey = errors.New("duplicate key")
	ErrTooDeep      = errors.New("nesting too deep")
	ErrTrailingData = errors.New("data after the JSON value")
	ErrTooMany      = errors.New("too many values")
)

// Options tightens what Parse accepts. The zero Options adds nothing.
type Options struct {
	// MaxValues caps how many values the document may hold, counting every
	// scalar, array and object at any depth (keys are not values). Zero
	// means no cap.
	MaxValues int
}

// Error is a refusal by Parse: what went wrong and the byte offset where it
// was noticed.
type Error struct {
	Offset int
	Err    error
	Detail string
}

// Error describes the refusal briefly. Detail never quotes more than a
// short piece of the input.
func (e *Error) Error() string {
	msg := fmt.Sprintf("strictjson: offset %d: %v", e.Offset, e.Err)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the sentinel (ErrSyntax, ErrDuplicateKey, ...).
func (e *Error) Unwrap() error { return e.Err }

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON types.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

var kindNames = [...]string{"null", "boolean", "number", "string", "array", "object"}

// String names the kind as JSON does ("null", "boolean", "number", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one parsed JSON value. Which fields are set depends on Kind.
type Value struct {
	Kind Kind
	// Bool is the value of a Bool.
	Bool bool
	// Text is the decoded value of a String, or the literal of a Number
	// exactly as written (for example "2.0" or "1e1").
	Text string
	// Items are the elements of an Array.
	Items []Value
	// Members are the members of an Object in document order. Keys are
	// unique: Parse refuses repeats.
	Members []Member
}

// Member is one key and value of an object.
type Member struct {
	Key   string
	Value Value
}

// Get returns the member of an object with the given key. It reports false
// when v is not an object or has no such key.
func (v Value) Get(key string) (Value, bool) {
	for _, m := range v.Members {
		if m.Key == key {
			return m.Value, true
		}
	}
	return Value{}, false
}

// Parse parses one JSON document. It refuses an empty document, a leading
// byte order mark, invalid UTF-8, repeated keys, unpaired surrogate escapes,
// nesting deeper than MaxDepth and trailing data; the error is an *Error
// wrapping one of the Err sentinels.
func Parse(data []byte) (Value, error) { return ParseWith(data, Options{}) }

// ParseWith is Parse under opts: a document with more than opts.MaxValues
// values is refused with ErrTooMany, before the rest of it is read.
func ParseWith(data []byte, opts Options) (Value, error) {
	if len(data) == 0 {
		return Value{}, &Error{Err: ErrEmpty}
	}
	// A decoder that strips the mark would hash and read a different text
	// than the bytes on the wire; refuse instead of guessing.
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		return Value{}, &Error{Err: ErrBOM}
	}
	if !utf8.Valid(data) {
		return Value{}, &Error{Offset: firstInvalidUTF8(data), Err: ErrInvalidUTF8}
	}
	p := parser{data: data, budget: opts.MaxValues, limited: opts.MaxValues > 0}
	p.skipSpace()
	if p.pos == len(data) {
		return Value{}, p.fail(ErrSyntax, "no value")
	}
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos != len(data) {
		return Value{}, p.fail(ErrTrailingData, "")
	}
	return v, nil
}

func firstInvalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(data)
}

// parser is a recursive-descent reader over input already known to be
// valid UTF-8. Recursion is bounded by MaxDepth.
type parser struct {
	data []byte
	pos  int
	// budget is how many more values may be read; counted only when the
	// caller set a cap (limited).
	budget  int
	limited bool
}

func (p *parser) fail(err error, detail string) *Error {
	return &Error{Offset: p.pos, Err: err, Detail: detail}
}

// skipSpace skips the four whitespace bytes JSON allows, no others.
func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses the value at p.pos; depth is the number of containers
// already open around it.
func (p *parser) value(depth int) (Value, error) {
	if p.pos >= len(p.data) {
		return Value{}, p.fail(ErrSyntax, "unexpected end")
	}
	if p.limited {
		if p.budget == 0 {
			return Value{}, p.fail(ErrTooMany, "")
		}
		p.budget--
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: String, Text: s}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true", Value{Kind: Bool, Bool: true})
	case c == 'f':
		return p.literal("false", Value{Kind: Bool})
	case c == 'n':
		return p.literal("null", Value{Kind: Null})
	default:
		return Value{}, p.fail(ErrSyntax, "unexpected character")
	}
}

func (p *parser) literal(word string, v Value) (Value, error) {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return Value{}, p.fail(ErrSyntax, "unexpected character")
	}
	p.pos += len(word)
	return v, nil
}

// items reads an object or array at depth from its opening bracket to
// closing, calling item for each member or element.
func (p *parser) items(depth int, closing byte, item func() error) error {
	if depth > MaxDepth {
		return p.fail(ErrTooDeep, "")
	}
	p.pos++
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == closing {
		p.pos++
		return nil
	}
	for {
		p.skipSpace()
		if err := item(); err != nil {
			return err
		}
		done, err := p.afterItem(closing)
		if err != nil || done {
			return err
		}
	}
}

func (p *parser) object(depth int) (Value, error) {
	v := Value{Kind: Object, Members: []Member{}}
	// A map keeps the duplicate check linear however many keys arrive.
	seen := make(map[string]struct{})
	err := p.items(depth, '}', func() error {
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return p.fail(ErrSyntax, "expected a string key")
		}
		keyAt := p.pos
		key, err := p.str()
		if err != nil {
			return err
		}
		// Keys compare after unescaping: "a" and "\u0061" are one key.
		if _, dup := seen[key]; dup {
			return &Error{Offset: keyAt, Err: ErrDuplicateKey, Detail: QuoteShort(key)}
		}
		seen[key] = struct{}{}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return p.fail(ErrSyntax, "expected ':'")
		}
		p.pos++
		p.skipSpace()
		member, err := p.value(depth)
		if err != nil {
			return err
		}
		v.Members = append(v.Members, Member{Key: key, Value: member})
		return nil
	})
	if err != nil {
		return Value{}, err
	}
	return v, nil
}

func (p *parser) array(depth int) (Value, error) {
	v := Value{Kind: Array, Items: []Value{}}
	err := p.items(depth, ']', func() error {
		item, err := p.value(depth)
		if err != nil {
			return err
		}
		v.Items = append(v.Items, item)
		return nil
	})
	if err != nil {
		return Value{}, err
	}
	return v, nil
}

// afterItem reads what follows a member or an item: a ',' before another,
// or the closing bracket, which ends the object or array (done).
func (p *parser) afterItem(closing byte) (done bool, err error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return false, p.fail(ErrSyntax, "unexpected end")
	}
	switch p.data[p.pos] {
	case ',':
		p.pos++
		return false, nil
	case closing:
		p.pos++
		return true, nil
	}
	return false, p.fail(ErrSyntax, "expected ',' or '"+string(closing)+"'")
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and keeps
// the literal.
func (p *parser) number() (Value, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case p.digits() == 0:
		return Value{}, p.fail(ErrSyntax, "malformed number")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return Value{}, p.fail(ErrSyntax, "malformed number")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return Value{}, p.fail(ErrSyntax, "malformed number")
		}
	}
	return Value{Kind: Number, Text: string(p.data[start:p.pos])}, nil
}

func (p *parser) digits() int {
	n := 0
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}

// str reads a string starting at the opening quote and returns its decoded
// value.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes, the value is the bytes as they stand.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := string(p.data[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail(ErrSyntax, "control character in string")
		}
		p.pos++
	}
	var sb strings.Builder
	sb.Write(p.data[start:p.pos])
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return sb.String(), nil
		case c < 0x20:
			return "", p.fail(ErrSyntax, "control character in string")
		case c != '\\':
			sb.WriteByte(c)
			p.pos++
			continue
		}
		// An escape.
		if p.pos+1 >= len(p.data) {
			break
		}
		esc := p.data[p.pos+1]
		p.pos += 2
		switch esc {
		case '"', '\\', '/':
			sb.WriteByte(esc)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, err := p.unicodeEscape()
			if err != nil {
				return "", err
			}
			sb.WriteRune(r)
		default:
			p.pos -= 2
			return "", p.fail(ErrSyntax, "invalid escape")
		}
	}
	return "", p.fail(ErrSyntax, "unterminated string")
}

// unicodeEscape reads the hex digits after "\u" (already consumed), and a
// second escape when the first is a high surrogate. A surrogate without its
// partner has no UTF-8 form: a Go string would hold U+FFFD where a
// JavaScript string holds the lone half, so it is refused.
func (p *parser) unicodeEscape() (rune, error) {
	at := p.pos - 2
	r1, ok := p.hex4()
	if !ok {
		return 0, p.fail(ErrSyntax, "invalid \\u escape")
	}
	if !utf16.IsSurrogate(r1) {
		return r1, nil
	}
	if r1 >= 0xDC00 || p.pos+2 > len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
		return 0, &Error{Offset: at, Err: ErrSurrogate}
	}
	p.pos += 2
	r2, ok := p.hex4()
	if !ok {
		return 0, p.fail(ErrSyntax, "invalid \\u escape")
	}
	r := utf16.DecodeRune(r1, r2)
	if r == utf8.RuneError {
		return 0, &Error{Offset: at, Err: ErrSurrogate}
	}
	return r, nil
}

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	p.pos += 4
	return r, true
}

// QuoteShort quotes s for an error detail, cut to a readable length (on a
// rune boundary) so a hostile key or value cannot flood the logs.
func QuoteShort(s string) string {
	const limit = 40
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

// maxSafeInteger is 2^53−1, JavaScript's Number.MAX_SAFE_INTEGER.
const maxSafeInteger = 1<<53 - 1

// SafeInteger reads a Number the way a zod `.int()` schema reads what
// JSON.parse made of it: the literal rounds to the nearest float64 (as
// JavaScript rounds it), and counts only when that is finite, integral and
// within ±(2^53−1). So "2.0" and "1e1" are integers, "1.5" and
// "9007199254740993" are not. It reports false for any other kind.
func (v Value) SafeInteger() (int64, bool) {
	if v.Kind != Number {
		return 0, false
	}
	// A literal the grammar accepted fails to parse only by overflowing to
	// ±Inf, which is not finite either way; underflow rounds to zero.
	f, err := strconv.ParseFloat(v.Text, 64)
	if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) {
		return 0, false
	}
	if f > maxSafeInteger || f < -maxSafeInteger {
		return 0, false
	}
	return int64(f), true
}
