package pairing

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A file edited by someone else between the read and the rename is not
// overwritten.
func TestReplaceFileRefusesAConcurrentEdit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fixture.json")
	require.NoError(t, os.WriteFile(path, []byte("theirs"), 0o600))
	err := replaceFile(path, []byte("what we read"), []byte("ours"), 0o600)
	require.ErrorIs(t, err, ErrFixtureChanged)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "theirs", string(raw))
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "the temporary file is removed")
}
