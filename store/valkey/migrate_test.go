package valkey

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// format1Job is a job as a relay of record format "1" stored it: under its
// bare id, in the keys without the "f2:" prefix.
type format1Job struct {
	id, state, runner, lease string
	refusedBy                []string
	cancelled                bool
	payload, result          *protocol.SealedEnvelope
}

func lencGo(s string) string { return strconv.Itoa(len(s)) + ":" + s }

// writeFormat1 writes j with every index entry a format-"1" relay kept for
// a job in its state, and returns its enqueue sequence.
func writeFormat1(t *testing.T, s *Store, j format1Job) int64 {
	t.Helper()
	ctx, c := t.Context(), s.client
	do := func(cmd valkey.Completed) {
		t.Helper()
		require.NoError(t, c.Do(ctx, cmd).Error())
	}
	seq, err := c.Do(ctx, c.B().Incr().Key(s.prefix+"seq").Build()).AsInt64()
	require.NoError(t, err)
	st := testStub(t, s, j.id)
	stub, err := json.Marshal(st)
	require.NoError(t, err)
	seq16 := fmt.Sprintf("%016d", seq)
	qm := lencGo(testSite) + lencGo(st.Owner) + lencGo(st.Kind) + "p|" + seq16 + j.id
	siteMember := lencGo(testSite) + "|" + seq16 + j.id
	now, err := s.Now(ctx)
	require.NoError(t, err)
	var device, cowner, lexp, await, cancelled string
	if j.runner != "" {
		dev, err := json.Marshal(grantedDevice{testDevice, testDeviceKeyID()})
		require.NoError(t, err)
		device, cowner, lexp = string(dev), "alice", strconv.FormatInt(now+30_000, 10)
	}
	if j.state == string(store.AwaitingPayload) {
		await = strconv.FormatInt(now+protocol.AwaitingPayloadMs, 10)
	}
	if j.cancelled {
		cancelled = "1"
	}
	deadline := strconv.FormatInt(st.DeadlineAt, 10)
	fields := append([]string{legacyFormat, testSite, strconv.FormatInt(seq, 10), deadline, j.state, string(stub), qm,
		j.runner, cowner, device, j.lease, lexp, await, cancelled, ""}, j.refusedBy...)
	do(c.B().Hset().Key(s.prefix+"job").FieldValue().FieldValue(j.id, frame(fields...)).Build())
	do(c.B().Zadd().Key(s.prefix+"order").ScoreMember().ScoreMember(float64(seq), j.id).Build())
	do(c.B().Zadd().Key(s.prefix+"deadline").ScoreMember().ScoreMember(float64(st.DeadlineAt), j.id).Build())
	switch store.State(j.state) {
	case store.Queued:
		if !j.cancelled {
			do(c.B().Zadd().Key(s.prefix+"queue").ScoreMember().ScoreMember(0, qm).Build())
			for _, r := range j.refusedBy {
				do(c.B().Zadd().Key(s.prefix+"refusals").ScoreMember().ScoreMember(0, lencGo(r)+qm).Build())
			}
		}
	case store.AwaitingPayload:
		do(c.B().Zadd().Key(s.prefix+"window").ScoreMember().ScoreMember(0, j.id).Build())
		do(c.B().Zadd().Key(s.prefix+"awaiting").ScoreMember().ScoreMember(0, siteMember).Build())
	case store.Done:
		do(c.B().Zadd().Key(s.prefix+"finished").ScoreMember().ScoreMember(0, siteMember).Build())
	default:
		do(c.B().Zadd().Key(s.prefix+"lease").ScoreMember().ScoreMember(0, j.id).Build())
	}
	if j.cancelled && j.runner != "" && j.state != string(store.Done) {
		do(c.B().Zadd().Key(s.prefix+"cancels").ScoreMember().ScoreMember(0, lencGo(j.runner)+"|"+seq16+j.id).Build())
	}
	for key, env := range map[string]*protocol.SealedEnvelope{"payload": j.payload, "result": j.result} {
		if env != nil {
			raw, err := json.Marshal(env)
			require.NoError(t, err)
			do(c.B().Hset().Key(s.prefix+key).FieldValue().FieldValue(j.id, string(raw)).Build())
		}
	}
	return seq
}

// A rolling upgrade: jobs a format-"1" relay left (queued, held, ready,
// done, cancelled) are moved by the next sweep into the format-2 keyspace
// as proto-0 jobs of their site, keeping their place, grant, payload,
// result, refusals and cancellation, and the old keys are left empty.
func TestFormat1JobsSurviveARollingUpgrade(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	payload, result := env(protocol.DirectionPayload, "p"), env(protocol.DirectionResult, "r")
	writeFormat1(t, s, format1Job{id: "queued", state: string(store.Queued), refusedBy: []string{"r9"}})
	writeFormat1(t, s, format1Job{id: "awaiting", state: string(store.AwaitingPayload), runner: "r1", lease: "L-await"})
	writeFormat1(t, s, format1Job{id: "ready", state: string(store.Ready), runner: "r1", lease: "L-ready", payload: &payload})
	writeFormat1(t, s, format1Job{id: "done", state: string(store.Done), runner: "r1", lease: "L-done", payload: &payload, result: &result})
	writeFormat1(t, s, format1Job{id: "stopped", state: string(store.Running), runner: "r1", lease: "L-stop", payload: &payload, cancelled: true})
	mustEnqueue(t, s, "new")

	_, err := s.Sweep(ctx)
	require.NoError(t, err)
	for _, k := range jobKeys {
		n, err := s.client.Do(ctx, s.client.B().Exists().Key(s.prefix+k).Build()).AsInt64()
		require.NoError(t, err)
		require.Zero(t, n, "old key %s is left empty", k)
	}
	all, err := s.Jobs(ctx, 0)
	require.NoError(t, err)
	var ids []string
	for _, j := range all {
		ids = append(ids, j.ID)
		require.Equal(t, store.Proto0, j.Proto, j.ID)
		require.Equal(t, testSite, j.SiteID, j.ID)
	}
	require.Equal(t, []string{"queued", "awaiting", "ready", "done", "stopped", "new"}, ids, "first-enqueue order is kept")

	// The queued job keeps its place and its refusal.
	got, err := s.Claim(ctx, claimInput("r9", 10))
	require.NoError(t, err)
	require.Equal(t, []string{"new"}, claimedIDs(got))
	got = mustClaim(t, s, "r2", 10)
	require.Equal(t, []string{"queued"}, claimedIDs(got))

	// The held grants carry on, named by site as v0 does or lease first.
	require.NoError(t, s.Payload(ctx, store.PayloadInput{JobID: "awaiting", SiteID: testSite, Envelope: payload}))
	fetched, err := s.Fetch(ctx, store.LeaseInput{SiteID: testSite, JobID: "ready", RunnerID: "r1", LeaseID: "L-ready"})
	require.NoError(t, err)
	require.Equal(t, payload, fetched)
	out, err := s.Result(ctx, store.ResultInput{LeaseInput: store.LeaseInput{JobID: "awaiting", RunnerID: "r1", LeaseID: "L-await"}, Envelope: result, Disposition: "ok"})
	require.NoError(t, err)
	require.False(t, out.Duplicate)
	res, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Equal(t, []string{"awaiting", "done"}, jobIDs(res))
	require.Equal(t, result, *res[1].Result)
	stop, err := s.CancelRequests(ctx, store.CancelRequestsInput{RunnerID: "r1"})
	require.NoError(t, err)
	require.Equal(t, []protocol.LeaseRef{{JobID: "stopped", LeaseID: "L-stop"}}, stop)
}

func jobIDs(js []store.Job) []string {
	out := []string{}
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}
