package peer

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// pinned is a sites map holding keys under its own key id.
func pinned(keys ...Keys) proto2.Keyed[protocol.PublicIdentity] {
	var out proto2.Keyed[protocol.PublicIdentity]
	for _, k := range keys {
		out = append(out, proto2.Entry[protocol.PublicIdentity]{Key: k.KeyID(), Value: k.Public()})
	}
	return out
}

func TestDaemon2PinsOnlyConsistentSitesUnderTheirOwnKeyID(t *testing.T) {
	site, other := mustKeys(t), mustKeys(t)
	d, err := NewDaemon2(testConfig("http://127.0.0.1:1"), mustKeys(t), "runner-1")
	require.NoError(t, err)
	require.NoError(t, d.PinSites(pinned(site)))

	misfiled := pinned(site)
	misfiled[0].Key = other.KeyID()
	require.ErrorContains(t, d.PinSites(misfiled), "another key id")
	forged := pinned(site)
	forged[0].Value.Encryption = other.Public().Encryption
	require.ErrorContains(t, d.PinSites(forged), "not consistent")
	_, ok := d.SiteFor(site.KeyID())
	require.True(t, ok, "a refused set changes nothing")
}

// A stub naming a site the daemon has not pinned is refused before any
// fetch: its payload could come from anyone.
func TestDaemon2WorkRefusesAJobOfAnUnpinnedSite(t *testing.T) {
	relay := newFakeRelay(t)
	d, err := NewDaemon2(testConfig(relay.srv.URL), mustKeys(t), "runner-1")
	require.NoError(t, err)
	require.NoError(t, d.PinSites(pinned(mustKeys(t))))
	stranger := mustKeys(t)
	job := proto2.ClaimedStub{JobStub: proto2.JobStub{ID: "j", Site: stranger.KeyID()}, Lease: proto2.Lease{ID: "l"}}
	_, err = d.Work(context.Background(), job, func(p json.RawMessage) (json.RawMessage, error) { return p, nil }, Steps{})
	var step *StepError
	require.ErrorAs(t, err, &step)
	require.Equal(t, StepOpen, step.Step)
	require.Empty(t, relay.requests(), "nothing was fetched")
}

// The device-code flow polls on through pending and retryable failures,
// at the interval the relay asked for, and ends at expired.
func TestDaemon2PairDeviceCodePollsThroughPendingAndRetryableFailures(t *testing.T) {
	relay := newFakeRelay(t)
	polls := 0
	relay.handle("/byollm/pair", func(req seen) (int, string) {
		var body struct{ Action string }
		_ = json.Unmarshal(req.Body, &body)
		if body.Action == proto2.ActionStart {
			return 200, `{"deviceCode":"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG","userCode":"ABCD-EFGH","verificationUrl":"https://relay.example/pair","expiresAt":1800000600000,"pollIntervalMs":500}`
		}
		polls++
		switch polls {
		case 1:
			return 200, `{"status":"pending"}`
		case 2:
			return 503, `{"error":"server-error","message":"the store is unavailable"}`
		}
		return 200, `{"status":"expired"}`
	})
	d, err := NewDaemon2(testConfig(relay.srv.URL), mustKeys(t), "")
	require.NoError(t, err)
	approved := ""
	_, err = d.PairDeviceCode(context.Background(), "laptop", func(_ context.Context, start proto2.PairStartResponse) error {
		approved = start.UserCode
		return nil
	})
	require.ErrorContains(t, err, "the pairing ended expired")
	require.Equal(t, "ABCD-EFGH", approved)
	require.Equal(t, 3, polls)
	require.Empty(t, d.RunnerID())
}
