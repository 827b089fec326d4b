package admission

import (
	"bytes"
	"crypto/rand"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

var uuidV4GrantID = regexp.MustCompile(`^grant_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestGrantIDIsALowercaseUUIDv4(t *testing.T) {
	id, err := NewGrantID(bytes.NewReader(bytes.Repeat([]byte{0xff}, 16)))
	require.NoError(t, err)
	require.Equal(t, "grant_ffffffff-ffff-4fff-bfff-ffffffffffff", id)
	id, err = NewGrantID(bytes.NewReader(make([]byte, 16)))
	require.NoError(t, err)
	require.Equal(t, "grant_00000000-0000-4000-8000-000000000000", id, "the vector's id")
	_, err = NewGrantID(bytes.NewReader(make([]byte, 15)))
	require.Error(t, err, "a short read is not an id")
}

// Ids drawn from crypto/rand never repeat, which is all single use across
// replicas needs: there is nothing to coordinate.
func TestGrantIDsDoNotRepeat(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id, err := NewGrantID(rand.Reader)
		require.NoError(t, err)
		require.Regexp(t, uuidV4GrantID, id)
		require.False(t, seen[id], "repeated %s", id)
		seen[id] = true
	}
}
