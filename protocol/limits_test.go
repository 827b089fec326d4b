package protocol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol/strictjson"
)

// repeat returns n deep copies of item, as a JSON array value.
func repeat(item func() jobj, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = item()
	}
	return out
}

func TestDecoderCapsEveryOpenList(t *testing.T) {
	d := NewDecoder(Limits{MaxListItems: 2})
	for _, tc := range []struct {
		schema string
		decode func([]byte) (any, error)
		key    string
		item   func() jobj
	}{
		{"claim", erase(d.Claim), "capabilities", capabilityBody},
		{"heartbeat", erase(d.Heartbeat), "capabilities", capabilityBody},
		{"heartbeat", erase(d.Heartbeat), "activeLeases", leaseBody},
		{"release", erase(d.Release), "leases", leaseBody},
	} {
		t.Run(tc.schema+" "+tc.key, func(t *testing.T) {
			s := schemaNamed(tc.schema)
			_, err := tc.decode(mustJSON(t, with(s.valid(), tc.key, repeat(tc.item, 2))))
			require.NoError(t, err, "at the cap")
			got, err := tc.decode(mustJSON(t, with(s.valid(), tc.key, repeat(tc.item, 3))))
			require.ErrorIs(t, err, ErrOverLimit)
			var derr *DecodeError
			require.ErrorAs(t, err, &derr)
			require.Equal(t, tc.key, derr.Path)
			require.Zero(t, reflectZero(got))
		})
	}
}

func TestDecoderCapsCiphertext(t *testing.T) {
	d := NewDecoder(Limits{MaxCiphertextBytes: 8})
	for _, tc := range []struct {
		schema string
		decode func([]byte) (any, error)
	}{
		{"result", erase(d.Result)},
		{"payload", erase(d.Payload)},
	} {
		t.Run(tc.schema, func(t *testing.T) {
			s := schemaNamed(tc.schema)
			_, err := tc.decode(mustJSON(t, with(s.valid(), "envelope.ciphertext", "12345678")))
			require.NoError(t, err, "at the cap")
			_, err = tc.decode(mustJSON(t, with(s.valid(), "envelope.ciphertext", "123456789")))
			require.ErrorIs(t, err, ErrOverLimit)
			var derr *DecodeError
			require.ErrorAs(t, err, &derr)
			require.Equal(t, "envelope.ciphertext", derr.Path)
		})
	}
}

func TestDefaultLimits(t *testing.T) {
	require.Equal(t, Limits{MaxListItems: 256, MaxCiphertextBytes: 4 << 20}, DefaultLimits())
	require.Equal(t, DefaultLimits(), NewDecoder(Limits{}).Limits, "zero fields take the defaults")

	// The package functions and the zero Decoder apply the defaults.
	hb := schemaNamed("heartbeat").valid()
	full := with(with(hb, "activeLeases", repeat(leaseBody, 256)), "capabilities", repeat(capabilityBody, 256))
	_, err := DecodeHeartbeat(mustJSON(t, full))
	require.NoError(t, err, "the largest valid heartbeat fits the value cap")
	_, err = Decoder{}.Heartbeat(mustJSON(t, with(hb, "activeLeases", repeat(leaseBody, 257))))
	require.ErrorIs(t, err, ErrOverLimit)

	big := strings.Repeat("A", 4<<20)
	_, err = DecodePayload(mustJSON(t, with(schemaNamed("payload").valid(), "envelope.ciphertext", big)))
	require.NoError(t, err)
	_, err = DecodePayload(mustJSON(t, with(schemaNamed("payload").valid(), "envelope.ciphertext", big+"A")))
	require.ErrorIs(t, err, ErrOverLimit)
}

// A body can carry many values where no schema looks (an unknown key, or
// the extra keys lease items may have). The value cap refuses it while
// parsing, before a large tree is built, and the version peek that runs
// before the signature check stops at the same cap.
func TestDecoderCapsValuesAnywhereInTheBody(t *testing.T) {
	d := NewDecoder(Limits{MaxListItems: 4})
	require.Equal(t, 64+16*4, d.Limits.MaxValues())
	many := "[" + strings.Repeat("0,", 200) + "0]"

	_, err := d.Cancel([]byte(`{"siteId":"s","jobId":"j","x":` + many + `}`))
	require.ErrorIs(t, err, strictjson.ErrTooMany)
	_, err = d.Release([]byte(`{"protocolVersion":"0","runnerId":"r","reason":"pause","leases":[{"jobId":"j","leaseId":"l","extra":` + many + `}]}`))
	require.ErrorIs(t, err, strictjson.ErrTooMany, "non-strict lease items do not escape the cap")

	_, present := d.PeekProtocolVersion([]byte(`{"protocolVersion":"2","x":` + many + `}`))
	require.False(t, present, "a body over the cap names no version")
	v, present := d.PeekProtocolVersion([]byte(`{"protocolVersion":"2","x":[0]}`))
	require.True(t, present)
	require.Equal(t, "2", v)
}
