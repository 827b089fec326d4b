package admission

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/byollm/relayd/protocol"
)

// KeyFileMode is the mode GenerateKeyFile writes a key file with: the
// owner alone may read it.
const KeyFileMode os.FileMode = 0o600

// PublicHalf is what may be said about a generated key: its raw public
// key as devices pin it (unpadded base64url) and its key id.
type PublicHalf struct {
	PublicKey string `json:"publicKey"`
	KeyID     string `json:"keyId"`
}

// GenerateKeyFile draws a fresh Ed25519 key from random (crypto/rand.Reader
// in production) and writes it to path as a PEM PKCS#8 "PRIVATE KEY" (RFC
// 8410, what --grant-key-file reads) at mode 0600 (spec grants.md G-R30).
// It never overwrites: a path that exists, even as a dangling link, is
// refused. The private key goes only into the file; the caller gets the
// public half. A write that fails leaves no file behind.
func GenerateKeyFile(path string, random io.Reader) (PublicHalf, error) {
	public, private, err := ed25519.GenerateKey(random)
	if err != nil {
		return PublicHalf{}, fmt.Errorf("admission: generate a grant key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(private)
	if err != nil {
		return PublicHalf{}, fmt.Errorf("admission: encode a grant key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, KeyFileMode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return PublicHalf{}, fmt.Errorf("admission: grant key file %s already exists; relayd never overwrites a key", path)
		}
		return PublicHalf{}, fmt.Errorf("admission: grant key file %s: %w", path, err)
	}
	if err := writeKeyFile(f, der); err != nil {
		_ = os.Remove(path)
		return PublicHalf{}, fmt.Errorf("admission: grant key file %s: %w", path, err)
	}
	return PublicHalf{PublicKey: protocol.EncodeKey(public), KeyID: protocol.KeyID(public)}, nil
}

// writeKeyFile writes der PEM-wrapped to f, sets its mode to exactly
// KeyFileMode whatever the umask made of it, makes it durable and closes f.
func writeKeyFile(f *os.File, der []byte) error {
	err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err == nil {
		err = f.Chmod(KeyFileMode)
	}
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	return err
}
