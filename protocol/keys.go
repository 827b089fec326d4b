package protocol

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// b64 is unpadded base64url, the encoding of every key and signature.
var b64 = base64.RawURLEncoding

// EncodeKey encodes raw key or signature bytes for the wire.
func EncodeKey(raw []byte) string { return b64.EncodeToString(raw) }

// DecodeKey decodes a wire key or signature. It accepts only unpadded
// base64url.
func DecodeKey(s string) ([]byte, error) { return b64.DecodeString(s) }

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// KeyID returns the fingerprint of a raw 32-byte Ed25519 identity key:
// "BYOLLM-" and six dash-joined groups of four Crockford base32 characters
// encoding the first 15 bytes of the key's SHA-256.
func KeyID(identityKey []byte) string {
	sum := sha256.Sum256(identityKey)
	var chars [24]byte
	// 15 bytes are 120 bits, exactly 24 five-bit characters, most significant first.
	var acc uint64
	bits := 0
	n := 0
	for _, b := range sum[:15] {
		acc = acc<<8 | uint64(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			chars[n] = crockford[(acc>>uint(bits))&31]
			n++
		}
	}
	var sb strings.Builder
	sb.WriteString("BYOLLM")
	for i := 0; i < 24; i += 4 {
		sb.WriteByte('-')
		sb.Write(chars[i : i+4])
	}
	return sb.String()
}

// KeyIDOf returns the key id of an identity key as it travels (base64url),
// and false when the text is not a decodable key.
func KeyIDOf(identity string) (string, bool) {
	raw, err := DecodeKey(identity)
	if err != nil {
		return "", false
	}
	return KeyID(raw), true
}

const encryptionKeyDomain = "byollm/v1/encryption-key:"

// EncryptionKeyMessage is what an identity key signs to vouch for an
// encryption key, given as it travels.
func EncryptionKeyMessage(encryption string) []byte {
	return []byte(encryptionKeyDomain + encryption)
}

// IsConsistent reports whether the identity's encryption key is signed by its
// identity key. Any decoding problem counts as inconsistent.
func (p PublicIdentity) IsConsistent() bool {
	return VerifyEd25519(p.Identity, EncryptionKeyMessage(p.Encryption), p.EncryptionSig)
}

// VerifyEd25519 checks a base64url signature over msg by a base64url Ed25519
// public key. Malformed keys or signatures verify as false, never panic.
func VerifyEd25519(publicKey string, msg []byte, signature string) bool {
	pub, err := DecodeKey(publicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return false
	}
	sig, err := DecodeKey(signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(ed25519.PublicKey(pub), msg, sig)
}
