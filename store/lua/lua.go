// Package lua holds the Valkey store's Lua: one script per store
// operation, named by its store.Op, and the helpers they share. It is
// the store's contract with the server, so it lives apart from the Go
// that serves it (store/valkey): it can be read and reviewed on its own,
// as the code Valkey runs, and it imports nothing.
//
// store/valkey builds each served script from these files: a generated
// key header and record schema, the shared helpers the script uses, and
// the script's own file.
package lua

import "embed"

// Files holds every script, by file name ("claim.lua").
//
//go:embed *.lua
var Files embed.FS
