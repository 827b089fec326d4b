package approvecmd_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/admission"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/projection"
)

// G-R35: with an external author beside local keys, the current key
// `relayd approve` enrols a new device with is the author's first.
func TestApproveEnrolsWithTheExternalAuthorsFirstKey(t *testing.T) {
	local, _ := grantsWith(t, 1)
	var authorKeys []string
	for range 2 {
		_, private, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		authorKeys = append(authorKeys, grantSigner{private}.PublicKey())
	}
	external, err := admission.NewExternal(admission.ExternalOptions{URL: "http://127.0.0.1:1/grant", Keys: authorKeys})
	require.NoError(t, err)
	grants := &codec2.Grants{Author: admission.Authors{Local: local.Author, External: external}}
	res, d := newWorldWith(t, grants, nil).approved(t, "--owner", "alice", userCode)
	want, err := projection.ParseGrantKey(authorKeys[0])
	require.NoError(t, err)
	require.Equal(t, want, d.GrantKey)
	require.Equal(t, authorKeys[0], res.GrantKey)
}
