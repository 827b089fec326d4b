package valkey

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit/limitertest"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/storetest"
)

// TestContract runs the whole store contract against one standalone server,
// each case under its own key prefix.
func TestContract(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	storetest.Run(t, func(t *testing.T) storetest.Harness { return harness(t, client) })
}

// TestContractRedis runs the whole contract on Redis as well, for
// operators who run Redis (Debian 12 packages 7.0, not Valkey): the
// scripts must keep to what both engines' Lua offers. Where Redis is
// the only server on PATH this repeats TestContract, at little cost.
func TestContractRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("a second engine skipped in -short mode")
	}
	if raceEnabled {
		// The race pass has checked this Go code on Valkey already; make
		// test runs this on Redis in its non-race pass, so CI never skips it.
		t.Skip("the Redis run of the contract is in make test's non-race pass")
	}
	srv := valkeytest.StartWith(t, valkeytest.Options{Binary: "redis-server"})
	client := srv.Client(t)
	storetest.Run(t, func(t *testing.T) storetest.Harness { return harness(t, client) })
}

// TestContractCluster runs the whole contract against a three-primary
// cluster through valkey-go's cluster client.
func TestContractCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start-up skipped in -short mode")
	}
	if raceEnabled {
		// As TestContractRedis: the race pass has checked this Go code on a
		// standalone Valkey, and the cluster's client paths run under -race
		// in TestValkeyOnACluster and the replicas' cluster race test; make
		// test runs this in its non-race pass, so CI never skips it.
		t.Skip("the cluster run of the contract is in make test's non-race pass")
	}
	srv := valkeytest.StartCluster(t)
	client := srv.Client(t)
	storetest.Run(t, func(t *testing.T) storetest.Harness { return harness(t, client) })
}

// harness builds an empty store under a fresh prefix on a shared client.
// Its clock is pinned at the server's time and moves only by Advance, as
// the contract's exact stamps need: two calls a millisecond apart would
// otherwise disagree. The clock lever lives under the prefix too, so the
// contract's parallel cases never move each other's clocks. The tests in
// valkey_test.go cover the running TIME.
func harness(t *testing.T, client valkey.Client) storetest.Harness {
	s := newTestStore(t, client)
	pinClock(t, s)
	return storetest.Harness{
		Store:   s,
		Advance: func(t *testing.T, d time.Duration) { advance(t, s, d) },
		Allow:   limitertest.Allower(s.Limiter),
		WriteUnparseableJob: func(t *testing.T, id, site, owner, kind string) {
			writeLegacyJob(t, s, store.Proto0, id, site, owner, kind)
		},
		WriteUnparseableJob2: func(t *testing.T, id, site, owner, kind string) {
			writeLegacyJob(t, s, store.Proto2, id, site, owner, kind)
		},
	}
}

func newTestStore(t testing.TB, client valkey.Client) *Store {
	t.Helper()
	s, err := NewFromClientForTest(client, valkeytest.Prefix(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// pinClock stops the store clock at its current reading.
func pinClock(t testing.TB, s *Store) {
	t.Helper()
	if err := testClock(t, s).Pin(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// advance moves the store clock, whether it is pinned or running.
func advance(t testing.TB, s *Store, d time.Duration) {
	t.Helper()
	if err := testClock(t, s).Advance(t.Context(), d); err != nil {
		t.Fatal(err)
	}
}

// testClock is the test clock of s, a store opened for tests.
func testClock(t testing.TB, s *Store) *TestClock {
	t.Helper()
	c, err := TestClockOf(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeLegacyJob stores a queued job whose stub was written before stubs
// carried a site, as an older writer would have left it: the record is
// enqueued properly, then its stub is replaced.
func writeLegacyJob(t testing.TB, s *Store, p store.Proto, id, site, owner, kind string) {
	t.Helper()
	now, err := s.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	audience := protocol.AudiencePublic
	if p == store.Proto2 {
		audience = "team"
	}
	stub := protocol.JobStub{ID: id, Kind: kind, Owner: owner, Site: site, Audience: audience, SizeClass: "small", DeadlineAt: now + time.Hour.Milliseconds()}
	if _, err := s.Enqueue(t.Context(), store.EnqueueInput{SiteID: site, Proto: p, Stub: stub}); err != nil {
		t.Fatal(err)
	}
	legacy, _ := json.Marshal(map[string]any{"id": id, "kind": kind, "owner": owner, "audience": audience, "sizeClass": "small", "streaming": false, "deadlineAt": stub.DeadlineAt})
	rewriteRecord(t, s, site, id, func(f []string) []string { f[fieldStub] = string(legacy); return f })
}

// key is the full name of the key a script knows as K.<name>.
func (s *Store) key(name string) string { return s.prefix + keySuffix(name) }

// jobKey is the field naming a job of a site in the job hashes, as
// job_key in store/lua/common/20_codec.lua builds it.
func jobKey(site, id string) string { return strconv.Itoa(len(site)) + ":" + site + id }

// rewriteRecord edits a stored job record in place.
func rewriteRecord(t testing.TB, s *Store, site, id string, edit func([]string) []string) {
	t.Helper()
	c := s.client
	id = jobKey(site, id)
	raw, err := c.Do(t.Context(), c.B().Hget().Key(s.key("job")).Field(id).Build()).ToString()
	if err != nil {
		t.Fatalf("reading record %s: %v", id, err)
	}
	f, err := unframe(raw)
	if err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
	if err := c.Do(t.Context(), c.B().Hset().Key(s.key("job")).FieldValue().FieldValue(id, frame(edit(f)...)).Build()).Error(); err != nil {
		t.Fatalf("writing record %s: %v", id, err)
	}
}

// P2-D10: the contract's cases that move time (the sealing window's lapse
// among them) run here on the test clock lever, the store's own clock: the
// harness's Advance moves what the scripts read, by exactly that much, and
// a sealing window lapses on it.
func TestP2_D10_TheContractMovesTheStoreClockThroughTheLever(t *testing.T) {
	srv := valkeytest.Start(t)
	h := harness(t, srv.Client(t))
	s := h.Store.(*Store)
	ctx := t.Context()
	before, err := s.Now(ctx)
	require.NoError(t, err)
	st := testStub(t, s, "a")
	st.Audience = "team"
	_, err = s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Proto: store.Proto2, Stub: st})
	require.NoError(t, err)
	in := claimInput("r1", 1)
	in.Proto = store.Proto2
	got, err := s.Claim(ctx, in)
	require.NoError(t, err)
	require.Len(t, got, 1)

	h.Advance(t, protocol.AwaitingPayloadMs*time.Millisecond)
	after, err := s.Now(ctx)
	require.NoError(t, err)
	require.Equal(t, before+protocol.AwaitingPayloadMs, after)
	res, err := s.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, res.Lapsed)
	j, ok, err := s.Job(ctx, testSite, "a")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, j.SealAttempts)
	require.Equal(t, after+protocol.AwaitingPayloadMs, j.ReofferUntil)
}
