package valkey

import (
	"context"
	"fmt"

	"github.com/byollm/relayd/store"
)

// Ping sends one PING: the cheap check a readiness probe makes every few
// seconds. It loads nothing; New loads the library of scripts once, and a
// server that lost it (a restart without persistence, FUNCTION FLUSH)
// gets it again from the first call that misses its function.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Do(ctx, s.client.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("valkey store: ping: %w", err)
	}
	return nil
}

// LoadScripts loads the store's library of scripts on every node
// (functions.go), so a start fails on a server that refuses it rather
// than at a first call.
func (s *Store) LoadScripts(ctx context.Context) error {
	lib := libraryOf(s.scripts)
	return lib.reload(ctx, s.client, lib.loads.Load())
}

// libraryOf is the library that the scripts of one build call.
func libraryOf(scripts map[store.Op]*script) *library {
	return scripts[store.OpNow].run.(*fcall).lib
}
