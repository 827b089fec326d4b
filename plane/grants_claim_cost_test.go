package plane_test

// What enrolment costs a claim (issue 24; docs/performance.md "Grants: an
// enrolled device's claim"): an enrolled device's claim — routes widened by
// its owner's roster, the claim held, a grant authored and signed, the hold
// settled — against a plain device's claim of the same kind of job, on the
// same relay, alternating, through real sockets, on both stores.
//
// A measurement, not a test of speed: it runs only with
// RELAYD_CLAIM_COST=<pairs> and asserts only what each claim answered.
//
//	RELAYD_CLAIM_COST=2000 go test ./plane -run TestClaimCost -count=1 -v

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/admission"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// timedStore times the store calls a claim makes, to say where an enrolled
// claim's extra time goes: its held Claim, its SettleGrants, against a
// plain device's Claim. The test is single-threaded, so no lock.
type timedStore struct {
	store.RoutingStore
	heldClaims, plainClaims, settles claimTimes
}

func (s *timedStore) Claim(ctx context.Context, in store.ClaimInput) ([]protocol.ClaimedStub, error) {
	start := time.Now()
	out, err := s.RoutingStore.Claim(ctx, in)
	if in.Hold {
		s.heldClaims = append(s.heldClaims, time.Since(start))
	} else {
		s.plainClaims = append(s.plainClaims, time.Since(start))
	}
	return out, err
}

func (s *timedStore) SettleGrants(ctx context.Context, in store.SettleGrantsInput) ([]protocol.LeaseRef, error) {
	start := time.Now()
	out, err := s.RoutingStore.SettleGrants(ctx, in)
	s.settles = append(s.settles, time.Since(start))
	return out, err
}

// claimTimes are the wall times of one kind of claim.
type claimTimes []time.Duration

func (c claimTimes) mean() time.Duration {
	var sum time.Duration
	for _, d := range c {
		sum += d
	}
	return sum / time.Duration(len(c))
}

func (c claimTimes) median() time.Duration {
	sorted := slices.Clone(c)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

func TestClaimCost_EnrolledAgainstPlain(t *testing.T) {
	pairs, err := strconv.Atoi(os.Getenv("RELAYD_CLAIM_COST"))
	if err != nil || pairs <= 0 {
		t.Skip("a measurement: set RELAYD_CLAIM_COST=<pairs> to run it")
	}
	// Signed as production signs: with admission's own signer of a key
	// file, whose signature the claim makes while the settle runs.
	ring, key := fileKeyRing(t)
	mods := append(aliceOnBobsEcho(), enrolled("runner_bob", key))
	for _, sf := range storeFactories {
		t.Run(sf.name, func(t *testing.T) {
			counts := &grantCounts{}
			opts := withGrants(t, newTestSigner(t), counts, mods...)
			opts.V2.Grants.Author = admission.Author{Law: admission.Law{OwnDefault: true}, Keys: ring, Random: rand.Reader}
			timed := &timedStore{}
			opts.WrapStore = func(s store.RoutingStore) store.RoutingStore {
				timed.RoutingStore = s
				return timed
			}
			b := setup(t, sf.make, opts)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("decided %v, skipped %v", counts.reasons(), counts.skips())
				}
			})
			enrolledTimes, plainTimes := measureClaims(t, b, pairs)
			e, p := enrolledTimes.median(), plainTimes.median()
			t.Logf("%s, %d pairs: enrolled %v median (%v mean), plain %v median (%v mean), ratio %.2f× median, %.2f× mean",
				sf.name, pairs, e, enrolledTimes.mean(), p, plainTimes.mean(),
				float64(e)/float64(p), float64(enrolledTimes.mean())/float64(plainTimes.mean()))
			// Warm-up calls included; medians, so they barely move.
			t.Logf("%s store calls, median: held claim %v, settle %v, plain claim %v",
				sf.name, timed.heldClaims.median(), timed.settles.median(), timed.plainClaims.median())
		})
	}
}

// fileKeyRing is a ring of one fresh key loaded from its file, as
// --grant-key-file loads it, and the key as a device is enrolled with it.
func fileKeyRing(t *testing.T) (*admission.KeyRing, projection.GrantKey) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "grant.pem")
	half, err := admission.GenerateKeyFile(path, rand.Reader)
	require.NoError(t, err)
	ring, err := admission.LoadKeyRing([]string{path}, nil)
	require.NoError(t, err)
	key, err := projection.ParseGrantKey(half.PublicKey)
	require.NoError(t, err)
	return ring, key
}

// measureClaims enqueues one of alice's generate jobs at a time and has it
// claimed, alternately, by bob's enrolled device (a team job, granted) and
// by alice's own plain device (no grant). Only the claim is timed; a tenth
// as many pairs first warm both paths.
func measureClaims(t *testing.T, b *bundle, pairs int) (enrolledTimes, plainTimes claimTimes) {
	t.Helper()
	tr, err := peer.NewTransport(b.clientConfig(b.url))
	require.NoError(t, err)
	site := b.site2(t, "site", siteMain)
	bob, alice := b.device2(t, "bob"), b.device2(t, "alice")
	warm := pairs / 10
	for i := range warm + pairs {
		for _, turn := range []struct {
			device   *daemon2
			caps     []proto2.Capability
			granted  bool
			recorded *claimTimes
		}{{bob, teamEcho(), true, &enrolledTimes}, {alice, capabilities2("llm.generate"), false, &plainTimes}} {
			id := fmt.Sprintf("cost-%d-%s", i, turn.device.runner)
			site.enqueued(t, site.stub2(t, id, "alice"))
			took, claimed := timedClaim(t, b.ctx, tr, turn.device, turn.caps, id, turn.granted)
			// Sealed, as the site would: a route's unsealed grants are
			// capped (B187), and the next claim must find its job.
			site.seal(t, claimed, `{"prompt":"cost"}`)
			if i >= warm {
				*turn.recorded = append(*turn.recorded, took)
			}
		}
	}
	return enrolledTimes, plainTimes
}

// timedClaim claims once through tr, checks the answer is exactly job id
// (with a grant or without, as said) and returns the claim's wall time and
// the job claimed.
func timedClaim(t *testing.T, ctx context.Context, tr *peer.Transport, d *daemon2, caps []proto2.Capability, id string, granted bool) (time.Duration, proto2.ClaimedStub) {
	t.Helper()
	raw := mustJSON(t, proto2.ClaimRequest{ProtocolVersion: "2", RunnerID: d.runner, Capabilities: caps, Max: 8})
	req := peer.RawRequest{Method: http.MethodPost, Path: d.d.Path("claim"), Header: d.d.SignHeadersAt("claim", raw, d.b.clock.Now().UnixMilli()), Body: raw}
	start := time.Now()
	resp, err := tr.Raw(ctx, req)
	took := time.Since(start)
	require.NoError(t, err)
	jobs := decodeClaim(t, resp)
	require.Len(t, jobs, 1, "claim by %s: %s", d.runner, resp.Body)
	require.Equal(t, id, jobs[0].ID)
	require.Equal(t, granted, jobs[0].Grant != nil, "claim by %s: %s", d.runner, resp.Body)
	return took, jobs[0]
}
