package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/protocol"
)

// `relayd grant-key generate --out PATH` writes a key at mode 0600 and
// prints its public half only; a relay started with that file as
// --grant-key-file serves it as its current key.
func TestGrantKeyGenerateWritesAKeyTheRelayServes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grant.pem")
	stdout, stderr, err := runRelaydSplit(t, "grant-key", "generate", "--out", path)
	require.NoError(t, err, stderr)
	require.Empty(t, stderr)

	var half map[string]string
	require.NoError(t, json.Unmarshal([]byte(stdout), &half), stdout)
	require.Len(t, half, 2, "publicKey and keyId only: %s", stdout)
	id, ok := protocol.KeyIDOf(half["publicKey"])
	require.True(t, ok, "publicKey is a raw Ed25519 key: %s", stdout)
	require.Equal(t, id, half["keyId"])

	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	pemText, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(pemText), "-----BEGIN PRIVATE KEY-----\n"), "a PEM PKCS#8 key")
	require.NotContains(t, stdout, strings.Split(string(pemText), "\n")[1], "the key is never printed")

	p := startExample(t, "--grant-key-file", path)
	resp, err := http.Get(p.Admin + "/grant-keys")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var keys struct {
		Current struct{ PublicKey, KeyID string } `json:"current"`
	}
	require.NoError(t, json.Unmarshal(body, &keys))
	require.Equal(t, half["publicKey"], keys.Current.PublicKey)
	require.Equal(t, half["keyId"], keys.Current.KeyID)
}

// It never overwrites a file, and says why; usage errors exit 2.
func TestGrantKeyGenerateRefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grant.pem")
	require.NoError(t, os.WriteFile(path, []byte("an operator's key"), 0o600))
	stdout, stderr, err := runRelaydSplit(t, "grant-key", "generate", "--out", path)
	require.Equal(t, 1, exitCode(t, err))
	require.Empty(t, stdout)
	require.Contains(t, stderr, "already exists")
	kept, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "an operator's key", string(kept))

	for _, args := range [][]string{
		{"grant-key"},
		{"grant-key", "rotate"},
		{"grant-key", "generate"},
		{"grant-key", "generate", "--out", path + ".new", "extra"},
		{"grant-key", "generate", "--bogus"},
	} {
		_, stderr, err := runRelaydSplit(t, args...)
		require.Equal(t, 2, exitCode(t, err), "%v: %s", args, stderr)
		require.Contains(t, stderr, "usage: relayd grant-key generate --out PATH", "%v", args)
	}
	_, err = os.Stat(path + ".new")
	require.ErrorIs(t, err, os.ErrNotExist, "a usage error writes nothing")

	stdout, _, err = runRelaydSplit(t, "grant-key", "--help")
	require.NoError(t, err)
	require.Contains(t, stdout, "usage: relayd grant-key generate --out PATH")
}

// runRelaydSplit runs the test binary with args and returns its stdout
// and stderr apart.
func runRelaydSplit(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(fleet.TestBinary(t), args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// exitCode is the exit status err reports, 0 for none.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	return exit.ExitCode()
}
