package proto2

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/nodetest"
)

// The spec's observed results with floor 0.1.1 and offer 0.1.2 (§4.13).
func TestFloorAndOffer(t *testing.T) {
	for _, c := range []struct {
		daemon  string
		refused bool
		offer   string
	}{
		{"0.1.0", true, "0.1.2"}, // the 426 goes first; the offer alone would be made
		{"0.1.1", false, "0.1.2"},
		{"0.1.2", false, ""},
		{"garbage", false, ""},
		{"0.1.0-alpha.82", true, ""},
	} {
		require.Equal(t, c.refused, CheckFloor(c.daemon, "0.1.1") != nil, c.daemon)
		require.Equal(t, c.offer, UpdateTo("0.1.2", c.daemon), c.daemon)
	}
	require.Nil(t, CheckFloor("0.1.0", "latest"), "an unparseable floor refuses nobody")
	require.Equal(t, "", UpdateTo("", "0.1.1"))
	require.Equal(t, "", UpdateTo("latest", "0.1.1"), "never a tag")
	require.Equal(t, "", UpdateTo("0.2.0", "0.1.0-alpha.82"), "too old to read updateTo")
	require.Equal(t, "0.2.0", UpdateTo("0.2.0", "0.1.0-alpha.83"))
}

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"0.1.0-alpha.9", "0.1.0-alpha.83", -1}, // numerically, not as text
		{"1.0.0", "1.0.0-alpha.1", 1},
		{"1.0.0-alpha", "1.0.0-alpha.1", -1},
		{"1.0.0-1", "1.0.0-alpha", -1},
		{"1.0.0+build.1", "1.0.0+build.2", 0},
		{"01.2.3", "1.2.3", 0},
		{"1.0.0-beta", "1.0.0-alpha", 1},
	} {
		got, ok := CompareVersions(c.a, c.b)
		require.True(t, ok)
		require.Equal(t, c.want, got, "%s vs %s", c.a, c.b)
	}
	for _, bad := range []string{"1.0", "v1.0.0", "1.0.0-", "1.0.0 ", "١.٢.٣"} {
		_, ok := CompareVersions(bad, "1.0.0")
		require.False(t, ok, bad)
	}
}

// TestVersionsDifferential holds CompareVersions, CheckFloor and UpdateTo
// to the published compareVersions, checkDaemonFloor and updateOfferFor
// over every pair of a list of versions.
func TestVersionsDifferential(t *testing.T) {
	interop := nodetest.Interop(t, "@byollm/protocol")
	versions := []string{
		"0.1.0", "0.1.1", "0.1.2", "1.0.0", "01.0.0", "0.1.0-alpha.82", "0.1.0-alpha.83", "0.1.0-alpha.9",
		"0.1.0-alpha", "0.1.0-beta", "0.1.0-1", "0.1.0-alpha.1.x", "0.1.0-a..b", "0.1.0-rc.1+build.5",
		"1.0.0+x", "garbage", "", "1.0", "9007199254740993.0.0", "9007199254740992.0.0", "0.1.1-",
	}
	var pairs [][2]string
	for _, a := range versions {
		for _, b := range versions {
			pairs = append(pairs, [2]string{a, b})
		}
	}
	in, err := json.Marshal(pairs)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "testdata/versioncheck.mjs", interop)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	require.NoError(t, err)
	var want [][3]*json.RawMessage
	require.NoError(t, json.Unmarshal(out, &want))
	require.Len(t, want, len(pairs))
	for i, p := range pairs {
		order, ok := CompareVersions(p[0], p[1])
		var floor, offer any
		if r := CheckFloor(p[0], p[1]); r != nil {
			floor = r.Body.Floor
		}
		if u := UpdateTo(p[1], p[0]); u != "" {
			offer = u
		}
		var cmp any
		if ok {
			cmp = order
		}
		got, err := json.Marshal([3]any{cmp, floor, offer})
		require.NoError(t, err)
		wantJSON, err := json.Marshal(want[i])
		require.NoError(t, err)
		require.JSONEq(t, string(wantJSON), string(got), "%q vs %q", p[0], p[1])
	}
}
