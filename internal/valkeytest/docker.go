package valkeytest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"
)

const (
	// dockerRepository and dockerTag name the image started when only a
	// Docker engine is available.
	dockerRepository = "valkey/valkey"
	dockerTag        = "8"
	// containerPort is the port the server listens on inside the container.
	containerPort = "6379/tcp"
	// containerExpiry is how long the engine lets a container live even if
	// the test process dies before its cleanup runs: longer than any test
	// binary's -timeout, short enough that a crashed run leaves nothing.
	containerExpiry = 30 * time.Minute
	// enginePingTimeout bounds the check for an engine, so a machine with
	// only the docker client (or a dead socket) falls through at once.
	enginePingTimeout = 2 * time.Second
)

// dockerPool connects to the engine at endpoint (empty means DOCKER_HOST,
// else the platform's default socket) and returns the pool only when the
// engine answers a ping within the given time.
func dockerPool(endpoint string, within time.Duration) (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool(endpoint)
	if err != nil {
		return nil, fmt.Errorf("docker client for %q: %w", endpoint, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := pool.Client.PingWithContext(ctx); err != nil {
		return nil, fmt.Errorf("docker engine at %q does not answer: %w", pool.Client.Endpoint(), err)
	}
	pool.MaxWait = 3 * time.Minute // an image pull on a cold cache
	return pool, nil
}

// containerOptions describes the Valkey container: persistence off, as for
// a binary-started server, and its port published on a free loopback port
// only (never on every interface, which dockertest does by default).
func containerOptions() (*dockertest.RunOptions, func(*docker.HostConfig)) {
	run := &dockertest.RunOptions{
		Repository:   dockerRepository,
		Tag:          dockerTag,
		Cmd:          []string{"valkey-server", "--save", "", "--appendonly", "no"},
		ExposedPorts: []string{containerPort},
		PortBindings: map[docker.Port][]docker.PortBinding{
			containerPort: {{HostIP: "127.0.0.1", HostPort: ""}},
		},
		Labels: map[string]string{"org.byollm.relayd.valkeytest": "1"},
	}
	host := func(hc *docker.HostConfig) {
		hc.PublishAllPorts = false
		hc.AutoRemove = true // an expired container goes as well as a purged one
		hc.RestartPolicy = docker.RestartPolicy{Name: "no"}
	}
	return run, host
}

// startContainer runs the Valkey image through the pool, purges it at
// cleanup (with an engine-side expiry as the backstop) and returns its
// address once it answers.
func startContainer(t testing.TB, pool *dockertest.Pool) string {
	t.Helper()
	run, host := containerOptions()
	res, err := pool.RunWithOptions(run, host)
	if err != nil {
		t.Fatalf("valkeytest: starting %s:%s: %v", dockerRepository, dockerTag, err)
	}
	t.Cleanup(func() {
		if err := pool.Purge(res); err != nil {
			t.Logf("valkeytest: removing container %s: %v", res.Container.ID, err)
		}
	})
	if err := res.Expire(uint(containerExpiry / time.Second)); err != nil {
		t.Fatalf("valkeytest: setting the container's expiry: %v", err)
	}
	addr := res.GetHostPort(containerPort)
	if addr == "" {
		t.Fatalf("valkeytest: container %s publishes no %s", res.Container.ID, containerPort)
	}
	if err := waitPing(context.Background(), addr, 30*time.Second); err != nil {
		t.Fatalf("valkeytest: container %s at %s: %v", res.Container.ID, addr, err)
	}
	return addr
}
