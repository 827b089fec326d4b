package valkey

import (
	"context"
	"fmt"
)

// Ping sends one PING: the cheap check a readiness probe makes every few
// seconds. It loads nothing; New loads the scripts once, and a server that
// lost them (a restart, a failover, SCRIPT FLUSH) gets each again on its
// first NOSCRIPT, from the call that needs it.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Do(ctx, s.client.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("valkey store: ping: %w", err)
	}
	return nil
}

// LoadScripts loads every script on every node and checks each loads under
// the digest it will be called by, so a start fails on a server that
// refuses or mangles a script rather than at a first call.
func (s *Store) LoadScripts(ctx context.Context) error {
	for addr, node := range s.client.Nodes() {
		for _, op := range scripted() {
			sc := s.scripts[op]
			sha, err := node.Do(ctx, node.B().ScriptLoad().Script(sc.source).Build()).ToString()
			if err != nil {
				return fmt.Errorf("valkey store: loading script %s on %s: %w", op, addr, err)
			}
			if want := digest(sc.source); sha != want {
				return fmt.Errorf("valkey store: script %s loaded on %s as %s, want %s", op, addr, sha, want)
			}
		}
	}
	return nil
}
