package valkey

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"
)

// formatKeySuffix names, under the store's prefix, the record-format
// marker: a string holding the newest record format a replica of this
// keyspace writes. It shares the prefix's hash tag, so it sits in the same
// slot as every other key. Scripts never read it; only open does.
const formatKeySuffix = "format"

// newestReadFormat is the newest record format this code reads: its own.
// A release that expands to a next format raises this (to accept that
// format's marker) before recordFormat moves.
const newestReadFormat = recordFormat

// claimFormat, in one step, raises the marker to ARGV[1] (the format this
// code writes) when it is absent or names an older format, and returns
// what it then holds, so replicas opening at once agree on it. A marker
// that is not a positive number in plain digits is left as it is, for Go
// to refuse.
var claimFormat = valkey.NewLuaScript(`
local v = redis.call('GET', KEYS[1])
if v and not (string.match(v, '^[1-9]%d*$') and tonumber(v) < tonumber(ARGV[1])) then
  return v
end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`)

// FormatKey is the key of the record-format marker under prefix.
func FormatKey(prefix string) string { return prefix + formatKeySuffix }

// CheckFormat raises the marker to this code's record format if the
// keyspace has none or an older one, and fails when it names a format this
// code cannot read: a newer relay has moved the keyspace on, and serving it
// with older code would misread or drop its records. See
// docs/operations.md, "Rolling upgrades of the record format".
func (s *Store) CheckFormat(ctx context.Context) error {
	key := FormatKey(s.prefix)
	found, err := claimFormat.Exec(ctx, s.client, []string{key}, []string{recordFormat}).ToString()
	if err != nil {
		return fmt.Errorf("valkey store: reading the record format marker %s: %w", key, err)
	}
	return readableFormat(key, found)
}

// readableFormat accepts a marker naming a format no newer than
// newestReadFormat.
func readableFormat(key, found string) error {
	have, _ := strconv.Atoi(newestReadFormat)
	if strings.Contains(found, "/sharded/") {
		return fmt.Errorf("valkey store: %s names %q: this key prefix holds the sharded layout; refusing to start: start with --valkey-layout sharded", key, found)
	}
	n, err := strconv.Atoi(found)
	if err != nil || n < 1 || strconv.Itoa(n) != found {
		return fmt.Errorf("valkey store: %s names record format %q, which this relay (record format %q) cannot read; refusing to start", key, found, newestReadFormat)
	}
	if n > have {
		return fmt.Errorf("valkey store: %s names record format %q, newer than this relay's record format %q; refusing to start: upgrade this relay", key, found, newestReadFormat)
	}
	return nil
}
