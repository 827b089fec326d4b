package proto2

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Entry is one member of a Keyed object.
type Entry[T any] struct {
	Key   string
	Value T
}

// Keyed is a JSON object whose members keep the order they were added in,
// as a JavaScript object built by the reference does: the heartbeat's sites
// follow the sorted site ids while their keys are key ids, so a Go map's
// sorted keys would reorder them. Keys must be unique; encoding refuses a
// repeat rather than send a body relayd itself would refuse.
type Keyed[T any] []Entry[T]

// Get returns the value under key.
func (k Keyed[T]) Get(key string) (T, bool) {
	for _, e := range k {
		if e.Key == key {
			return e.Value, true
		}
	}
	var zero T
	return zero, false
}

// MarshalJSON writes the members in order; nil encodes as {}.
func (k Keyed[T]) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	seen := make(map[string]struct{}, len(k))
	for i, e := range k {
		if _, dup := seen[e.Key]; dup {
			return nil, fmt.Errorf("proto2: key %q repeated in an object", e.Key)
		}
		seen[e.Key] = struct{}{}
		if i > 0 {
			buf.WriteByte(',')
		}
		key, err := Marshal(e.Key)
		if err != nil {
			return nil, err
		}
		value, err := Marshal(e.Value)
		if err != nil {
			return nil, fmt.Errorf("proto2: member %q: %w", e.Key, err)
		}
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(value)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Marshal encodes v as JSON.stringify would for the shapes of this
// package: no HTML escaping and no trailing newline. (Go still escapes
// U+2028 and U+2029, which JSON.stringify sends raw; both read back the
// same.)
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
