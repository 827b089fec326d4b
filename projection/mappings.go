package projection

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/byollm/relayd/protocol"
)

// Mapping routes one person's work of one (Purpose, Kind) to Service. An
// empty ServiceOwner (absent in the fixture) is the reference's null owner:
// the mapper's own service. The reference calls that field owner; here
// owner already means the person.
type Mapping struct {
	Purpose      string `json:"purpose"`
	Kind         string `json:"kind"`
	Service      string `json:"service"`
	ServiceOwner string `json:"serviceOwner,omitempty"`
}

// Mappings is an immutable list of mappings, in fixture order. It is
// comparable by value, so that a ConsentRecord stays comparable with ==
// as it always was; the zero value is the empty list, as is an absent
// "mappings". Build one with NewMappings and read it with List.
type Mappings struct {
	// enc is nil for none, or the list's JSON encoding as a string: an
	// interface holding a string compares by the text.
	enc any
}

// NewMappings returns the list of ms.
func NewMappings(ms ...Mapping) Mappings {
	if len(ms) == 0 {
		return Mappings{}
	}
	enc, _ := json.Marshal(ms) // a list of structs of strings always encodes
	return Mappings{enc: string(enc)}
}

// List returns the mappings in a fresh slice, never nil.
func (m Mappings) List() []Mapping {
	out := []Mapping{}
	enc, ok := m.enc.(string)
	if !ok {
		return out
	}
	_ = json.Unmarshal([]byte(enc), &out) // NewMappings wrote it, so it decodes
	return out
}

// IsZero reports whether the list is empty; encoding/json's omitzero
// leaves it out then, so a fixture without mappings hashes as before.
func (m Mappings) IsZero() bool { return m.enc == nil }

// MarshalJSON encodes the list as a JSON array.
func (m Mappings) MarshalJSON() ([]byte, error) {
	enc, ok := m.enc.(string)
	if !ok {
		return []byte("[]"), nil
	}
	return []byte(enc), nil
}

// UnmarshalJSON decodes a JSON array of mappings, for fixtures decoded
// with encoding/json directly; Parse does not use it.
func (m *Mappings) UnmarshalJSON(data []byte) error {
	var list []Mapping
	if err := json.Unmarshal(data, &list); err != nil {
		return fmt.Errorf("projection: mappings: %w", err)
	}
	*m = NewMappings(list...)
	return nil
}

// String shows the list as its JSON, for test failures and %v.
func (m Mappings) String() string {
	b, _ := m.MarshalJSON()
	return string(b)
}

// GrantKey is the raw Ed25519 public key a device record enrols with
// (grants.md G-R24). The zero value is none: the device is not enrolled.
// It travels as unpadded base64url (String, ParseGrantKey).
type GrantKey [ed25519.PublicKeySize]byte

// ParseGrantKey reads the canonical unpadded base64url of a 32-byte key.
// A non-canonical spelling of the same bytes is refused, so that what a
// device pins is exactly what the fixture says, and so is the all-zero key,
// which is nobody's.
func ParseGrantKey(s string) (GrantKey, error) {
	var k GrantKey
	raw, err := protocol.DecodeKey(s)
	if err != nil || len(raw) != len(k) || protocol.EncodeKey(raw) != s {
		return GrantKey{}, errors.New("must be the unpadded base64url of a 32-byte Ed25519 public key")
	}
	copy(k[:], raw)
	if k.IsZero() {
		return GrantKey{}, errors.New("the all-zero key is not a key")
	}
	return k, nil
}

// String is the key as it travels, or "" for none.
func (k GrantKey) String() string {
	if k.IsZero() {
		return ""
	}
	return protocol.EncodeKey(k[:])
}

// IsZero reports whether the record names no key.
func (k GrantKey) IsZero() bool { return k == GrantKey{} }

// MarshalJSON encodes the key as a JSON string.
func (k GrantKey) MarshalJSON() ([]byte, error) { return json.Marshal(k.String()) }

// UnmarshalJSON decodes a key written by MarshalJSON, for fixtures
// decoded with encoding/json directly; Parse does not use it.
func (k *GrantKey) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("projection: grantKey: %w", err)
	}
	parsed, err := ParseGrantKey(s)
	if err != nil {
		return fmt.Errorf("projection: grantKey: %w", err)
	}
	*k = parsed
	return nil
}
