package admission

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol/proto2"
)

func teamAuthor(t *testing.T, random interface{ Read([]byte) (int, error) }) (Author, projection.GrantKey) {
	t.Helper()
	signer := seedSigner(t)
	ring, err := NewKeyRing(newKeySigner(mustKey(t, 8)), signer)
	require.NoError(t, err)
	key, err := projection.ParseGrantKey(signer.PublicKey())
	require.NoError(t, err)
	return Author{Keys: ring, Random: random}, key
}

func memberClaim() Claim {
	return Claim{Stub: stubOf("alice"), DeviceOwner: "bob", Capabilities: []proto2.Capability{capability(gen, "echo", "team")}}
}

func TestAuthorSignsWithTheDevicesKeyAtNow(t *testing.T) {
	author, key := teamAuthor(t, bytes.NewReader(make([]byte, 16)))
	p, err := projection.New(teamFixture())
	require.NoError(t, err)
	now := time.UnixMilli(1_800_000_000_123)
	out := author.Author(context.Background(), p, memberClaim(), key, now)
	require.True(t, out.Decision.Granted)
	require.NotNil(t, out.Grant)
	require.Equal(t, proto2.SignedGrant{
		GrantID: "grant_00000000-0000-4000-8000-000000000000", JobID: "job_1", Site: siteKeyID, User: "alice", Owner: "bob",
		Purpose: "default", Kind: gen, Service: "echo", IssuedAt: 1_800_000_000_123, Signature: out.Grant.Signature,
	}, *out.Grant)
	require.True(t, Verify(seedPublic, *out.Grant), "signed with the key the device is enrolled with, not the ring's current one")
}

func TestAuthorDeclinesWithoutAGrant(t *testing.T) {
	author, key := teamAuthor(t, rand.Reader)
	f := teamFixture()
	f.Rosters = nil
	p, err := projection.New(f)
	require.NoError(t, err)
	out := author.Author(context.Background(), p, memberClaim(), key, time.UnixMilli(1))
	require.Equal(t, Outcome{Decision: decline(ReasonNotAMember)}, out)
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

// A grant that cannot be signed is a transient decline: the claim never
// fails on it, and the job goes to another device or waits 30 s.
func TestAuthorThatCannotSignDeclinesTransiently(t *testing.T) {
	p, err := projection.New(teamFixture())
	require.NoError(t, err)
	now := time.UnixMilli(1_800_000_000_000)
	author, key := teamAuthor(t, rand.Reader)
	other, err := projection.ParseGrantKey(newKeySigner(mustKey(t, 4)).PublicKey())
	require.NoError(t, err)
	for name, run := range map[string]func() Outcome{
		"the device's key is not held": func() Outcome { return author.Author(context.Background(), p, memberClaim(), other, now) },
		"the device is not enrolled": func() Outcome {
			return author.Author(context.Background(), p, memberClaim(), projection.GrantKey{}, now)
		},
		"grants are off": func() Outcome {
			return Author{Random: rand.Reader}.Author(context.Background(), p, memberClaim(), key, now)
		},
		"no randomness": func() Outcome {
			a, k := teamAuthor(t, failingReader{})
			return a.Author(context.Background(), p, memberClaim(), k, now)
		},
		"a time before the epoch": func() Outcome { return author.Author(context.Background(), p, memberClaim(), key, time.UnixMilli(0)) },
	} {
		t.Run(name, func(t *testing.T) {
			out := run()
			require.Nil(t, out.Grant)
			require.Equal(t, decline(ReasonSignFailed), out.Decision)
			require.False(t, out.Decision.Permanent())
		})
	}
}
