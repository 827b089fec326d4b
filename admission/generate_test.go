package admission

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
)

// A generated key file is what --grant-key-file loads, at mode 0600, and
// its public half is the one the ring signs with.
func TestGenerateKeyFileWritesALoadableKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grant.pem")
	half, err := GenerateKeyFile(path, rand.Reader)
	require.NoError(t, err)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, KeyFileMode, info.Mode().Perm())

	ring, err := LoadKeyRing([]string{path}, nil)
	require.NoError(t, err)
	current, ok := ring.Current()
	require.True(t, ok)
	require.Equal(t, half.PublicKey, current.PublicKey())
	require.Equal(t, KeyID(current), half.KeyID)
	id, ok := protocol.KeyIDOf(half.PublicKey)
	require.True(t, ok)
	require.Equal(t, id, half.KeyID)

	again, err := GenerateKeyFile(filepath.Join(t.TempDir(), "other.pem"), rand.Reader)
	require.NoError(t, err)
	require.NotEqual(t, half.PublicKey, again.PublicKey, "each key is fresh")
}

// A path that exists is never overwritten, and the file keeps its bytes.
func TestGenerateKeyFileRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "grant.pem")
	require.NoError(t, os.WriteFile(path, []byte("kept"), 0o600))
	_, err := GenerateKeyFile(path, rand.Reader)
	require.ErrorContains(t, err, "already exists")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "kept", string(got))

	link := filepath.Join(dir, "dangling.pem")
	require.NoError(t, os.Symlink(filepath.Join(dir, "absent.pem"), link))
	_, err = GenerateKeyFile(link, rand.Reader)
	require.ErrorContains(t, err, "already exists", "a dangling link is not followed")
	_, err = os.Stat(filepath.Join(dir, "absent.pem"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// Without randomness no key, and no file, is made.
func TestGenerateKeyFileWithoutRandomnessWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grant.pem")
	_, err := GenerateKeyFile(path, bytes.NewReader(nil))
	require.Error(t, err)
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist)
}
