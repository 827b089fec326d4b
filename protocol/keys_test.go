package protocol

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var keyIDPattern = regexp.MustCompile(`^BYOLLM(-[0-9A-HJKMNP-TV-Z]{4}){6}$`)

// keyIDByBigInt computes a key id a second way, independent of KeyID's bit
// loop: the 15 digest bytes as one 120-bit number, read five bits at a time
// from the top.
func keyIDByBigInt(identityKey []byte) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	sum := sha256.Sum256(identityKey)
	n := new(big.Int).SetBytes(sum[:15])
	mask := big.NewInt(31)
	groups := make([]string, 0, 6)
	var group strings.Builder
	for i := 23; i >= 0; i-- {
		digit := new(big.Int).Rsh(n, uint(5*i))
		digit.And(digit, mask)
		group.WriteByte(alphabet[digit.Int64()])
		if group.Len() == 4 {
			groups = append(groups, group.String())
			group.Reset()
		}
	}
	return "BYOLLM-" + strings.Join(groups, "-")
}

func sequentialKey() []byte {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	return key
}

func TestKeyIDVectors(t *testing.T) {
	cases := []struct {
		name string
		key  []byte
		// want was worked out outside Go (Python hashlib and int
		// arithmetic), so it also pins the alphabet.
		want string
	}{
		{"bytes 0..31", sequentialKey(), "BYOLLM-CC6W-TAB6-RGSP-D48J-AH4B-QCJV"},
		{"32 zero bytes", make([]byte, 32), "BYOLLM-CSM7-NBFR-CAYQ-EV4F-R65R-X7WE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, keyIDByBigInt(tc.key))
			require.Equal(t, tc.want, KeyID(tc.key))
		})
	}
}

func TestKeyIDFormat(t *testing.T) {
	for seed := range 64 {
		pub := ed25519.NewKeyFromSeed(seedBytes(byte(seed))).Public().(ed25519.PublicKey)
		id := KeyID(pub)
		require.Regexp(t, keyIDPattern, id)
		require.Equal(t, keyIDByBigInt(pub), id)
	}
	require.NotEqual(t, KeyID(sequentialKey()), KeyID(make([]byte, 32)))
}

func TestKeyIDOf(t *testing.T) {
	key := sequentialKey()
	id, ok := KeyIDOf(base64.RawURLEncoding.EncodeToString(key))
	require.True(t, ok)
	require.Equal(t, KeyID(key), id)

	for _, bad := range []string{
		base64.URLEncoding.EncodeToString(key),                                  // padded
		base64.StdEncoding.EncodeToString([]byte{0xfb, 0xff, 0xfe, 0x01, 0x02}), // standard alphabet
		"not base64!",
	} {
		_, ok := KeyIDOf(bad)
		require.False(t, ok, bad)
	}
}

func TestEncodeDecodeKey(t *testing.T) {
	raw := []byte{0xfb, 0xff, 0xfe}
	require.Equal(t, "-__-", EncodeKey(raw))
	got, err := DecodeKey("-__-")
	require.NoError(t, err)
	require.Equal(t, raw, got)
	_, err = DecodeKey("+//+")
	require.Error(t, err)
	_, err = DecodeKey("AAE=")
	require.Error(t, err, "padding is refused")
}

func seedBytes(b byte) []byte {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b + byte(i)
	}
	return seed
}

// newIdentity returns a consistent PublicIdentity and its signing key. The
// encryption key is any 32 bytes: consistency is only the signature.
func newIdentity(seed byte) (PublicIdentity, ed25519.PrivateKey) {
	priv := ed25519.NewKeyFromSeed(seedBytes(seed))
	enc := EncodeKey(seedBytes(seed + 100))
	sig := ed25519.Sign(priv, []byte("byollm/v1/encryption-key:"+enc))
	return PublicIdentity{
		Identity:      EncodeKey(priv.Public().(ed25519.PublicKey)),
		Encryption:    enc,
		EncryptionSig: EncodeKey(sig),
	}, priv
}

func TestIsConsistent(t *testing.T) {
	good, _ := newIdentity(1)
	other, _ := newIdentity(2)
	require.True(t, good.IsConsistent())
	require.True(t, other.IsConsistent())

	flip := func(s string) string {
		b, _ := DecodeKey(s)
		b[0] ^= 1
		return EncodeKey(b)
	}
	cases := []struct {
		name string
		edit func(p *PublicIdentity)
	}{
		{"encryption key swapped", func(p *PublicIdentity) { p.Encryption = other.Encryption }},
		{"signature by another identity", func(p *PublicIdentity) { p.EncryptionSig = other.EncryptionSig }},
		{"identity swapped", func(p *PublicIdentity) { p.Identity = other.Identity }},
		{"signature bit flipped", func(p *PublicIdentity) { p.EncryptionSig = flip(p.EncryptionSig) }},
		{"encryption bit flipped", func(p *PublicIdentity) { p.Encryption = flip(p.Encryption) }},
		{"encryption re-encoded with padding", func(p *PublicIdentity) { p.Encryption += "=" }},
		{"identity padded", func(p *PublicIdentity) { p.Identity += "=" }},
		{"identity in standard base64", func(p *PublicIdentity) {
			raw, _ := DecodeKey(p.Identity)
			p.Identity = base64.StdEncoding.EncodeToString(raw)
		}},
		{"identity too short", func(p *PublicIdentity) { p.Identity = EncodeKey(make([]byte, 31)) }},
		{"signature too short", func(p *PublicIdentity) { p.EncryptionSig = EncodeKey(make([]byte, 63)) }},
		{"signature not base64", func(p *PublicIdentity) { p.EncryptionSig = "!!" }},
		{"all empty", func(p *PublicIdentity) { *p = PublicIdentity{} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := good
			tc.edit(&p)
			require.False(t, p.IsConsistent())
		})
	}
}

func TestVerifyEd25519Malformed(t *testing.T) {
	id, priv := newIdentity(3)
	msg := []byte("hello")
	sig := EncodeKey(ed25519.Sign(priv, msg))
	require.True(t, VerifyEd25519(id.Identity, msg, sig))
	require.False(t, VerifyEd25519("", msg, sig))
	require.False(t, VerifyEd25519(id.Identity, msg, ""))
	require.False(t, VerifyEd25519(EncodeKey(make([]byte, 64)), msg, sig))
	require.False(t, VerifyEd25519(id.Identity, []byte("hellO"), sig))
}
