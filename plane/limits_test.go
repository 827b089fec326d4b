package plane_test

// The limits on what one body may hold beyond its size (docs/security.md):
// list lengths and ciphertext size are schema refusals after auth; the cap
// on JSON values also bounds the version check that runs before it.

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

func TestLimits_ListsOverTheCapAreSchemaRefusalsAfterAuth(t *testing.T) {
	opts := &setupOpts{Limits: protocol.Limits{MaxListItems: 2}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"), b.stub(t, "job-2", "alice"), b.stub(t, "job-3", "alice"))
		held := b.claim(t, d, 3)
		require.Len(t, held, 3)
		leases := []protocol.LeaseRef{lease(held[0]), lease(held[1]), lease(held[2])}
		before := b.dumpState(t)

		caps := peer.Capabilities([]string{protocol.KindGenerate, protocol.KindChat})
		caps = append(caps, caps[0])
		for endpoint, body := range map[string][]byte{
			"heartbeat (activeLeases)": heartbeatBody(t, "runner_alice", leases...),
			"heartbeat (capabilities)": mustJSON(t, protocol.HeartbeatRequest{ProtocolVersion: "0", RunnerID: "runner_alice", DaemonVersion: "x", Capabilities: caps, ActiveLeases: []protocol.LeaseRef{}}),
			"release":                  mustJSON(t, protocol.ReleaseRequest{ProtocolVersion: "0", RunnerID: "runner_alice", Leases: leases, Reason: protocol.ReasonShutdown}),
			"claim":                    mustJSON(t, protocol.ClaimRequest{ProtocolVersion: "0", RunnerID: "runner_alice", Capabilities: caps, Max: 1}),
		} {
			name := strings.Fields(endpoint)[0]
			resp, err := d.Do(b.ctx, name, body)
			require.NoError(t, err)
			requireAnswer(t, resp, 400, bodySchema)
			// Unsigned, the same body is refused as unsigned: auth comes first.
			requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/" + name, Body: body}), 401, bodyNotSigned)
		}
		require.Equal(t, before, b.dumpState(t), "nothing renewed, released or granted")

		// At the cap, the same requests pass.
		hb, err := d.Heartbeat(b.ctx, leases[:2])
		require.NoError(t, err)
		require.Empty(t, hb.Lost)
		rel, err := d.Release(b.ctx, leases[1:], protocol.ReasonShutdown)
		require.NoError(t, err)
		require.Equal(t, []string{"job-2", "job-3"}, rel.Released)
	})
}

func TestLimits_CiphertextOverTheCapIsASchemaRefusal(t *testing.T) {
	opts := &setupOpts{Limits: protocol.Limits{MaxCiphertextBytes: 16}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		d, c := claimedJob(t, b)
		env := protocol.SealedEnvelope{Ciphertext: strings.Repeat("A", 17), RecipientKeyID: b.keys["alice"].KeyID(), SenderKeyID: b.keys["site"].KeyID(), Direction: protocol.DirectionPayload, DeadlineAt: 1}

		resp := siteDo(b.ctx, t, b.site, http.MethodPost, "payload", mustJSON(t, protocol.PayloadRequest{SiteID: siteMain, JobID: c.ID, Envelope: env}))
		requireAnswer(t, resp, 400, bodySchema)
		b.requireState(t, c.ID, store.AwaitingPayload)

		env.Direction = protocol.DirectionResult
		env.RecipientKeyID, env.SenderKeyID = env.SenderKeyID, env.RecipientKeyID
		resp, err := d.Do(b.ctx, "result", mustJSON(t, protocol.ResultRequest{ProtocolVersion: "0", RunnerID: "runner_alice", JobID: c.ID, LeaseID: c.Lease.ID, Envelope: env, Disposition: protocol.DispositionOK}))
		require.NoError(t, err)
		requireAnswer(t, resp, 400, bodySchema)
		require.Nil(t, b.requireState(t, c.ID, store.AwaitingPayload).Result)

		env.Ciphertext = env.Ciphertext[:16]
		_, err = d.Result(b.ctx, c.ID, c.Lease.ID, env, protocol.DispositionOK)
		require.NoError(t, err, "at the cap")
		b.requireState(t, c.ID, store.Done)
	})
}

// A body holding more JSON values than any valid one could is refused
// while it is parsed, before a big tree is built; the protocol-version
// check that runs before the signature stops there too, so such a body
// from a stranger costs the relay one bounded parse and a 401.
func TestLimits_BodyWithTooManyValuesIsRefusedWithoutBeingRead(t *testing.T) {
	opts := &setupOpts{Limits: protocol.Limits{MaxListItems: 4}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		many := "[" + strings.Repeat("0,", 5000) + "0]"
		body := []byte(`{"protocolVersion":"2","runnerId":"runner_alice","x":` + many + `}`)
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: body}), 401, bodyNotSigned)

		d := b.paired(t, "alice")
		resp, err := d.Do(b.ctx, "claim", body)
		require.NoError(t, err)
		requireAnswer(t, resp, 400, bodySchema)
		resp = siteDo(b.ctx, t, b.site, http.MethodPost, "cancel", []byte(`{"siteId":"site_main","jobId":"j","x":`+many+`}`))
		requireAnswer(t, resp, 400, bodySchema)
	})
}
