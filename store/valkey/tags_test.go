package valkey

import (
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
	require.Equal(t, "relayd:{relayd.b7}:", tags.bucketPrefix(7))
	require.Equal(t, "relayd:{relayd.r0}:", tags.runnerPrefix(0))
	require.Equal(t, "relayd:{relayd.g}:", tags.globalPrefix())
	tags, err = splitTag("{t}")
	require.NoError(t, err)
	require.Equal(t, "{t.b1}", tags.bucketPrefix(1))
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
// refuses a one-slot keyspace, and a bucket count other than the
// marker's is refused with the one to set.
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
	require.Equal(t, recordFormat+"/sharded/8/hints", v)
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
