package valkeytest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// dockerImage is the container started when only Docker is available.
const dockerImage = "valkey/valkey:8"

// dockerAnswers says whether a Docker engine is reachable through the CLI.
func dockerAnswers() bool {
	if _, err := exec.LookPath("docker"); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").Run() == nil
}

// startContainer runs the image with its port published on a free loopback
// port, removes it at cleanup and returns its address once it answers.
func startContainer(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "run", "-d", "--rm", "-p", "127.0.0.1::6379", dockerImage,
		"valkey-server", "--save", "", "--appendonly", "no").Output()
	if err != nil {
		t.Fatalf("valkeytest: docker run %s: %v", dockerImage, err)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
	out, err = exec.CommandContext(ctx, "docker", "port", id, "6379/tcp").Output()
	if err != nil {
		t.Fatalf("valkeytest: docker port: %v", err)
	}
	addr := strings.TrimSpace(strings.Split(string(out), "\n")[0])
	if err := waitPing(ctx, addr, 30*time.Second); err != nil {
		t.Fatalf("valkeytest: container %s at %s: %v", id, addr, err)
	}
	return addr
}
