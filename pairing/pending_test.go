package pairing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/pairing"
	"github.com/byollm/relayd/protocol"
)

func TestConstants(t *testing.T) {
	require.Equal(t, int64(600000), pairing.CodeTTL.Milliseconds())
	require.Equal(t, int64(2000), pairing.PollInterval.Milliseconds())
	require.Equal(t, 500, pairing.DefaultCapacity)
}

func TestExpiry(t *testing.T) {
	issued := time.UnixMilli(1_700_000_000_000)
	expiresAt := pairing.ExpiresAt(issued)
	require.Equal(t, int64(1_700_000_600_000), expiresAt)
	tests := []struct {
		name    string
		now     time.Time
		expired bool
	}{
		{"at issue", issued, false},
		{"one ms before", time.UnixMilli(expiresAt - 1), false},
		{"sub-millisecond before", time.UnixMilli(expiresAt - 1).Add(999 * time.Microsecond), false},
		{"at expiresAt", time.UnixMilli(expiresAt), true},
		{"after", time.UnixMilli(expiresAt + 1), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.expired, pairing.Expired(expiresAt, tc.now))
			require.Equal(t, !tc.expired, pairing.Pending{ExpiresAt: expiresAt}.Live(tc.now))
		})
	}
}

func held(code, identity string, expiresAt int64) pairing.Held {
	return pairing.Held{DeviceCode: code, Identity: identity, ExpiresAt: expiresAt}
}

func TestPlanPut(t *testing.T) {
	now := time.UnixMilli(1000)
	tests := []struct {
		name     string
		held     []pairing.Held
		incoming pairing.Held
		capacity int
		want     pairing.PutPlan
	}{
		{"empty store", nil, held("a", "A", 2000), 2, pairing.PutPlan{Remove: []string{}, Stored: true}},
		{"below capacity", []pairing.Held{held("a", "A", 2000)}, held("b", "B", 2000), 2,
			pairing.PutPlan{Remove: []string{}, Stored: true}},
		{"at capacity", []pairing.Held{held("a", "A", 2000), held("b", "B", 2000)}, held("c", "C", 2000), 2,
			pairing.PutPlan{Remove: []string{}, Stored: false}},
		{"same keypair replaces its own code at capacity",
			[]pairing.Held{held("a", "A", 2000), held("b", "B", 2000)}, held("a2", "A", 2000), 2,
			pairing.PutPlan{Remove: []string{"a"}, Stored: true}},
		{"every code of the keypair goes",
			[]pairing.Held{held("a", "A", 2000), held("b", "B", 2000), held("a1", "A", 2000)}, held("a2", "A", 2000), 3,
			pairing.PutPlan{Remove: []string{"a", "a1"}, Stored: true}},
		{"expired codes are purged first and free room",
			[]pairing.Held{held("old", "X", 1000), held("b", "B", 2000)}, held("c", "C", 2000), 2,
			pairing.PutPlan{Remove: []string{"old"}, Stored: true}},
		{"a code expiring one ms later still counts",
			[]pairing.Held{held("a", "X", 1001), held("b", "B", 2000)}, held("c", "C", 2000), 2,
			pairing.PutPlan{Remove: []string{}, Stored: false}},
		{"refused put still removes the keypair's old code",
			[]pairing.Held{held("a", "A", 2000), held("b", "B", 2000), held("c", "C", 2000)}, held("a2", "A", 2000), 2,
			pairing.PutPlan{Remove: []string{"a"}, Stored: false}},
		{"zero capacity refuses everything", nil, held("a", "A", 2000), 0, pairing.PutPlan{Remove: []string{}, Stored: false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, pairing.PlanPut(tc.held, tc.incoming, now, tc.capacity))
		})
	}
}

// The reference's recorded run with capacity 2: a, b, c, then a again.
func TestPlanPutSequence(t *testing.T) {
	now := time.UnixMilli(0)
	var store []pairing.Held
	put := func(code, identity string) bool {
		in := held(code, identity, pairing.ExpiresAt(now))
		plan := pairing.PlanPut(store, in, now, 2)
		kept := store[:0:0]
		for _, h := range store {
			if !containsString(plan.Remove, h.DeviceCode) {
				kept = append(kept, h)
			}
		}
		store = kept
		if plan.Stored {
			store = append(store, in)
		}
		return plan.Stored
	}
	require.True(t, put("a1", "A"))
	require.True(t, put("b1", "B"))
	require.False(t, put("c1", "C"), "429")
	require.True(t, put("a2", "A"), "replaced its own code")
	require.Len(t, store, 2)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestFindByUserCode(t *testing.T) {
	now := time.UnixMilli(5000)
	pending := []pairing.Pending{
		{DeviceCode: "d-expired", UserCode: "AAAA-BBBB", ExpiresAt: 5000},
		{DeviceCode: "d-live", UserCode: "AAAA-BBBB", ExpiresAt: 5001},
		{DeviceCode: "d-other", UserCode: "CCCC-DDDD", ExpiresAt: 9000},
	}
	got, ok := pairing.FindByUserCode(pending, " aaaa-bbbb\n", now)
	require.True(t, ok)
	require.Equal(t, "d-live", got.DeviceCode, "the first live match")
	_, ok = pairing.FindByUserCode(pending, "AAAABBBB", now)
	require.False(t, ok, "the dash is part of the code")
	_, ok = pairing.FindByUserCode(pending, "CCCC-DDDD", time.UnixMilli(9000))
	require.False(t, ok, "expired")
}

func TestDetailsHideTheDeviceCode(t *testing.T) {
	p := pairing.Pending{
		DeviceCode: "secret-secret-secret-secret", UserCode: "AAAA-BBBB",
		Device: protocol.PublicIdentity{Identity: "I", Encryption: "E", EncryptionSig: "S"},
		Label:  "laptop", Platform: "linux", Capabilities: []byte(`[]`), ExpiresAt: 7,
	}
	d := p.Details()
	require.Equal(t, pairing.Details{
		UserCode: "AAAA-BBBB", Device: p.Device, Label: "laptop", Platform: "linux",
		Capabilities: []byte(`[]`), ExpiresAt: 7,
	}, d)
	require.Equal(t, pairing.Held{DeviceCode: p.DeviceCode, Identity: "I", ExpiresAt: 7}, p.Held())
}
