// Package nodetest gives Go tests the published byollm npm packages that
// interop/package-lock.json pins, and node to run them, for differential
// tests against the published code. Outside CI a missing piece skips the
// test with the command that installs it; under CI the test fails when
// node is missing, and installs the pinned tree itself when only
// interop/node_modules is.
package nodetest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// PinnedVersion is the version every published package is pinned at.
const PinnedVersion = "0.1.1"

// Interop returns the absolute path of the repository's interop folder once
// node is on PATH and each named package (such as "@byollm/protocol") is
// installed under its node_modules at PinnedVersion.
func Interop(t *testing.T, packages ...string) string {
	t.Helper()
	ci := os.Getenv("CI") != ""
	if _, err := exec.LookPath("node"); err != nil {
		if ci {
			t.Fatal("node is not on PATH; the published packages' tests need it in CI")
		}
		t.Skip("node is not on PATH; install Node.js to test against the published packages")
	}
	interop := filepath.Join(moduleRoot(t), "interop")
	manifest := func(pkg string) string { return filepath.Join(interop, "node_modules", pkg, "package.json") }
	for _, pkg := range packages {
		if _, err := os.Stat(manifest(pkg)); err == nil {
			continue
		}
		if !ci {
			t.Skip("interop/node_modules is missing; run `cd interop && npm ci --no-audit --no-fund`")
		}
		install := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		install.Dir = interop
		out, err := install.CombinedOutput()
		require.NoError(t, err, "npm ci in interop: %s", out)
		break
	}
	for _, pkg := range packages {
		raw, err := os.ReadFile(manifest(pkg))
		require.NoError(t, err)
		var meta struct{ Version string }
		require.NoError(t, json.Unmarshal(raw, &meta))
		require.Equal(t, PinnedVersion, meta.Version, "the pinned %s", pkg)
	}
	return interop
}

// moduleRoot is the folder holding go.mod, found upwards from the test's
// own folder (go test runs a test in its package's folder).
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's folder")
		dir = parent
	}
}
