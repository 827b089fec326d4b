package admission

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// seedPKCS8 is the golden vectors' key (grants.md G-R28): the PKCS#8 DER of
// the Ed25519 seed 00 01 … 1f, base64 as the reference stores it.
const (
	seedPKCS8  = "MC4CAQAwBQYDK2VwBCIEIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f"
	seedPublic = "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"
)

// seedPEM is seedPKCS8 wrapped as `openssl genpkey` writes a key.
func seedPEM(t *testing.T) []byte {
	t.Helper()
	der := mustStdBase64(t, seedPKCS8)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// seedSigner is a Signer of the golden vectors' key.
func seedSigner(t *testing.T) Signer {
	t.Helper()
	k, err := ParsePrivateKeyPEM(seedPEM(t))
	require.NoError(t, err)
	return newKeySigner(k)
}

// writeFile writes data at mode perm in a fresh directory and returns the path.
func writeFile(t *testing.T, name string, data []byte, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, data, perm))
	require.NoError(t, os.Chmod(path, perm))
	return path
}
