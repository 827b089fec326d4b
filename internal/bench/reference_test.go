package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/workload"
)

// TestParseProcStatCPUReadsUtimeAndStime reads a real-shaped stat line
// whose command name holds spaces and a parenthesis, so fields must count
// from the last one.
func TestParseProcStatCPUReadsUtimeAndStime(t *testing.T) {
	line := "4242 (node (main) x) S 1 4242 4242 0 -1 4194560 9000 0 12 0 250 75 0 0 20 0 11 0 123 456 789\n"
	got, err := parseProcStatCPU(line)
	require.NoError(t, err)
	require.InDelta(t, 3.25, got, 1e-9)

	_, err = parseProcStatCPU("4242 node S 1")
	require.Error(t, err)
	_, err = parseProcStatCPU("4242 (node) S 1 2 3")
	require.Error(t, err)
}

// TestProcStatCPUAgreesWithGetrusage reads /proc for this process, what
// the reference target measures Node by, after burning some CPU: it must
// agree with the kernel's rusage to within a few ticks.
func TestProcStatCPUAgreesWithGetrusage(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	x := 0
	for selfCPU() < 200*time.Millisecond {
		for i := range 1 << 20 {
			x ^= i
		}
	}
	data, err := os.ReadFile("/proc/self/stat")
	require.NoError(t, err)
	got, err := parseProcStatCPU(string(data))
	require.NoError(t, err)
	want := selfCPU().Seconds()
	require.InDelta(t, want, got, 0.05, "x=%d", x)
}

// TestReferenceTargetSaysWhatIsMissing: asked for, the reference target
// fails with the step that fixes it, never a silent skip.
func TestReferenceTargetSaysWhatIsMissing(t *testing.T) {
	_, _, _, err := referenceFiles(t.Context(), Reference{Node: filepath.Join(t.TempDir(), "no-node")})
	require.ErrorContains(t, err, "no node executable")

	node, err := exec.LookPath("sh") // any executable stands in for node here
	require.NoError(t, err)
	interop := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(interop, "launchers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(interop, "launchers", "control-host.mjs"), nil, 0o644))
	_, _, _, err = referenceFiles(t.Context(), Reference{Node: node, InteropDir: interop})
	require.ErrorContains(t, err, "npm ci")

	pkg := filepath.Join(interop, "node_modules", "@byollm", "relay")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"version":"0.1.0-alpha.24"}`), 0o644))
	_, _, _, err = referenceFiles(t.Context(), Reference{Node: node, InteropDir: interop})
	require.ErrorContains(t, err, "has @byollm/relay 0.1.0-alpha.24, want 0.1.1")

	_, err = RunLifecycle(t.Context(), Lifecycle{Store: StoreReference, Replicas: 1, Jobs: 1, Daemons: 1, Protocol: workload.ProtocolV0})
	require.ErrorContains(t, err, `speaks protocol "2" only`)
}

// TestRunLifecycleOnTheReferenceRelay runs a tiny "2" lifecycle against
// the published relay under Node: every job is collected, none judged a
// violation, and Node's CPU was read. Without node or the npm packages it
// skips, except in CI, where both are installed and a skip would hide a
// broken target.
func TestRunLifecycleOnTheReferenceRelay(t *testing.T) {
	if _, _, _, err := referenceFiles(t.Context(), Reference{}); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the reference target: %v", err)
		}
		t.Skip(err)
	}
	res, err := RunLifecycle(t.Context(), Lifecycle{Store: StoreReference, Replicas: 1, Jobs: 20, Daemons: 4, SiteConcurrency: 4,
		Protocol: workload.ProtocolV2})
	require.NoError(t, err)
	require.Equal(t, 20, res.Collected)
	require.Zero(t, res.Violations)
	require.Positive(t, res.CPU.Relay)
	require.Zero(t, res.CPU.Valkey)
	require.Contains(t, res.Reference, "@byollm/relay 0.1.1 under node")
}
