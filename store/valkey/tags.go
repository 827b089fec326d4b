package valkey

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"
)

// The sharded layout (docs/sharding.md) spreads one keyspace over many
// hash tags, all made from the one tag of the configured prefix by
// rewriting its inner text: Cluster hashes only what lies between the
// first "{" and the next "}", so appending to a prefix that holds a tag
// would put every group in the tag's one slot.

// MaxBuckets bounds the sharded layout's buckets: a lease id names its
// bucket in one byte.
const MaxBuckets = 256

// DefaultBuckets is the sharded layout's number of buckets: many times
// the primaries of any cluster it is meant for (up to a dozen), so that
// moving slots rebalances buckets without splitting one.
const DefaultBuckets = 48

// taggedPrefix is a prefix cut around its one hash tag.
type taggedPrefix struct{ before, inner, after string }

// splitTag cuts prefix around its hash tag, refusing a prefix with no
// tag or with more than one brace pair: the sharded layout rewrites the
// tag, and a second pair would leave which text Cluster hashes to
// whoever reads the key.
func splitTag(prefix string) (taggedPrefix, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return taggedPrefix{}, err
	}
	open := strings.IndexByte(prefix, '{')
	end := open + 1 + strings.IndexByte(prefix[open+1:], '}')
	t := taggedPrefix{before: prefix[:open], inner: prefix[open+1 : end], after: prefix[end+1:]}
	if strings.ContainsAny(t.inner, "{") || strings.ContainsAny(t.before+t.after, "{}") {
		return taggedPrefix{}, fmt.Errorf("valkey store: key prefix %q has more than one brace pair; the sharded layout needs exactly one hash tag, e.g. %q", prefix, DefaultPrefix)
	}
	return t, nil
}

// with returns the prefix with its tag's inner text followed by suffix.
func (t taggedPrefix) with(suffix string) string {
	return t.before + "{" + t.inner + suffix + "}" + t.after
}

// bucketPrefix is the prefix of bucket i of n: a site's jobs and
// listings.
func (t taggedPrefix) bucketPrefix(i, n int) string { return t.with(t.spread(".b", i, n)) }

// runnerPrefix is the prefix of runner group i of n: protocol-"2"
// presences, rate buckets, the buckets each runner holds grants in, and
// job owners' route hints.
func (t taggedPrefix) runnerPrefix(i, n int) string { return t.with(t.spread(".r", i, n)) }

// spread names group i of n of a kind so that its slot lies in the
// middle half of the i-th of n equal runs of Cluster's slots: the first
// of kind+i, kind+i+"-1", kind+i+"-2", ... that does. A cluster whose
// primaries each hold one run of slots of about equal length (what
// valkey-cli --cluster create makes, and what moving whole runs keeps)
// then holds an equal share of the groups, give or take one, where
// plain hashing can leave one primary with half as many again as
// another (20, 13 and 15 of 48 buckets on three). The middle half keeps
// a group inside its run when a cluster's runs are cut a slot off ours.
// With at most MaxBuckets groups the middle half is at least 32 slots
// wide, so the search ends after about 2n names.
func (t taggedPrefix) spread(kind string, i, n int) string {
	width := float64(clusterSlots) / float64(n)
	lo, hi := int(float64(i)*width+width/4), int(float64(i)*width+3*width/4)
	name := kind + strconv.Itoa(i)
	for j := 1; ; j++ {
		if slot := keySlot(t.inner + name); slot >= lo && slot < hi {
			return name
		}
		name = kind + strconv.Itoa(i) + "-" + strconv.Itoa(j)
	}
}

// clusterSlots is the number of hash slots of a Valkey Cluster.
const clusterSlots = 16384

// keySlot is the Cluster hash slot of a tag's text: CRC16 (XMODEM) of
// it, modulo clusterSlots.
func keySlot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// globalPrefix holds what is one for the whole keyspace: pending
// pairings and the index of runners.
func (t taggedPrefix) globalPrefix() string { return t.with(".g") }

// shardOf places a name (a site or a runner id) in one of n groups.
func shardOf(name string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name)) // a hash never fails to write
	return int(h.Sum32() % uint32(n))
}

// layoutMarker is what the record-format marker of a sharded keyspace
// holds: the record format, the layout, its bucket count, then "spread"
// (groups named by spread) and, when its relays write route hints
// (hints.go), "+hints". It is not plain digits, so every one-slot relay,
// older ones included, refuses to start on it (readableFormat); a
// sharded relay built before spread names reads "48/spread+hints" as a
// bucket count it was not given and refuses too.
func layoutMarker(buckets int, hinted bool) string {
	m := recordFormat + "/sharded/" + strconv.Itoa(buckets) + spreadSuffix
	if hinted {
		m += hintedSuffix
	}
	return m
}

// spreadSuffix and hintedSuffix end the marker of a keyspace whose
// groups are named by spread, and whose relays write route hints.
const (
	spreadSuffix = "/spread"
	hintedSuffix = "+hints"
)

// claimLayout writes ARGV[1] to the marker when it has none and returns
// what the marker then holds.
var claimLayout = valkey.NewLuaScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`)

// checkLayout claims the keyspace under prefix for the sharded layout of
// buckets, with route hints when hinted, or refuses it when its marker
// names another layout or another bucket count. A keyspace keeps the
// hints choice it was made with, and every relay on it follows that
// choice: it answers whether the keyspace is hinted. The marker sits at
// the configured prefix itself, where a one-slot relay started on the
// same prefix reads it and refuses too.
func checkLayout(ctx context.Context, client valkey.Client, prefix string, buckets int, hinted bool) (bool, error) {
	key, want := FormatKey(prefix), layoutMarker(buckets, hinted)
	found, err := claimLayout.Exec(ctx, client, []string{key}, []string{want}).ToString()
	if err != nil {
		return false, fmt.Errorf("valkey store: reading the record format marker %s: %w", key, err)
	}
	return shardedReadable(key, found, buckets)
}

// shardedReadable accepts a marker written by this layout with this
// bucket count, and says whether it is hinted.
func shardedReadable(key, found string, buckets int) (bool, error) {
	switch found {
	case layoutMarker(buckets, true):
		return true, nil
	case layoutMarker(buckets, false):
		return false, nil
	}
	_, rest, sharded := strings.Cut(found, "/sharded/")
	count, _, _ := strings.Cut(rest, "/")
	switch {
	case sharded && rest == strconv.Itoa(buckets):
		return false, fmt.Errorf("valkey store: %s names the sharded layout as relayd built it up to 09c0d8e, whose bucket names this relay does not use; refusing to start: start on a fresh key prefix and let the old relays drain (docs/operations.md)", key)
	case !sharded:
		return false, fmt.Errorf("valkey store: %s names record format %q of the one-slot layout; the sharded layout starts on a fresh key prefix and never converts one (docs/operations.md); refusing to start", key, found)
	case count != strconv.Itoa(buckets):
		return false, fmt.Errorf("valkey store: %s names the sharded layout with %s buckets, not %d; refusing to start: set --valkey-buckets %s", key, count, buckets, count)
	default:
		return false, fmt.Errorf("valkey store: %s names record format %q, which this relay (record format %q) cannot read; refusing to start", key, found, recordFormat)
	}
}
