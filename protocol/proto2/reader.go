package proto2

import (
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/strictjson"
)

// decoding is one strict reading of a parsed body against a schema. The
// first problem sticks: after it every read returns a zero value, so the
// decoders read as plain struct literals with no error check per field.
type decoding struct {
	schema string
	limits Limits
	err    *protocol.DecodeError
}

func (d *decoding) refuse(path string, err error) {
	if d.err == nil {
		d.err = &protocol.DecodeError{Schema: d.schema, Path: path, Err: err}
	}
}

// node is one value of the body, where it sits, and the reading it belongs
// to. A node whose key was missing (or whose reading already failed) is
// dead: every read on it is a no-op.
type node struct {
	d    *decoding
	v    strictjson.Value
	path string
	live bool
}

func (n node) failed() bool { return !n.live || n.d.err != nil }

func (n node) refuse(err error) { n.d.refuse(n.path, err) }

func (n node) wrongType(want string) {
	n.refuse(fmt.Errorf("%w: want %s, got %s", protocol.ErrWrongType, want, n.v.Kind))
}

// strict checks that n is an object holding no key outside keys (zod's
// .strict()) and returns it, or a dead node.
func (n node) strict(keys ...string) node {
	if n.failed() {
		return node{d: n.d, path: n.path}
	}
	if n.v.Kind != strictjson.Object {
		n.wrongType("object")
		return node{d: n.d, path: n.path}
	}
	for _, m := range n.v.Members {
		if !slices.Contains(keys, m.Key) {
			n.refuse(fmt.Errorf("%w: %s", protocol.ErrUnknownField, strictjson.QuoteShort(m.Key)))
			return node{d: n.d, path: n.path}
		}
	}
	return n
}

// has reports whether the object n holds key. An optional field that is
// present must be valid: JSON has no undefined, and null is not absent.
func (n node) has(key string) bool {
	if n.failed() {
		return false
	}
	_, ok := n.v.Get(key)
	return ok
}

// key is the member key of the object n; a missing one is refused.
func (n node) key(key string) node {
	child := node{d: n.d, path: joinPath(n.path, key)}
	if n.failed() {
		return child
	}
	v, ok := n.v.Get(key)
	if !ok {
		child.refuse(protocol.ErrMissingField)
		return child
	}
	child.v, child.live = v, true
	return child
}

// text is n as a string, empty or not.
func (n node) text() (string, bool) {
	if n.failed() {
		return "", false
	}
	if n.v.Kind != strictjson.String {
		n.wrongType("string")
		return "", false
	}
	return n.v.Text, true
}

// nonEmpty is n as a string of at least one character (zod .min(1)).
func (n node) nonEmpty() string { return n.sized(1, -1) }

// sized is n as a string whose length is at least lo and, unless hi is
// negative, at most hi. Lengths are Unicode code points, as the zod the
// published packages pin (4.6.7) measures them, not JavaScript's UTF-16
// units: "😀" is one character here.
func (n node) sized(lo, hi int) string {
	s, ok := n.text()
	if !ok {
		return ""
	}
	length := utf8.RuneCountInString(s)
	if length < lo || (hi >= 0 && length > hi) {
		if lo == 1 && length == 0 {
			n.refuse(protocol.ErrEmptyString)
		} else {
			n.refuse(fmt.Errorf("%w: %d characters, want %d..%d", protocol.ErrOutOfRange, length, lo, hi))
		}
		return ""
	}
	return s
}

// oneOf is n as one of allowed (a zod enum, or a literal when there is one).
func (n node) oneOf(allowed ...string) string {
	s, ok := n.text()
	if !ok {
		return ""
	}
	if !slices.Contains(allowed, s) {
		n.refuse(fmt.Errorf("%w: %s", protocol.ErrNotAllowed, strictjson.QuoteShort(s)))
		return ""
	}
	return s
}

// boolean is n as true or false.
func (n node) boolean() bool {
	if n.failed() {
		return false
	}
	if n.v.Kind != strictjson.Bool {
		n.wrongType("boolean")
		return false
	}
	return n.v.Bool
}

// integer is n as a safe integer within lo..hi (zod .int() with bounds).
func (n node) integer(lo, hi int64) int64 {
	if n.failed() {
		return 0
	}
	if n.v.Kind != strictjson.Number {
		n.wrongType("number")
		return 0
	}
	i, ok := n.v.SafeInteger()
	if !ok {
		n.refuse(fmt.Errorf("%w: %s", protocol.ErrNotInteger, strictjson.QuoteShort(n.v.Text)))
		return 0
	}
	if i < lo || i > hi {
		n.refuse(fmt.Errorf("%w: %d not in %d..%d", protocol.ErrOutOfRange, i, lo, hi))
		return 0
	}
	return i
}

// positive is n as a positive safe integer (zod .int().positive()).
func (n node) positive() int64 { return n.integer(1, maxSafeInteger) }

// items is n as an array of at least least items and at most the
// reading's MaxListItems, each a node of its own.
func (n node) items(least int) []node {
	if n.failed() {
		return nil
	}
	if n.v.Kind != strictjson.Array {
		n.wrongType("array")
		return nil
	}
	count := len(n.v.Items)
	if count > n.d.limits.MaxListItems {
		n.refuse(fmt.Errorf("%w: %d items, at most %d", protocol.ErrOverLimit, count, n.d.limits.MaxListItems))
		return nil
	}
	if count < least {
		n.refuse(fmt.Errorf("%w: %d items, at least %d", protocol.ErrOutOfRange, count, least))
		return nil
	}
	out := make([]node, count)
	for i, item := range n.v.Items {
		out[i] = node{d: n.d, v: item, path: n.path + "[" + strconv.Itoa(i) + "]", live: true}
	}
	return out
}

// each reads every item of the array n with read, stopping at the first
// refusal. The result is never nil, so an empty list encodes as [].
func each[T any](n node, least int, read func(node) T) []T {
	items := n.items(least)
	out := make([]T, 0, len(items))
	for _, item := range items {
		v := read(item)
		if n.d.err != nil {
			return out
		}
		out = append(out, v)
	}
	return out
}

// record reads the object n as a record of non-empty keys (zod
// z.record(z.string().min(1), …)), keeping the members' order.
func record[T any](n node, read func(node) T) Keyed[T] {
	if n.failed() {
		return nil
	}
	if n.v.Kind != strictjson.Object {
		n.wrongType("object")
		return nil
	}
	out := make(Keyed[T], 0, len(n.v.Members))
	for _, m := range n.v.Members {
		if m.Key == "" {
			n.refuse(fmt.Errorf("%w: a record key", protocol.ErrEmptyString))
			return nil
		}
		v := read(n.key(m.Key))
		if n.d.err != nil {
			return nil
		}
		out = append(out, Entry[T]{Key: m.Key, Value: v})
	}
	return out
}

// maxSafeInteger is 2^53−1, the largest integer zod's .int() accepts.
const maxSafeInteger = 1<<53 - 1

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
