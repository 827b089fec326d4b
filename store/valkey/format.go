package valkey

import (
	"context"
	"fmt"
	"strconv"

	"github.com/valkey-io/valkey-go"
)

// formatKeySuffix names, under the store's prefix, the record-format
// marker: a string holding the newest record format any replica of this
// keyspace has written. It shares the prefix's hash tag, so it sits in the
// same slot as every other key. Scripts never read it; only open does.
const formatKeySuffix = "format"

// claimFormat sets the marker to this code's format when it is absent and
// returns the marker, in one step, so two replicas opening a fresh
// keyspace at once agree on what it holds.
var claimFormat = valkey.NewLuaScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`)

// FormatKey is the key of the record-format marker under prefix.
func FormatKey(prefix string) string { return prefix + formatKeySuffix }

// CheckFormat writes this code's record format into the marker if the
// keyspace has none, and fails when the marker names a format this code
// cannot read: a newer relay has moved the keyspace on, and serving it with
// older code would misread or drop its records. See docs/operations.md,
// "Rolling upgrades of the record format".
func (s *Store) CheckFormat(ctx context.Context) error {
	key := FormatKey(s.prefix)
	found, err := claimFormat.Exec(ctx, s.client, []string{key}, []string{recordFormat}).ToString()
	if err != nil {
		return fmt.Errorf("valkey store: reading the record format marker %s: %w", key, err)
	}
	return readableFormat(key, found)
}

// readableFormat accepts a marker naming a format no newer than this
// code's; older formats are ones this code reads (and migrates).
func readableFormat(key, found string) error {
	have, _ := strconv.Atoi(recordFormat)
	n, err := strconv.Atoi(found)
	if err != nil || n < 1 {
		return fmt.Errorf("valkey store: %s names record format %q, which this relay (record format %q) cannot read; refusing to start", key, found, recordFormat)
	}
	if n > have {
		return fmt.Errorf("valkey store: %s names record format %q, newer than this relay's record format %q; refusing to start: upgrade this relay", key, found, recordFormat)
	}
	return nil
}
