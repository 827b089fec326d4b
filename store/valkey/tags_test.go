package valkey

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
)

// TestShardedTagsRewriteTheOneTag: every group's tag is the prefix's tag
// with its inner text extended, never text appended after it, which
// would leave all groups in the tag's one slot.
func TestShardedTagsRewriteTheOneTag(t *testing.T) {
	tags, err := splitTag(DefaultPrefix)
	require.NoError(t, err)
	require.Regexp(t, `^relayd:\{relayd\.b7(-[0-9]+)?\}:$`, tags.bucketPrefix(7, 48))
	require.Regexp(t, `^relayd:\{relayd\.r0(-[0-9]+)?\}:$`, tags.runnerPrefix(0, 48))
	require.Equal(t, "relayd:{relayd.g}:", tags.globalPrefix())
	tags, err = splitTag("{t}")
	require.NoError(t, err)
	require.Regexp(t, `^\{t\.b1(-[0-9]+)?\}$`, tags.bucketPrefix(1, 4))
	require.Equal(t, 0x31C3, keySlot("123456789"), "Cluster's own test vector")
}

// TestShardedGroupsSpreadEvenlyOverPrimaries: on a cluster of three
// primaries, each holds a third of the buckets and of the runner groups,
// where hashing the plain names would leave them at 20, 13 and 15 of 48;
// and the slot this layout computes is the one the cluster uses.
func TestShardedGroupsSpreadEvenlyOverPrimaries(t *testing.T) {
	client := valkeytest.StartCluster(t).Client(t)
	ctx := t.Context()
	slots, err := client.Do(ctx, client.B().ClusterSlots().Build()).ToArray()
	require.NoError(t, err)
	primaryOf := func(slot int64) int {
		for i, r := range slots {
			run, err := r.ToArray()
			require.NoError(t, err)
			lo, _ := run[0].AsInt64()
			hi, _ := run[1].AsInt64()
			if slot >= lo && slot <= hi {
				return i
			}
		}
		t.Fatalf("slot %d is no primary's", slot)
		return -1
	}
	tags, err := splitTag(DefaultPrefix)
	require.NoError(t, err)
	for _, group := range []func(i, n int) string{tags.bucketPrefix, tags.runnerPrefix} {
		held := make([]int, len(slots))
		for i := range 48 {
			key := group(i, 48) + "job"
			slot, err := client.Do(ctx, client.B().ClusterKeyslot().Key(key).Build()).AsInt64()
			require.NoError(t, err)
			inner := key[strings.IndexByte(key, '{')+1 : strings.IndexByte(key, '}')]
			require.EqualValues(t, slot, keySlot(inner), key)
			held[primaryOf(slot)]++
		}
		require.Equal(t, []int{16, 16, 16}, held)
	}
}

// TestShardedRefusesPrefixesWithoutExactlyOneTag: no tag, an empty one,
// and a second brace pair are all refused, the last because which text a
// cluster hashes would then hang on the rest of each key.
func TestShardedRefusesPrefixesWithoutExactlyOneTag(t *testing.T) {
	for _, p := range []string{"relayd:", "relayd:{}:", "a:{x}:{y}:", "a:{x{y}:", "a:}{x}:"} {
		_, err := splitTag(p)
		require.Error(t, err, p)
	}
}

// TestShardedMarkerRefusesEveryOtherLayout: a fresh prefix takes the
// sharded marker; a one-slot relay then refuses it, the sharded layout
// refuses a one-slot keyspace and one made before its groups' names were
// spread, and a bucket count other than the marker's is refused with the
// one to set.
func TestShardedMarkerRefusesEveryOtherLayout(t *testing.T) {
	srv := valkeytest.Shared(t)
	ctx := t.Context()
	prefix := valkeytest.Prefix(t)
	o := Options{Addrs: srv.Addrs, KeyPrefix: prefix}
	s, err := NewSharded(ctx, o, Sharding{Buckets: 8, Proto0Site: "s"})
	require.NoError(t, err)
	defer s.Close()
	v, err := s.client.Do(ctx, s.client.B().Get().Key(FormatKey(prefix)).Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, recordFormat+"/sharded/8/spread+hints", v)
	require.False(t, s.noHints)

	again, err := NewSharded(ctx, o, Sharding{Buckets: 8})
	require.NoError(t, err, "a second replica of the same layout opens")
	require.NoError(t, again.Close())

	_, err = New(ctx, o)
	require.ErrorContains(t, err, "holds the sharded layout")
	_, err = NewSharded(ctx, o, Sharding{Buckets: 48})
	require.ErrorContains(t, err, "--valkey-buckets 8")

	oneSlot := Options{Addrs: srv.Addrs, KeyPrefix: valkeytest.Prefix(t)}
	st, err := New(ctx, oneSlot)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	_, err = NewSharded(ctx, oneSlot, Sharding{})
	require.ErrorContains(t, err, "one-slot layout")

	// A keyspace of the sharded layout as first built, with plain group
	// names: this relay would read other keys than its relays wrote.
	early := Options{Addrs: srv.Addrs, KeyPrefix: valkeytest.Prefix(t)}
	require.NoError(t, s.client.Do(ctx, s.client.B().Set().Key(FormatKey(early.KeyPrefix)).Value(recordFormat+"/sharded/8").Build()).Error())
	_, err = NewSharded(ctx, early, Sharding{Buckets: 8})
	require.ErrorContains(t, err, "fresh key prefix")
}

// TestShardedMarkerKeepsTheHintsChoice: a keyspace made without route
// hints is marked so, and a relay asked for hints follows the marker and
// writes none there (a claim reading hints nobody wrote would miss jobs);
// one made with them keeps them for a relay asked for none.
func TestShardedMarkerKeepsTheHintsChoice(t *testing.T) {
	srv := valkeytest.Shared(t)
	ctx := t.Context()
	for _, made := range []bool{false, true} {
		o := Options{Addrs: srv.Addrs, KeyPrefix: valkeytest.Prefix(t)}
		first, err := NewSharded(ctx, o, Sharding{Buckets: 4, NoRouteHints: !made})
		require.NoError(t, err)
		defer first.Close()
		v, err := first.client.Do(ctx, first.client.B().Get().Key(FormatKey(o.KeyPrefix)).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, layoutMarker(4, made), v)
		second, err := NewSharded(ctx, o, Sharding{Buckets: 4, NoRouteHints: made})
		require.NoError(t, err)
		defer second.Close()
		require.Equal(t, !made, second.noHints, "made with hints: %v", made)
	}
}
