package admission

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/byollm/relayd/protocol"
)

// Signer signs grant statements with one Ed25519 key. It is shaped like the
// reference's GrantSigner (control-plane/signer.ts:24-28), so that a KMS
// or a remote signer can stand in for the key file: the key itself never
// has to be in this process. A Signer must be safe for concurrent use.
type Signer interface {
	// PublicKey is the raw Ed25519 public key as it travels (unpadded
	// base64url): what a device pins as controlPlanePublic.
	PublicKey() string
	// Sign returns the Ed25519 signature of statement, unpadded base64url.
	Sign(ctx context.Context, statement []byte) (string, error)
}

// keySigner is the Signer of a key loaded from a file. It is the only type
// in relayd that holds a private key, and it holds it inside a closure:
// fmt and slog print a func as an address, so not even a reflective dump
// of a struct that embeds a keySigner (through an unexported field, where
// fmt calls no String method) can show the key.
type keySigner struct {
	public string
	keyID  string
	sign   func(statement []byte) []byte
}

func newKeySigner(private ed25519.PrivateKey) *keySigner {
	public := private.Public().(ed25519.PublicKey)
	return &keySigner{
		public: protocol.EncodeKey(public),
		keyID:  protocol.KeyID(public),
		sign:   func(statement []byte) []byte { return ed25519.Sign(private, statement) },
	}
}

func (k *keySigner) PublicKey() string { return k.public }

func (k *keySigner) Sign(_ context.Context, statement []byte) (string, error) {
	return protocol.EncodeKey(k.sign(statement)), nil
}

// String, GoString, Format and LogValue name the key by its public half.
func (k keySigner) String() string   { return "grant key " + k.keyID }
func (k keySigner) GoString() string { return k.String() }

func (k keySigner) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.String())) }

func (k keySigner) LogValue() slog.Value {
	return slog.GroupValue(slog.String("publicKey", k.public), slog.String("keyId", k.keyID))
}

// KeyID is the fingerprint of a signer's public key (protocol.KeyIDOf),
// what logs and /readyz show instead of the key.
func KeyID(s Signer) string {
	id, _ := protocol.KeyIDOf(s.PublicKey())
	return id
}

// KeyRing is the set of grant keys one replica holds: the first is current
// (what a newly approved device is enrolled with), the others stay for
// devices still pinned to them (G-R30, G-R39). The zero KeyRing and a nil
// one hold nothing: grants are off.
type KeyRing struct {
	signers []Signer
	byKey   map[string]Signer
}

// NewKeyRing builds a ring from signers, the first current. It refuses one
// public key listed twice.
func NewKeyRing(signers ...Signer) (*KeyRing, error) {
	r := &KeyRing{byKey: make(map[string]Signer, len(signers))}
	for i, s := range signers {
		if _, dup := r.byKey[s.PublicKey()]; dup {
			return nil, fmt.Errorf("admission: grant key %d (%s) is listed twice", i+1, KeyID(s))
		}
		r.byKey[s.PublicKey()] = s
		r.signers = append(r.signers, s)
	}
	return r, nil
}

// Len is how many keys the ring holds; zero means grants are off.
func (r *KeyRing) Len() int {
	if r == nil {
		return 0
	}
	return len(r.signers)
}

// Current is the ring's first key, and false when it holds none.
func (r *KeyRing) Current() (Signer, bool) {
	if r.Len() == 0 {
		return nil, false
	}
	return r.signers[0], true
}

// Lookup finds the signer for a device's grantKey, compared as the string
// it travels as (the fixture refuses non-canonical encodings).
func (r *KeyRing) Lookup(publicKey string) (Signer, bool) {
	if r.Len() == 0 {
		return nil, false
	}
	s, ok := r.byKey[publicKey]
	return s, ok
}

// KeyIDs lists the key ids of the ring, current first.
func (r *KeyRing) KeyIDs() []string {
	out := []string{}
	for i := range r.Len() {
		out = append(out, KeyID(r.signers[i]))
	}
	return out
}

// PublicKeys lists the ring's public keys, current first, as devices pin
// them.
func (r *KeyRing) PublicKeys() []string {
	out := []string{}
	for i := range r.Len() {
		out = append(out, r.signers[i].PublicKey())
	}
	return out
}

// LogValue shows the ring by its key ids only.
func (r *KeyRing) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("keys", r.Len()), slog.Any("keyIds", r.KeyIDs()))
}

// String names the ring's keys by their ids.
func (r *KeyRing) String() string { return fmt.Sprintf("grant keys %v", r.KeyIDs()) }

// LoadKeyRing reads each path as a PEM PKCS#8 Ed25519 private key (what
// `openssl genpkey -algorithm ed25519` writes, and what @byollm/protocol's
// generateKeys holds as identityPrivate, PEM-wrapped), the first current.
// No paths give an empty ring. Errors name the path and never quote the
// file. A file that group or others may read is logged as a warning, not
// refused: Kubernetes mounts Secrets 0644 unless told otherwise.
func LoadKeyRing(paths []string, logger *slog.Logger) (*KeyRing, error) {
	signers := make([]Signer, 0, len(paths))
	for _, path := range paths {
		s, err := loadKeyFile(path, logger)
		if err != nil {
			return nil, err
		}
		signers = append(signers, s)
	}
	return NewKeyRing(signers...)
}

func loadKeyFile(path string, logger *slog.Logger) (*keySigner, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("admission: grant key file %s: %w", path, err)
	}
	if info.Mode().Perm()&0o077 != 0 && logger != nil {
		logger.Warn("grant key file is readable by group or others; mount it with mode 0400",
			slog.String("path", path), slog.String("mode", info.Mode().Perm().String()))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("admission: grant key file %s: %w", path, err)
	}
	private, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("admission: grant key file %s: %w", path, err)
	}
	return newKeySigner(private), nil
}

// ParsePrivateKeyPEM reads exactly one unencrypted PEM "PRIVATE KEY" block
// holding a PKCS#8 Ed25519 key (RFC 8410). Its errors say what is wrong
// without quoting the input.
func ParsePrivateKeyPEM(data []byte) (ed25519.PrivateKey, error) {
	block, rest := pem.Decode(data)
	switch {
	case block == nil:
		return nil, errors.New("not a PEM file")
	case block.Type == "ENCRYPTED PRIVATE KEY" || len(block.Headers) > 0:
		return nil, errors.New("an encrypted PEM key; relayd needs an unencrypted PKCS#8 Ed25519 key")
	case block.Type != "PRIVATE KEY":
		return nil, fmt.Errorf("a PEM %q block; relayd needs a PKCS#8 \"PRIVATE KEY\"", block.Type)
	case len(bytes.TrimSpace(rest)) > 0:
		return nil, errors.New("more than one PEM block")
	}
	// The parser's own error is left out: an ASN.1 error could echo bytes.
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("not a PKCS#8 private key")
	}
	switch k := key.(type) {
	case ed25519.PrivateKey:
		return k, nil
	case *rsa.PrivateKey:
		return nil, errors.New("an RSA key; relayd needs an Ed25519 key")
	case *ecdsa.PrivateKey:
		return nil, errors.New("an ECDSA key; relayd needs an Ed25519 key")
	case *ecdh.PrivateKey:
		return nil, errors.New("an X25519 key; relayd needs an Ed25519 key")
	default:
		return nil, fmt.Errorf("a %T key; relayd needs an Ed25519 key", key)
	}
}
