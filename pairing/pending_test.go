package pairing_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/pairing"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

func TestConstants(t *testing.T) {
	require.Equal(t, int64(600000), pairing.CodeTTL.Milliseconds())
	require.Equal(t, int64(2000), pairing.PollInterval.Milliseconds())
	require.Equal(t, 500, pairing.DefaultCapacity)
}

func TestDetailsHideTheDeviceCode(t *testing.T) {
	p := store.PendingPairing{
		DeviceCode: "secret-secret-secret-secret", UserCode: "AAAA-BBBB",
		Device: protocol.PublicIdentity{Identity: "I", Encryption: "E", EncryptionSig: "S"},
		Label:  "laptop", Platform: "linux", Capabilities: []byte(`[{"kind":"chat"}]`), ExpiresAt: 7,
	}
	d := pairing.DetailsOf(p)
	require.Equal(t, pairing.Details{
		UserCode: "AAAA-BBBB", Device: p.Device, Label: "laptop", Platform: "linux",
		Capabilities: []byte(`[{"kind":"chat"}]`), ExpiresAt: 7,
	}, d)
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "secret")
	require.JSONEq(t, `{"userCode":"AAAA-BBBB","device":{"identity":"I","encryption":"E","encryptionSig":"S"},
		"label":"laptop","platform":"linux","capabilities":[{"kind":"chat"}],"expiresAt":7}`, string(raw))

	p.Capabilities = nil
	raw, err = json.Marshal(pairing.DetailsOf(p))
	require.NoError(t, err)
	require.Contains(t, string(raw), `"capabilities":[]`, "always an array")
}
