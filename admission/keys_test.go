package admission

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func mustKey(t *testing.T, seedByte byte) ed25519.PrivateKey {
	t.Helper()
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seedByte}, ed25519.SeedSize))
}

func pemOf(t *testing.T, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func TestLoadKeyRingReadsTheSeedVectorFirstCurrent(t *testing.T) {
	first := writeFile(t, "current.pem", seedPEM(t), 0o400)
	second := writeFile(t, "older.pem", pemOf(t, mustKey(t, 9)), 0o600)
	ring, err := LoadKeyRing([]string{first, second}, nil)
	require.NoError(t, err)
	require.Equal(t, 2, ring.Len())
	current, ok := ring.Current()
	require.True(t, ok)
	require.Equal(t, seedPublic, current.PublicKey())
	older := newKeySigner(mustKey(t, 9)).PublicKey()
	s, ok := ring.Lookup(older)
	require.True(t, ok)
	require.Equal(t, older, s.PublicKey())
	_, ok = ring.Lookup(newKeySigner(mustKey(t, 3)).PublicKey())
	require.False(t, ok)
	require.Equal(t, []string{KeyID(current), KeyID(s)}, ring.KeyIDs())
}

func TestNoKeyFilesMeanGrantsOff(t *testing.T) {
	ring, err := LoadKeyRing(nil, nil)
	require.NoError(t, err)
	require.Zero(t, ring.Len())
	_, ok := ring.Current()
	require.False(t, ok)
	var none *KeyRing
	_, ok = none.Lookup(seedPublic)
	require.False(t, ok)
	require.Empty(t, none.KeyIDs())
}

func TestLoadKeyRingRefusesTheSameKeyTwice(t *testing.T) {
	a := writeFile(t, "a.pem", seedPEM(t), 0o400)
	b := writeFile(t, "b.pem", seedPEM(t), 0o400)
	_, err := LoadKeyRing([]string{a, b}, nil)
	require.ErrorContains(t, err, "listed twice")
}

// Every refusal names the file and says what is wrong with it, and none
// quotes a byte of it.
func TestLoadKeyRingRefusesWhatIsNotAnEd25519Key(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	x, err := ecdh.X25519().GenerateKey(rand.Reader)
	require.NoError(t, err)
	der := mustStdBase64(t, seedPKCS8)
	legacy := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: der})
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"RSA":          {pemOf(t, rsaKey), "an RSA key"},
		"X25519":       {pemOf(t, x), "an X25519 key"},
		"encrypted":    {pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}), "encrypted"},
		"legacy enc":   {legacy, "encrypted"},
		"garbage":      {[]byte("not a key at all " + seedPKCS8), "not a PEM file"},
		"public key":   {pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), `"PUBLIC KEY"`},
		"bad DER":      {pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("seedseedseed")}), "not a PKCS#8"},
		"two blocks":   {append(seedPEM(t), seedPEM(t)...), "more than one"},
		"raw base64":   {[]byte(seedPKCS8 + "\n"), "not a PEM file"},
		"empty":        {nil, "not a PEM file"},
		"trailing txt": {append(seedPEM(t), []byte("junk")...), "more than one"},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, "key.pem", c.data, 0o400)
			_, err := LoadKeyRing([]string{path}, nil)
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, path)
			for _, line := range strings.Split(string(c.data), "\n") {
				if len(line) >= 8 && !strings.HasPrefix(line, "-----") && !strings.Contains(line, ":") {
					require.NotContains(t, err.Error(), line[:8], "the error quotes the file")
				}
			}
		})
	}
	_, err = LoadKeyRing([]string{"/nonexistent/grant.pem"}, nil)
	require.ErrorContains(t, err, "/nonexistent/grant.pem")
}

func TestLoadKeyRingWarnsOfALooseFileMode(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	_, err := LoadKeyRing([]string{writeFile(t, "tight.pem", seedPEM(t), 0o400)}, logger)
	require.NoError(t, err)
	require.Empty(t, logs.String())
	loose := writeFile(t, "loose.pem", seedPEM(t), 0o644)
	_, err = LoadKeyRing([]string{loose}, logger)
	require.NoError(t, err, "a warning, not a refusal")
	require.Contains(t, logs.String(), "readable by group or others")
	require.Contains(t, logs.String(), loose)
}

// The key reads what openssl writes, when openssl is there to write it.
func TestLoadKeyRingReadsOpenSSLOutput(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not on PATH")
	}
	path := writeFile(t, "k.pem", nil, 0o600)
	out, err := exec.Command("openssl", "genpkey", "-algorithm", "ed25519", "-out", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	ring, err := LoadKeyRing([]string{path}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, ring.Len())
}

// No way of printing or logging a signer or its ring shows the private
// key, in any encoding.
func TestTheKeyIsNeverPrintedOrLogged(t *testing.T) {
	private := mustKey(t, 0x42)
	signer := newKeySigner(private)
	ring, err := NewKeyRing(signer)
	require.NoError(t, err)
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	logger.Info("x", slog.Any("signer", signer), slog.Any("ring", ring))
	logger.Info("y", "signer", signer)
	shown := logs.String()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		shown += fmt.Sprintf(verb, signer) + fmt.Sprintf(verb, *signer) + fmt.Sprintf(verb, ring)
	}
	seed := private.Seed()
	for _, enc := range []string{
		string(seed), fmt.Sprintf("%x", seed), fmt.Sprintf("%X", seed), fmt.Sprint(seed), fmt.Sprint([]byte(private)),
		strings.TrimRight(pemBody(t, private), "="), fmt.Sprintf("%x", []byte(private)),
	} {
		require.NotContains(t, shown, enc[:16])
	}
	require.Contains(t, shown, KeyID(signer), "the key is named by its id")
	require.Contains(t, shown, signer.PublicKey(), "the log shows the public key")
	sig, err := signer.Sign(context.Background(), []byte("m"))
	require.NoError(t, err)
	require.NotEmpty(t, sig)
}

func pemBody(t *testing.T, k ed25519.PrivateKey) string {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "X", Bytes: der}))[len("-----BEGIN X-----\n"):][:40]
}
