package peer

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/curve25519"

	"github.com/byollm/relayd/protocol"
)

// Keys is one peer's private key material: an Ed25519 identity key, which
// signs requests, envelopes and the encryption key, and an X25519 encryption
// key, which opens the envelopes sealed to this peer.
//
// Build one with GenerateKeys, NewKeys or LoadDemoKeys; the zero Keys holds
// no key and every method that needs one panics. A Keys is immutable and safe
// to share between goroutines.
type Keys struct {
	identity      ed25519.PrivateKey
	encryption    [32]byte
	encryptionPub [32]byte
}

// GenerateKeys returns fresh random keys.
func GenerateKeys() (Keys, error) {
	_, identity, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Keys{}, fmt.Errorf("generate identity key: %w", err)
	}
	var encryption [32]byte
	if _, err := rand.Read(encryption[:]); err != nil {
		return Keys{}, fmt.Errorf("generate encryption key: %w", err)
	}
	return NewKeys(identity, encryption)
}

// NewKeys builds Keys from an Ed25519 private key (the 64-byte seed-and-public
// form) and a 32-byte X25519 private scalar. It checks that the public half of
// the identity key belongs to its seed, because a mismatched pair would sign
// with one key while advertising another.
func NewKeys(identity ed25519.PrivateKey, encryption [32]byte) (Keys, error) {
	if len(identity) != ed25519.PrivateKeySize {
		return Keys{}, fmt.Errorf("identity private key is %d bytes, want %d", len(identity), ed25519.PrivateKeySize)
	}
	derived := ed25519.NewKeyFromSeed(identity.Seed())
	if !bytes.Equal(derived, identity) {
		return Keys{}, errors.New("identity private key: public half does not match the seed")
	}
	pub, err := curve25519.X25519(encryption[:], curve25519.Basepoint)
	if err != nil {
		return Keys{}, fmt.Errorf("derive encryption public key: %w", err)
	}
	k := Keys{identity: derived, encryption: encryption}
	copy(k.encryptionPub[:], pub)
	return k, nil
}

// IdentityPrivate returns a copy of the Ed25519 identity private key.
func (k Keys) IdentityPrivate() ed25519.PrivateKey {
	return append(ed25519.PrivateKey(nil), k.identity...)
}

// EncryptionPrivate returns the X25519 encryption private key.
func (k Keys) EncryptionPrivate() [32]byte { return k.encryption }

// IdentityPublic returns the raw 32-byte Ed25519 identity public key.
func (k Keys) IdentityPublic() ed25519.PublicKey {
	return append(ed25519.PublicKey(nil), k.identity.Public().(ed25519.PublicKey)...)
}

// Public returns the identity as it travels: both public keys in unpadded
// base64url and the identity key's signature vouching for the encryption key.
// Ed25519 signatures are deterministic, so the result is the same every call.
func (k Keys) Public() protocol.PublicIdentity {
	enc := protocol.EncodeKey(k.encryptionPub[:])
	return protocol.PublicIdentity{
		Identity:      protocol.EncodeKey(k.IdentityPublic()),
		Encryption:    enc,
		EncryptionSig: protocol.EncodeKey(ed25519.Sign(k.identity, protocol.EncryptionKeyMessage(enc))),
	}
}

// KeyID returns the fingerprint of the identity key ("BYOLLM-XXXX-…"), the
// form a stub's site field and an envelope's key ids take.
func (k Keys) KeyID() string { return protocol.KeyID(k.IdentityPublic()) }

// DemoKeys is the content of deploy/demo-keys.json: the private keys of the
// demo site and of every demo device, matching the example fixture.
type DemoKeys struct {
	Note    string
	Site    DemoSite
	Devices []DemoDevice
}

// DemoSite is the demo site's id and keys.
type DemoSite struct {
	SiteID string
	Keys   Keys
}

// DemoDevice is one demo device: the runner id and owner the fixture
// approves it under, and its keys.
type DemoDevice struct {
	RunnerID string
	Owner    string
	Keys     Keys
}

// Device returns the demo device with the given runner id.
func (d DemoKeys) Device(runnerID string) (DemoDevice, bool) {
	for _, dev := range d.Devices {
		if dev.RunnerID == runnerID {
			return dev, true
		}
	}
	return DemoDevice{}, false
}

// demoKeysFile is the JSON shape of deploy/demo-keys.json.
type demoKeysFile struct {
	Note    string        `json:"note"`
	Site    demoSiteFile  `json:"site"`
	Devices []demoDevFile `json:"devices"`
}

type demoSiteFile struct {
	SiteID            string                  `json:"siteId"`
	IdentityPrivate   string                  `json:"identityPrivate"`
	EncryptionPrivate string                  `json:"encryptionPrivate"`
	Public            protocol.PublicIdentity `json:"public"`
}

type demoDevFile struct {
	RunnerID          string                  `json:"runnerId"`
	Owner             string                  `json:"owner"`
	IdentityPrivate   string                  `json:"identityPrivate"`
	EncryptionPrivate string                  `json:"encryptionPrivate"`
	Public            protocol.PublicIdentity `json:"public"`
}

// LoadDemoKeys reads and checks a demo key file (deploy/demo-keys.json).
func LoadDemoKeys(path string) (DemoKeys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return DemoKeys{}, fmt.Errorf("read demo keys: %w", err)
	}
	keys, err := ParseDemoKeys(data)
	if err != nil {
		return DemoKeys{}, fmt.Errorf("demo keys %s: %w", path, err)
	}
	return keys, nil
}

// ParseDemoKeys decodes a demo key file. Every private key must decode to the
// right length, and every "public" entry must be the identity those private
// keys actually have, so a stale or hand-edited file fails here rather than
// as a puzzling signature refusal later. Unknown fields are ignored.
func ParseDemoKeys(data []byte) (DemoKeys, error) {
	var f demoKeysFile
	if err := json.Unmarshal(data, &f); err != nil {
		return DemoKeys{}, fmt.Errorf("decode: %w", err)
	}
	if f.Site.SiteID == "" {
		return DemoKeys{}, errors.New("site: siteId is empty")
	}
	siteKeys, err := decodeKeyPair(f.Site.IdentityPrivate, f.Site.EncryptionPrivate, f.Site.Public)
	if err != nil {
		return DemoKeys{}, fmt.Errorf("site %s: %w", f.Site.SiteID, err)
	}
	out := DemoKeys{
		Note: f.Note,
		Site: DemoSite{SiteID: f.Site.SiteID, Keys: siteKeys},
	}
	seen := make(map[string]bool, len(f.Devices))
	for i, d := range f.Devices {
		if d.RunnerID == "" || d.Owner == "" {
			return DemoKeys{}, fmt.Errorf("devices[%d]: runnerId and owner must be non-empty", i)
		}
		if seen[d.RunnerID] {
			return DemoKeys{}, fmt.Errorf("devices[%d]: runner id %s appears twice", i, d.RunnerID)
		}
		seen[d.RunnerID] = true
		k, err := decodeKeyPair(d.IdentityPrivate, d.EncryptionPrivate, d.Public)
		if err != nil {
			return DemoKeys{}, fmt.Errorf("device %s: %w", d.RunnerID, err)
		}
		out.Devices = append(out.Devices, DemoDevice{RunnerID: d.RunnerID, Owner: d.Owner, Keys: k})
	}
	return out, nil
}

// MarshalDemoKeys encodes keys in the demo key file format, the inverse of
// ParseDemoKeys, for tools that generate the file.
func MarshalDemoKeys(d DemoKeys) ([]byte, error) {
	f := demoKeysFile{
		Note: d.Note,
		Site: demoSiteFile{
			SiteID:            d.Site.SiteID,
			IdentityPrivate:   protocol.EncodeKey(d.Site.Keys.identity),
			EncryptionPrivate: protocol.EncodeKey(d.Site.Keys.encryption[:]),
			Public:            d.Site.Keys.Public(),
		},
		Devices: make([]demoDevFile, 0, len(d.Devices)),
	}
	for _, dev := range d.Devices {
		f.Devices = append(f.Devices, demoDevFile{
			RunnerID:          dev.RunnerID,
			Owner:             dev.Owner,
			IdentityPrivate:   protocol.EncodeKey(dev.Keys.identity),
			EncryptionPrivate: protocol.EncodeKey(dev.Keys.encryption[:]),
			Public:            dev.Keys.Public(),
		})
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode demo keys: %w", err)
	}
	return append(out, '\n'), nil
}

// decodeKeyPair decodes the two private keys of a demo entry and checks them
// against the public identity the file declares next to them.
func decodeKeyPair(identityText, encryptionText string, declared protocol.PublicIdentity) (Keys, error) {
	idRaw, err := decodeB64URL(identityText)
	if err != nil {
		return Keys{}, fmt.Errorf("identityPrivate: %w", err)
	}
	encRaw, err := decodeB64URL(encryptionText)
	if err != nil {
		return Keys{}, fmt.Errorf("encryptionPrivate: %w", err)
	}
	if len(encRaw) != 32 {
		return Keys{}, fmt.Errorf("encryptionPrivate is %d bytes, want 32", len(encRaw))
	}
	var enc [32]byte
	copy(enc[:], encRaw)
	k, err := NewKeys(ed25519.PrivateKey(idRaw), enc)
	if err != nil {
		return Keys{}, err
	}
	pub := k.Public()
	if declared.Identity != pub.Identity {
		return Keys{}, errors.New("public.identity does not match identityPrivate")
	}
	if declared.Encryption != pub.Encryption {
		return Keys{}, errors.New("public.encryption does not match encryptionPrivate")
	}
	// Any valid vouching signature will do (another Ed25519 implementation
	// could have produced the file), but it must verify.
	if !declared.IsConsistent() {
		return Keys{}, errors.New("public.encryptionSig does not verify")
	}
	return k, nil
}

// decodeB64URL decodes base64url with or without padding; the key file is
// written by other tools and padding carries no meaning.
func decodeB64URL(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	b, err := protocol.DecodeKey(strings.TrimRight(s, "="))
	if err != nil {
		return nil, fmt.Errorf("not base64url: %w", err)
	}
	return b, nil
}
