package valkey

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

const testSite = "site_valkey"

// testDevice holds every grant of these tests. Its identity decodes as a
// key, so that it has the key id the envelopes below name.
var testDevice = protocol.PublicIdentity{Identity: "dGhlIHRlc3QgZGV2aWNlJ3MgaWRlbnRpdHkga2V5IQ", Encryption: "enc-r1", EncryptionSig: "sig-r1"}

func testDeviceKeyID() string {
	id, _ := protocol.KeyIDOf(testDevice.Identity)
	return id
}

func testStub(t testing.TB, s *Store, id string) protocol.JobStub {
	t.Helper()
	now, err := s.Now(t.Context())
	require.NoError(t, err)
	return protocol.JobStub{ID: id, Kind: protocol.KindGenerate, Owner: "alice", Site: "SITE", Audience: protocol.AudiencePublic,
		SizeClass: "small", DeadlineAt: now + time.Hour.Milliseconds()}
}

func mustEnqueue(t testing.TB, s *Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, err := s.Enqueue(t.Context(), store.EnqueueInput{SiteID: testSite, Stub: testStub(t, s, id)})
		require.NoError(t, err)
	}
}

func claimInput(runner string, max int) store.ClaimInput {
	return store.ClaimInput{RunnerID: runner, Owner: "alice", Device: testDevice, Routes: []store.Route{{SiteID: testSite, Owner: "alice"}},
		Kinds: []string{protocol.KindGenerate}, Max: max, LeaseMs: 30_000}
}

func mustClaim(t testing.TB, s *Store, runner string, max int) []protocol.ClaimedStub {
	t.Helper()
	got, err := s.Claim(t.Context(), claimInput(runner, max))
	require.NoError(t, err)
	return got
}

// leaseOf names a proto-0 grant of testSite as the v0 codec does.
func leaseOf(c protocol.ClaimedStub) store.LeaseInput {
	return store.LeaseInput{SiteID: testSite, JobID: c.ID, RunnerID: c.Lease.RunnerID, LeaseID: c.Lease.ID}
}

// enqueue2 publishes proto-2 team jobs of alice for testSite.
func enqueue2(t testing.TB, s *Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		st := testStub(t, s, id)
		st.Audience = "team"
		_, err := s.Enqueue(t.Context(), store.EnqueueInput{SiteID: testSite, Proto: store.Proto2, Stub: st})
		require.NoError(t, err)
	}
}

func mustClaim2(t testing.TB, s *Store, runner string, max int) []protocol.ClaimedStub {
	t.Helper()
	in := claimInput(runner, max)
	in.Proto = store.Proto2
	got, err := s.Claim(t.Context(), in)
	require.NoError(t, err)
	return got
}

// env is an envelope between the site and testDevice.
func env(dir, tag string) protocol.SealedEnvelope {
	e := protocol.SealedEnvelope{Ciphertext: "ct-" + tag, RecipientKeyID: testDeviceKeyID(), SenderKeyID: "S", Direction: dir, DeadlineAt: 4_000_000_000_000}
	if dir == protocol.DirectionResult {
		e.RecipientKeyID, e.SenderKeyID = e.SenderKeyID, e.RecipientKeyID
	}
	return e
}

// dump reads every key under the store's prefix into one comparable map
// (values only: a remembered answer's remaining TTL is not state).
func dump(t testing.TB, s *Store) map[string]string {
	t.Helper()
	ctx, c := t.Context(), s.client
	out := map[string]string{}
	keys, err := c.Do(ctx, c.B().Keys().Pattern(strings.NewReplacer("{", `\{`, "}", `\}`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(s.prefix)+"*").Build()).AsStrSlice()
	require.NoError(t, err)
	for _, k := range keys {
		typ, err := c.Do(ctx, c.B().Type().Key(k).Build()).ToString()
		require.NoError(t, err)
		var v any
		switch typ {
		case "string":
			v, err = c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
		case "hash":
			v, err = c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
		case "zset":
			v, err = c.Do(ctx, c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
		case "set":
			var members []string
			members, err = c.Do(ctx, c.B().Smembers().Key(k).Build()).AsStrSlice()
			slices.Sort(members)
			v = members
		default:
			t.Fatalf("unexpected type %s of %s", typ, k)
		}
		require.NoError(t, err)
		out[k] = fmt.Sprintf("%s %v", typ, v)
	}
	return out
}

// rerun captures the next script call made by act, runs act, then runs the
// captured call again with identical keys and arguments and checks that
// the second run changed no key.
func rerun(t *testing.T, s *Store, op store.Op, act func()) (first, second valkey.ValkeyMessage) {
	t.Helper()
	var captured *call
	s.onCall = func(c call) {
		if c.op == op && captured == nil {
			captured = &c
		}
	}
	act()
	s.onCall = nil
	require.NotNil(t, captured, "%s was called", op)
	before := dump(t, s)
	again, err := s.exec(t.Context(), *captured)
	require.NoError(t, err)
	after := dump(t, s)
	require.Equal(t, before, after, "re-running %s with identical arguments changed the store", op)
	once, err := s.exec(t.Context(), *captured)
	require.NoError(t, err)
	return again, once
}

// TestEveryWriteIsSafeToRerun re-runs each write script with the arguments
// of a call that already ran (as a retry after a lost reply does) and
// checks that nothing changes. The clock runs (it is not pinned), so a
// stamping write would show a moved stamp if it were not remembered.
func TestEveryWriteIsSafeToRerun(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	rerunJobWrites(t, client)
	rerunCancelAndRenew(t, client)
	rerunRunnerWritesAndSweep(t, client)
	rerunV2Writes(t, client)
}

// rerunJobWrites re-runs the writes of a job's way from enqueue to
// result, and its release.
func rerunJobWrites(t *testing.T, client valkey.Client) {
	ctx := t.Context()
	t.Run("enqueue", func(t *testing.T) {
		s := newTestStore(t, client)
		rerun(t, s, store.OpEnqueue, func() { mustEnqueue(t, s, "a") })
	})
	t.Run("claim returns the same grants", func(t *testing.T) {
		s := newTestStore(t, client)
		mustEnqueue(t, s, "a", "b", "c")
		var got []protocol.ClaimedStub
		again, once := rerun(t, s, store.OpClaim, func() { got = mustClaim(t, s, "r1", 2) })
		require.Len(t, got, 2)
		require.Equal(t, again.String(), once.String())
		parts, err := again.AsStrSlice()
		require.NoError(t, err)
		f, err := unframe(parts[1])
		require.NoError(t, err)
		require.Equal(t, []string{got[0].Lease.ID, got[1].Lease.ID}, []string{f[1], f[4]}, "the re-run answers with the first grants")
		c, err := s.Claim(ctx, claimInput("r1", 64))
		require.NoError(t, err)
		require.Len(t, c, 1, "the third job was not granted by the re-runs")
	})
	t.Run("payload", func(t *testing.T) {
		s := newTestStore(t, client)
		mustEnqueue(t, s, "a")
		c := mustClaim(t, s, "r1", 1)[0]
		rerun(t, s, store.OpPayload, func() {
			require.NoError(t, s.Payload(ctx, store.PayloadInput{JobID: "a", SiteID: testSite, Envelope: env("payload", "a")}))
		})
		_ = c
	})
	t.Run("fetch", func(t *testing.T) {
		s := newTestStore(t, client)
		mustEnqueue(t, s, "a")
		c := mustClaim(t, s, "r1", 1)[0]
		require.NoError(t, s.Payload(ctx, store.PayloadInput{JobID: "a", SiteID: testSite, Envelope: env("payload", "a")}))
		rerun(t, s, store.OpFetch, func() {
			_, err := s.Fetch(ctx, leaseOf(c))
			require.NoError(t, err)
		})
	})
	t.Run("result", func(t *testing.T) {
		s := newTestStore(t, client)
		mustEnqueue(t, s, "a")
		c := mustClaim(t, s, "r1", 1)[0]
		rerun(t, s, store.OpResult, func() {
			res, err := s.Result(ctx, store.ResultInput{LeaseInput: leaseOf(c), Envelope: env("result", "a"), Disposition: "ok"})
			require.NoError(t, err)
			require.False(t, res.Duplicate)
		})
	})
	t.Run("release", func(t *testing.T) {
		s := newTestStore(t, client)
		mustEnqueue(t, s, "a")
		c := mustClaim(t, s, "r1", 1)[0]
		rerun(t, s, store.OpRelease, func() {
			ids, err := s.Release(ctx, store.ReleaseInput{RunnerID: "r1", Leases: []protocol.LeaseRef{{JobID: c.ID, LeaseID: c.Lease.ID}}, Reason: "refused"})
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, ids)
		})
	})
}

// rerunCancelAndRenew re-runs a cancel, the read of cancel requests and a
// renew.
func rerunCancelAndRenew(t *testing.T, client valkey.Client) {
	ctx := t.Context()
	t.Run("cancel", func(t *testing.T) {
		s := newTestStore(t, client)
		mustEnqueue(t, s, "a", "b")
		mustClaim(t, s, "r1", 1)
		rerun(t, s, store.OpCancel, func() {
			ok, err := s.Cancel(ctx, store.CancelInput{JobID: "a", SiteID: testSite})
			require.NoError(t, err)
			require.True(t, ok)
		})
		rerun(t, s, store.OpCancel, func() {
			_, err := s.Cancel(ctx, store.CancelInput{JobID: "b", SiteID: testSite})
			require.NoError(t, err)
		})
	})
	t.Run("cancelRequests after the window lapsed", func(t *testing.T) {
		s := newTestStore(t, client)
		mustEnqueue(t, s, "a")
		mustClaim(t, s, "r1", 1)
		_, err := s.Cancel(ctx, store.CancelInput{JobID: "a", SiteID: testSite})
		require.NoError(t, err)
		advance(t, s, 11*time.Second)
		rerun(t, s, store.OpCancelRequests, func() {
			ids, err := s.CancelRequests(ctx, store.CancelRequestsInput{RunnerID: "r1"})
			require.NoError(t, err)
			require.Empty(t, ids)
		})
	})
	t.Run("renew returns the same expiry", func(t *testing.T) {
		s := newTestStore(t, client)
		mustEnqueue(t, s, "a")
		c := mustClaim(t, s, "r1", 1)[0]
		again, once := rerun(t, s, store.OpRenew, func() {
			res, err := s.Renew(ctx, store.RenewInput{RunnerID: "r1", Leases: []protocol.LeaseRef{{JobID: c.ID, LeaseID: c.Lease.ID}}, LeaseMs: 60_000})
			require.NoError(t, err)
			require.Len(t, res.Renewed, 1)
		})
		require.Equal(t, again.String(), once.String())
	})
}

// rerunRunnerWritesAndSweep re-runs pairing, the presence touch and a
// sweep.
func rerunRunnerWritesAndSweep(t *testing.T, client valkey.Client) {
	ctx := t.Context()
	t.Run("pair", func(t *testing.T) {
		s := newTestStore(t, client)
		rerun(t, s, store.OpPair, func() {
			_, err := s.Pair(ctx, store.PairInput{RunnerID: "r1", Owner: "alice", Device: testDevice})
			require.NoError(t, err)
		})
	})
	t.Run("touch", func(t *testing.T) {
		s := newTestStore(t, client)
		_, err := s.Pair(ctx, store.PairInput{RunnerID: "r1", Owner: "alice", Device: testDevice})
		require.NoError(t, err)
		rerun(t, s, store.OpTouch, func() {
			ok, err := s.Touch(ctx, store.TouchInput{RunnerID: "r1"})
			require.NoError(t, err)
			require.True(t, ok)
		})
	})
	t.Run("sweep", func(t *testing.T) {
		s := newTestStore(t, client)
		mustEnqueue(t, s, "a", "b")
		mustClaim(t, s, "r1", 1)
		stub := testStub(t, s, "late")
		stub.DeadlineAt -= 2 * time.Hour.Milliseconds()
		_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: stub})
		require.NoError(t, err)
		advance(t, s, 11*time.Second)
		rerun(t, s, store.OpSweep, func() {
			res, err := s.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, store.SweepResult{Requeued: []string{"a"}, Expired: []string{"late"}, Lapsed: []string{}}, res)
		})
	})
}

// rerunV2Writes re-runs the writes that differ under protocol 2, and a
// pairing that records capabilities.
func rerunV2Writes(t *testing.T, client valkey.Client) {
	ctx := t.Context()
	t.Run("v2 sweep counts a lapse once", func(t *testing.T) {
		s := newTestStore(t, client)
		enqueue2(t, s, "a")
		mustClaim2(t, s, "r1", 1)
		advance(t, s, 11*time.Second)
		rerun(t, s, store.OpSweep, func() {
			res, err := s.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, res.Lapsed)
		})
		j, _, err := s.Job(ctx, testSite, "a")
		require.NoError(t, err)
		require.Equal(t, 1, j.SealAttempts)
	})
	t.Run("v2 release with a not-before", func(t *testing.T) {
		s := newTestStore(t, client)
		enqueue2(t, s, "a")
		c := mustClaim2(t, s, "r1", 1)[0]
		rerun(t, s, store.OpRelease, func() {
			ids, err := s.Release(ctx, store.ReleaseInput{Proto: store.Proto2, RunnerID: "r1", Leases: []protocol.LeaseRef{{JobID: c.ID, LeaseID: c.Lease.ID}}, RetryAfterMs: 30_000})
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, ids)
		})
	})
	t.Run("v2 claim returns the same grants", func(t *testing.T) {
		s := newTestStore(t, client)
		enqueue2(t, s, "a", "b", "c")
		again, once := rerun(t, s, store.OpClaim, func() { require.Len(t, mustClaim2(t, s, "r1", 5), store.UnsealedPerRoute) })
		require.Equal(t, again.String(), once.String())
	})
	t.Run("pair with capabilities", func(t *testing.T) {
		s := newTestStore(t, client)
		rerun(t, s, store.OpPair, func() {
			_, err := s.Pair(ctx, store.PairInput{RunnerID: "r1", Owner: "alice", Device: testDevice, Capabilities: []byte(`[{"kind":"llm.generate"}]`), Withheld: []byte(`[]`)})
			require.NoError(t, err)
		})
		p, ok, err := s.Presence(ctx, "r1")
		require.NoError(t, err)
		require.True(t, ok)
		require.JSONEq(t, `[{"kind":"llm.generate"}]`, string(p.Capabilities))
		require.JSONEq(t, `[]`, string(p.Withheld))
	})
}

// TestSurvivesFunctionFlush empties the server's functions between calls:
// the next call finds its function missing, loads the library again and
// answers.
func TestSurvivesFunctionFlush(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	s := newTestStore(t, client)
	ctx := t.Context()
	mustEnqueue(t, s, "a", "b")
	flush := func() {
		require.NoError(t, client.Do(ctx, client.B().FunctionFlush().Build()).Error())
		require.Empty(t, libraries(t, client), "the flush left no library")
	}
	flush()
	got := mustClaim(t, s, "r1", 1)
	require.Len(t, got, 1)
	require.Equal(t, []string{libraryOf(s.scripts).name}, libraries(t, client), "the claim loaded the library again")
	flush()
	j, ok, err := s.Job(ctx, testSite, "a")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store.AwaitingPayload, j.State)
	flush()
	require.NoError(t, s.LoadScripts(ctx), "the library loads again")
	require.Equal(t, []string{libraryOf(s.scripts).name}, libraries(t, client))
}

// libraries lists the relayd libraries the server holds, by name, sorted.
func libraries(t testing.TB, c valkey.Client) []string {
	t.Helper()
	list, err := c.Do(t.Context(), c.B().FunctionList().Libraryname(libraryPrefix+"*").Build()).ToArray()
	require.NoError(t, err)
	var names []string
	for _, lib := range list {
		m, err := lib.AsMap()
		require.NoError(t, err)
		field := m["library_name"]
		name, err := field.ToString()
		require.NoError(t, err)
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// serverTime reads Valkey's TIME in milliseconds, straight from the server.
func serverTime(t testing.TB, c valkey.Client) int64 {
	t.Helper()
	parts, err := c.Do(t.Context(), c.B().Time().Build()).AsIntSlice()
	require.NoError(t, err)
	return parts[0]*1000 + parts[1]/1000
}

// TestOneClock shows the store clock is Valkey's TIME and nothing else: two
// stores (two relays) sharing state stamp every lease, window and presence
// within TIME readings taken just before and after, so whatever the relays'
// own clocks say cannot matter. TestNoGoClock shows no Go clock is read.
func TestOneClock(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	a := newTestStore(t, client)
	b, err := NewFromClient(client, a.prefix) // a second relay on the same state
	require.NoError(t, err)
	ctx := t.Context()
	mustEnqueue(t, a, "x")

	const leaseMs = 30_000
	before := serverTime(t, client)
	got := mustClaim(t, b, "r1", 1)
	after := serverTime(t, client)
	require.Len(t, got, 1)
	require.GreaterOrEqual(t, got[0].Lease.ExpiresAt, before+leaseMs)
	require.LessOrEqual(t, got[0].Lease.ExpiresAt, after+leaseMs)
	j, _, err := a.Job(ctx, testSite, "x")
	require.NoError(t, err)
	require.Equal(t, got[0].Lease.ExpiresAt, j.ClaimedBy.LeaseExpiresAt, "both relays read the same stamp")
	require.GreaterOrEqual(t, j.AwaitingUntil, before+protocol.AwaitingPayloadMs)
	require.LessOrEqual(t, j.AwaitingUntil, after+protocol.AwaitingPayloadMs)

	before = serverTime(t, client)
	res, err := a.Renew(ctx, store.RenewInput{RunnerID: "r1", Leases: []protocol.LeaseRef{{JobID: "x", LeaseID: got[0].Lease.ID}}, LeaseMs: 90_000})
	after = serverTime(t, client)
	require.NoError(t, err)
	require.Len(t, res.Renewed, 1)
	require.GreaterOrEqual(t, res.Renewed[0].ExpiresAt, before+90_000)
	require.LessOrEqual(t, res.Renewed[0].ExpiresAt, after+90_000)

	before = serverTime(t, client)
	p, err := b.Pair(ctx, store.PairInput{RunnerID: "r1", Owner: "alice", Device: testDevice})
	after = serverTime(t, client)
	require.NoError(t, err)
	require.GreaterOrEqual(t, p.LastSeenAt, before)
	require.LessOrEqual(t, p.LastSeenAt, after)

	before = serverTime(t, client)
	now, err := a.Now(ctx)
	after = serverTime(t, client)
	require.NoError(t, err)
	require.GreaterOrEqual(t, now, before)
	require.LessOrEqual(t, now, after)
}

// TestNoGoClock checks that the store's Go code never reads a clock: every
// time value comes from the scripts' TIME.
func TestNoGoClock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" && slices.Contains([]string{"Now", "Since", "Until", "Tick", "After", "NewTimer", "NewTicker"}, sel.Sel.Name) {
				t.Errorf("%s: store code reads a Go clock (time.%s)", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

// TestStoppedServer shows a store whose server is gone fails with plain
// (retryable) errors, never refusals, once its calls' deadline has passed
// (a script call retries until then: outage.go), and recovers by itself
// once the server is back.
func TestStoppedServer(t *testing.T) {
	srv := valkeytest.Start(t)
	if !srv.CanRestart() {
		t.Skip("needs a server started by valkeytest from a binary")
	}
	ctx := t.Context()
	s, err := New(ctx, Options{Addrs: []string{srv.Addr}, KeyPrefix: valkeytest.Prefix(t), MaxRetries: 2, DialTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	mustEnqueue(t, s, "a")

	srv.Stop(t)
	calls := map[string]func(context.Context) error{
		"ping": s.Ping,
		"now":  func(ctx context.Context) error { _, err := s.Now(ctx); return err },
		"enqueue": func(ctx context.Context) error {
			_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: protocol.JobStub{ID: "b"}})
			return err
		},
		"claim": func(ctx context.Context) error { _, err := s.Claim(ctx, claimInput("r1", 1)); return err },
		"job":   func(ctx context.Context) error { _, _, err := s.Job(ctx, testSite, "a"); return err },
		"sweep": func(ctx context.Context) error { _, err := s.Sweep(ctx); return err },
	}
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := calls[name](cctx)
		cancel()
		require.Error(t, err, name)
		require.Empty(t, store.RefusalOf(err), "%s: a lost server is not a refusal: %v", name, err)
	}

	srv.Restart(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.Ping(cctx)
		cancel()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "store did not recover: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
	mustEnqueue(t, s, "c")
	require.Len(t, mustClaim(t, s, "r1", 64), 1, "the restarted server is empty but for the new job")
}

// TestUnreadableRecordsAreNeverHandedOut covers records a claim must pass
// over: a stub that no longer decodes, a record of an unknown format
// version and a record that is not framed at all. Each stays queued, blocks
// no grant, and the deadline still removes it.
func TestUnreadableRecordsAreNeverHandedOut(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	ctx := t.Context()
	s := newTestStore(t, client)

	mustEnqueue(t, s, "legacy", "future", "garbage", "badjson", "good1")
	rewriteRecord(t, s, testSite, "legacy", func(f []string) []string { f[fieldStub] = `{"id":"legacy","owner":"alice"}`; return f })
	rewriteRecord(t, s, testSite, "future", func(f []string) []string { f[fieldVersion] = "9"; return f })
	rewriteRecord(t, s, testSite, "garbage", func([]string) []string { return []string{"not a record"} })
	require.NoError(t, client.Do(ctx, client.B().Hset().Key(s.key("job")).FieldValue().FieldValue(jobKey(testSite, "garbage"), "}{ not framed").Build()).Error())
	rewriteRecord(t, s, testSite, "badjson", func(f []string) []string { f[fieldStub] = `{"id":"badjson",`; return f })
	mustEnqueue(t, s, "good2")

	got := mustClaim(t, s, "r1", 64)
	require.Equal(t, []string{"good1", "good2"}, []string{got[0].ID, got[1].ID})
	require.Len(t, got, 2)
	require.Empty(t, mustClaim(t, s, "r2", 64))

	queued, err := client.Do(ctx, client.B().Zcard().Key(s.key("queue")).Build()).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 4, queued, "the four unreadable jobs stay queued")
	j, ok, err := s.Job(ctx, testSite, "legacy")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store.Queued, j.State)
	_, _, err = s.Job(ctx, testSite, "future")
	require.ErrorIs(t, err, errUnreadable)
	require.Empty(t, store.RefusalOf(err))
	all, err := s.Jobs(ctx, 0)
	require.NoError(t, err)
	require.Len(t, all, 4, "listings skip records they cannot read")

	_, err = s.Fetch(ctx, store.LeaseInput{SiteID: testSite, JobID: "future", RunnerID: "r1", LeaseID: "x"})
	require.Error(t, err)
	require.Empty(t, store.RefusalOf(err), "an unreadable record is a failure, not an answer")

	advance(t, s, 2*time.Hour)
	res, err := s.Sweep(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"legacy", "future", "garbage", "badjson", "good1", "good2"}, res.Expired)
	left, err := client.Do(ctx, client.B().Hlen().Key(s.key("job")).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, left)
	// Entries an unreadable record left in the claim queue are repaired by
	// the next claim that meets them.
	require.Empty(t, mustClaim(t, s, "r1", 64))
	queued, err = client.Do(ctx, client.B().Zcard().Key(s.key("queue")).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, queued)
}

// TestOptions covers the mapping onto valkey-go and the prefix rule.
func TestOptions(t *testing.T) {
	require.Error(t, ValidatePrefix("relayd:"))
	require.Error(t, ValidatePrefix("relayd:{}:"))
	require.NoError(t, ValidatePrefix("relayd:{r}:"))
	_, err := New(t.Context(), Options{Addrs: []string{"127.0.0.1:1"}, KeyPrefix: "nope"})
	require.ErrorContains(t, err, "hash tag")
	_, err = Options{}.clientOption()
	require.Error(t, err)
	_, err = Options{Addrs: []string{"a:1"}, Cluster: true, SentinelMasterSet: "m"}.clientOption()
	require.Error(t, err)

	o, err := Options{Addrs: []string{"a:1"}, Username: "u", Password: "p"}.clientOption()
	require.NoError(t, err)
	require.True(t, o.ForceSingleClient)
	require.Equal(t, "u", o.Username)
	o, err = Options{Addrs: []string{"a:1"}, Cluster: true}.clientOption()
	require.NoError(t, err)
	require.False(t, o.ForceSingleClient)
	o, err = Options{Addrs: []string{"s:26379"}, SentinelMasterSet: "mymaster"}.clientOption()
	require.NoError(t, err)
	require.Equal(t, "mymaster", o.Sentinel.MasterSet)
	require.Negative(t, o.RetryDelay(4, valkey.Completed{}, errors.New("x")), "gives up after MaxRetries")
}

// TestNewConnectsStandaloneAndCluster opens the store the way relayd does.
func TestNewConnectsStandaloneAndCluster(t *testing.T) {
	srv := valkeytest.Start(t)
	s, err := New(t.Context(), Options{Addrs: []string{srv.Addr}, KeyPrefix: valkeytest.Prefix(t)})
	require.NoError(t, err)
	mustEnqueue(t, s, "a")
	require.Len(t, mustClaim(t, s, "r1", 1), 1)
	require.NoError(t, s.Close())
	if testing.Short() {
		return
	}
	cl := valkeytest.StartCluster(t)
	s, err = New(t.Context(), Options{Addrs: cl.Addrs, Cluster: true, KeyPrefix: valkeytest.Prefix(t)})
	require.NoError(t, err)
	defer s.Close()
	mustEnqueue(t, s, "a")
	require.Len(t, mustClaim(t, s, "r1", 1), 1)
}

// TestLeaseIDs checks the lease id shape: lowercase UUID version 4.
func TestLeaseIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newUUID()
		require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, id)
		require.False(t, seen[id])
		seen[id] = true
	}
}

func TestFrameRoundTrip(t *testing.T) {
	in := []string{"", "a", "x:y", "12:34", strings.Repeat("z", 300), "\x00\xff"}
	out, err := unframe(frame(in...))
	require.NoError(t, err)
	require.Equal(t, in, out)
	for _, bad := range []string{"5:abc", "x:abc", ":", "3", "-1:"} {
		_, err := unframe(bad)
		require.Error(t, err, bad)
	}
}

// P2-D11 in the Valkey store: a grant's record keeps its device's key id so
// the seal and complete scripts can compare envelopes without hashing in
// Lua. A grant written before key ids were kept (a record from an older
// replica during a rolling upgrade) has none, and its envelopes are let
// through as before rather than refused for a rule it predates.
func TestP2_D11_GrantRecordedWithoutAKeyIDIsNotSecondGuessed(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	mustEnqueue(t, s, "a")
	c := mustClaim(t, s, "r1", 1)[0]

	var stored map[string]string
	rewriteRecord(t, s, testSite, "a", func(f []string) []string {
		require.NoError(t, json.Unmarshal([]byte(f[fieldDevice]), &stored))
		old, err := json.Marshal(testDevice)
		require.NoError(t, err)
		f[fieldDevice] = string(old)
		return f
	})
	require.Equal(t, testDeviceKeyID(), stored["keyId"], "a new grant records its device's key id")

	other := env(protocol.DirectionPayload, "a")
	other.RecipientKeyID = "BYOLLM-SOMEONE-ELSE"
	require.NoError(t, s.Payload(ctx, store.PayloadInput{JobID: "a", SiteID: testSite, Envelope: other}))
	res := env(protocol.DirectionResult, "a")
	res.SenderKeyID = "BYOLLM-SOMEONE-ELSE"
	_, err := s.Result(ctx, store.ResultInput{LeaseInput: leaseOf(c), Envelope: res, Disposition: "ok"})
	require.NoError(t, err)
}
