package admission

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/nodetest"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// verdictCase is one claim response handed to the published verifier, as
// the device owner at the device's now.
type verdictCase struct {
	name     string
	response []byte
	owner    string
	key      string
	now      int64
	want     string
}

// TestPublishedDaemonAcceptsOurGrants authors grants with this package,
// wraps each in the claim response the daemon parses strictly, and asks
// the published @byollm/protocol 0.1.1 (the daemon's verifier) what the
// daemon would say: an authored grant passes, and every tampering is
// refused for the reason the daemon gives.
func TestPublishedDaemonAcceptsOurGrants(t *testing.T) {
	interop := nodetest.Interop(t, "byollm", "@byollm/protocol")
	signer := seedSigner(t)
	key, err := projection.ParseGrantKey(signer.PublicKey())
	require.NoError(t, err)
	ring, err := NewKeyRing(signer)
	require.NoError(t, err)
	p, err := projection.New(teamFixture())
	require.NoError(t, err)
	now := time.UnixMilli(1_800_000_000_000)
	author := Author{Law: Law{OwnDefault: true}, Keys: ring, Random: rand.Reader}
	claim := Claim{Stub: stubOf("alice"), DeviceOwner: "bob", Capabilities: []proto2.Capability{capability(gen, "echo", "team")}}
	out := author.Author(context.Background(), p, claim, key, now)
	require.True(t, out.Decision.Granted)
	require.NotNil(t, out.Grant)
	g := *out.Grant

	ms := now.UnixMilli()
	ok := func(name string, stub proto2.JobStub, grant proto2.SignedGrant) verdictCase {
		return verdictCase{name: name, response: claimResponse(t, stub, grant), owner: "bob", key: signer.PublicKey(), now: ms, want: "ok"}
	}
	tampered := func(name, want string, edit func(*proto2.SignedGrant)) verdictCase {
		bad := g
		edit(&bad)
		c := ok(name, claim.Stub, bad)
		c.want = want
		return c
	}
	awkward := ok("the vector with every awkward character", proto2.JobStub{ID: vector2.JobID, Kind: vector2.Kind, Owner: vector2.User,
		Site: vector2.Site, Audience: "team", Purpose: vector2.Purpose, SizeClass: "small", DeadlineAt: 2}, mustSign(t, signer, vector2))
	awkward.owner, awkward.now = vector2.Owner, vector2.IssuedAt
	cases := []verdictCase{
		ok("authored", claim.Stub, g),
		awkward,
		tampered("service changed", "bad-signature", func(s *proto2.SignedGrant) { s.Service = "llama" }),
		tampered("grant id changed", "bad-signature", func(s *proto2.SignedGrant) { s.GrantID = "grant_" + strings.Repeat("0", 36) }),
		tampered("issuedAt moved", "bad-signature", func(s *proto2.SignedGrant) { s.IssuedAt-- }),
		tampered("user changed", "bad-signature", func(s *proto2.SignedGrant) { s.User = "carol" }),
		tampered("owner changed", "wrong-owner", func(s *proto2.SignedGrant) { s.Owner = "carol" }),
		tampered("job changed", "wrong-job", func(s *proto2.SignedGrant) { s.JobID = "job_2" }),
		tampered("signed by another key", "bad-signature", func(s *proto2.SignedGrant) {
			s.Signature = mustSign(t, newKeySigner(mustKey(t, 3)), ClaimsOf(g)).Signature
		}),
		tampered("empty signature", "malformed-response", func(s *proto2.SignedGrant) { s.Signature = "" }),
	}
	late := ok("120 s old is still good", claim.Stub, g)
	late.now = ms + 120_000
	expired := ok("120.001 s old is expired", claim.Stub, g)
	expired.now, expired.want = ms+120_001, "expired"
	early := ok("from 30.001 s ahead", claim.Stub, g)
	early.now, early.want = ms-30_001, "from-the-future"
	otherStub := claim.Stub
	otherStub.Owner = "carol"
	wrongUser := ok("the stub's owner is not the grant's user", otherStub, g)
	wrongUser.want = "wrong-user"
	cases = append(cases, late, expired, early, wrongUser)

	verdicts := askPublishedVerifier(t, interop, cases)
	for i, c := range cases {
		require.Equal(t, c.want, verdicts[i], c.name)
	}
}

func mustSign(t *testing.T, s Signer, c Claims) proto2.SignedGrant {
	t.Helper()
	g, err := Sign(context.Background(), s, c)
	require.NoError(t, err)
	return g
}

// claimResponse is the daemon's claim answer holding stub with its lease
// and grant, grant last (relay/daemon-plane.ts:711).
func claimResponse(t *testing.T, stub proto2.JobStub, grant proto2.SignedGrant) []byte {
	t.Helper()
	job := proto2.ClaimedStub{JobStub: stub, Lease: protocol.Lease{ID: "lease_1", RunnerID: "runner_bob", ExpiresAt: stub.DeadlineAt}, Grant: &grant}
	body, err := json.Marshal(map[string]any{"jobs": []proto2.ClaimedStub{job}, "leaseMs": 60000})
	require.NoError(t, err)
	return body
}

func askPublishedVerifier(t *testing.T, interop string, cases []verdictCase) []string {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, c := range cases {
		require.NoError(t, enc.Encode(map[string]any{"response": string(c.response), "owner": c.owner, "controlPlanePublic": c.key, "now": c.now}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "testdata/verifygrant.mjs", interop)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node: %s", stderr.String())
	verdicts := strings.Fields(string(out))
	require.Len(t, verdicts, len(cases))
	return verdicts
}
