package memory_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/leaktest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
)

// The memory store keeps no loop of its own: a pending pairing code
// expires, and frees its place, within the call that finds it past its
// ExpiresAt, and a job past its deadline goes at the next sweep the
// server's sweeper or a claim makes. So nothing of the store outlives it:
// this test would catch a purge loop added without a way to stop it.
func TestTheStoreRunsNoLoopOfItsOwn(t *testing.T) {
	leaktest.Check(t)
	c := clock.NewManual(time.UnixMilli(1_750_000_000_000))
	s := memory.New(c)
	ctx := t.Context()

	const ttl = 10 * time.Minute
	start := func(deviceCode, identity string) error {
		_, err := s.Pairings().StartPairing(ctx, store.StartPairingInput{
			Pending: store.PendingPairing{DeviceCode: deviceCode, UserCode: "USER-" + deviceCode, Device: protocol.PublicIdentity{Identity: identity}},
			TTLMs:   ttl.Milliseconds(), Capacity: 1,
		})
		return err
	}
	require.NoError(t, start("dc-a", "id-a"))
	require.Equal(t, store.RefusedAtCapacity, store.RefusalOf(start("dc-b", "id-b")), "one live code fills a capacity of one")
	c.Advance(ttl)
	_, live, err := s.Pairings().PairingByDeviceCode(ctx, "dc-a")
	require.NoError(t, err)
	require.False(t, live, "a code is gone at its ExpiresAt, with no loop to purge it")
	require.NoError(t, start("dc-b", "id-b"), "the expired code freed its place")

	stub := protocol.JobStub{
		ID: "j1", Kind: protocol.KindGenerate, Owner: "alice", Audience: protocol.AudiencePublic, SizeClass: "small",
		DeadlineAt: clock.UnixMilli(c) + time.Minute.Milliseconds(),
	}
	_, err = s.Enqueue(ctx, store.EnqueueInput{SiteID: "site_a", Stub: stub})
	require.NoError(t, err)
	c.Advance(time.Minute)
	swept, err := s.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"j1"}, swept.Expired, "the sweep the caller makes drops the job")
	require.NoError(t, s.Close())
}
