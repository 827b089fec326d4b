package valkeytest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ory/dockertest/v3/docker"
)

// TestDockerPoolWithoutEngine: a socket nobody listens on is no engine, so
// Start falls through to skipping instead of trying to run a container.
func TestDockerPoolWithoutEngine(t *testing.T) {
	endpoint := "unix://" + filepath.Join(t.TempDir(), "docker.sock")
	if pool, err := dockerPool(endpoint, enginePingTimeout); err == nil {
		t.Fatalf("a missing socket answered as an engine: %+v", pool)
	}
}

// TestDockerPoolGivesUpOnASilentEngine: a socket that accepts but never
// replies (a hung daemon) must not hold the test until its -timeout; the
// ping's deadline ends the check.
func TestDockerPoolGivesUpOnASilentEngine(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { close(release); _ = srv.Close() })

	_, err = dockerPool("unix://"+sock, 50*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("silent engine: got %v, want the ping's deadline", err)
	}
}

// TestDockerPoolAnswersWhenTheEnginePings pins the other branch with the
// one call the check makes: GET /_ping answered 200, as an engine does.
func TestDockerPoolAnswersWhenTheEnginePings(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/_ping" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("OK"))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	if _, err := dockerPool("unix://"+sock, 5*time.Second); err != nil {
		t.Fatalf("an engine answering /_ping was not taken: %v", err)
	}
}

// TestContainerOptions pins what a Docker-started server looks like: the
// Valkey image without persistence, reachable only on loopback, removed
// by the engine when it stops.
func TestContainerOptions(t *testing.T) {
	run, host := containerOptions()
	if run.Repository != "valkey/valkey" || run.Tag != "8" {
		t.Errorf("image %s:%s, want valkey/valkey:8", run.Repository, run.Tag)
	}
	if !slices.Equal(run.Cmd, []string{"valkey-server", "--save", "", "--appendonly", "no"}) {
		t.Errorf("command %q does not turn persistence off", run.Cmd)
	}
	bindings := run.PortBindings[docker.Port(containerPort)]
	if len(bindings) != 1 || bindings[0].HostIP != "127.0.0.1" || bindings[0].HostPort != "" {
		t.Errorf("port bindings %+v, want one free port on 127.0.0.1", run.PortBindings)
	}
	if len(run.PortBindings) != 1 {
		t.Errorf("publishes %d ports, want only %s", len(run.PortBindings), containerPort)
	}
	hc := docker.HostConfig{PublishAllPorts: true} // dockertest's default
	host(&hc)
	if hc.PublishAllPorts {
		t.Error("PublishAllPorts stays on: every exposed port would open on all interfaces")
	}
	if !hc.AutoRemove {
		t.Error("an expired container would stay behind: AutoRemove is off")
	}
	if containerExpiry < 15*time.Minute {
		t.Errorf("expiry %s would kill a container inside a long test run", containerExpiry)
	}
}
