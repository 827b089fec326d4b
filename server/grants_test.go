package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/server"
)

func writeGrantKey(t *testing.T, seed byte) (path string, private ed25519.PrivateKey) {
	t.Helper()
	private = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	der, err := x509.MarshalPKCS8PrivateKey(private)
	require.NoError(t, err)
	path = filepath.Join(t.TempDir(), "grant.pem")
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o400))
	return path, private
}

// Without --grant-key-file the boot log says grants are off and P2-D4 holds.
func TestGrantsAreOffAtBootWithoutAKeyFile(t *testing.T) {
	var logs lockedBuffer
	start(t, slog.New(slog.NewJSONHandler(&logs, nil)))
	require.Contains(t, logs.String(), "grants: off — devices serve their owners only (P2-D4)")
}

// With one, the key is loaded at boot and named by its id only.
func TestGrantKeyFileIsLoadedAtBoot(t *testing.T) {
	path, private := writeGrantKey(t, 0x24)
	var logs lockedBuffer
	r := startWith(t, []string{"--grant-key-file", path}, slog.New(slog.NewJSONHandler(&logs, nil)))
	require.NotEmpty(t, r.public)
	keyID := protocol.KeyID(private.Public().(ed25519.PublicKey))
	require.Contains(t, logs.String(), "grants: local, current key "+keyID+", 1 keys")
	require.Contains(t, logs.String(), `"current":"`+keyID+`"`)
	require.NotContains(t, logs.String(), protocol.EncodeKey(private.Seed())[:16], "never the key")
}

// A key file that is not an Ed25519 key refuses to start, naming the file.
func TestABadGrantKeyFileRefusesToStart(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "grant.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a key"), 0o400))
	fixture := filepath.Join(t.TempDir(), "fixture.json")
	example, err := os.ReadFile("../deploy/fixture.example.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(fixture, example, 0o600))
	cfg, err := config.Load([]string{"--fixture", fixture, "--site-id", "site_example", "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--grant-key-file", bad}, func(string) string { return "" })
	require.NoError(t, err)
	err = server.Run(context.Background(), cfg, slog.New(slog.DiscardHandler), server.Hooks{})
	require.ErrorContains(t, err, "grant keys")
	require.ErrorContains(t, err, bad)
}
