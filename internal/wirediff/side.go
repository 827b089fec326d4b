package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
)

// side is what one relay answered to the script.
type side struct {
	exchanges []exchange
	failed    []string
}

// runSide starts binary on store with default flags, runs the script
// against it and stops it. The Valkey store gets a fresh server of its
// own, so both sides start from the same empty state.
func runSide(ctx context.Context, root, binary, store string, o options) (side, error) {
	keys, err := peer.LoadDemoKeys(filepath.Join(root, o.keys))
	if err != nil {
		return side{}, err
	}
	args := []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--fixture", filepath.Join(root, o.fixture), "--site-id", keys.Site.SiteID, "--store", store}
	if store == "valkey" {
		dir, err := os.MkdirTemp("", "wirediff-valkey-")
		if err != nil {
			return side{}, fmt.Errorf("valkey directory: %w", err)
		}
		defer os.RemoveAll(dir)
		srv, err := valkeytest.Launch(ctx, dir, 1)
		if err != nil {
			return side{}, err
		}
		defer srv.Close()
		args = append(args, "--valkey-cluster", "--valkey-addr", srv.Addr)
	}
	p, err := fleet.StartProcess(ctx, fleet.ProcessOptions{Binary: binary, Args: args, LogLimit: 1 << 20})
	if err != nil {
		return side{}, err
	}
	defer func() { _ = p.Kill() }()
	if err := p.WaitReady(ctx); err != nil {
		return side{}, err
	}
	s := newScript(p.Public, p.Admin, keys)
	s.verbose = os.Stderr
	if err := s.run(ctx); err != nil {
		return side{}, err
	}
	return side{exchanges: s.rec.exchanges(), failed: s.failed}, nil
}
