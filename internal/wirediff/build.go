package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/byollm/relayd/internal/fleet"
)

// binaries are the two relayd builds and what to remove afterwards.
type binaries struct {
	root     string // the current module's root
	old, new string
	tmp      string
	worktree string
}

// buildBoth compiles the relay of commit, checked out in a temporary
// detached worktree, and of the current tree.
func buildBoth(ctx context.Context, commit string) (*binaries, error) {
	root, err := fleet.ModuleRoot(ctx)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "wirediff-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	b := &binaries{root: root, tmp: tmp}
	for _, dir := range []string{"old", "new"} {
		if err := os.Mkdir(filepath.Join(tmp, dir), 0o700); err != nil {
			b.cleanup()
			return nil, fmt.Errorf("build directory: %w", err)
		}
	}
	b.worktree = filepath.Join(tmp, "src")
	add := exec.CommandContext(ctx, "git", "worktree", "add", "--detach", b.worktree, commit)
	add.Dir = root
	if out, err := add.CombinedOutput(); err != nil {
		b.worktree = ""
		b.cleanup()
		return nil, fmt.Errorf("git worktree add %s: %w\n%s", commit, err, out)
	}
	if b.old, err = fleet.Build(ctx, b.worktree, filepath.Join(tmp, "old")); err == nil {
		b.new, err = fleet.Build(ctx, root, filepath.Join(tmp, "new"))
	}
	if err != nil {
		b.cleanup()
		return nil, err
	}
	return b, nil
}

// cleanup removes the temporary worktree and the builds.
func (b *binaries) cleanup() {
	if b.worktree != "" {
		rm := exec.Command("git", "worktree", "remove", "--force", b.worktree)
		rm.Dir = b.root
		_ = rm.Run()
	}
	_ = os.RemoveAll(b.tmp)
}
