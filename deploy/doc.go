// Package deploy holds relayd's deployment files and the tests that check
// them without a container engine or a cluster.
//
// The files live beside this package and at the repository root:
//
//   - ../Dockerfile and ../.dockerignore: the container image.
//   - ../docker-compose.yml with haproxy/haproxy.cfg: three replicas on one
//     Valkey behind HAProxy, for a laptop.
//   - kubernetes/: a kustomize base, a Valkey component and the dev and prod
//     overlays (see kubernetes/README.md).
//   - fixture.example.json and demo-keys.json: the example projection and
//     the demo's published keys.
//
// The tests load docker-compose.yml with the compose-spec loader, render each
// overlay with kustomize and decode every object strictly into the Kubernetes
// API types, and check what the files promise against relayd's real
// configuration (package config): every flag and RELAYD_* variable they set
// exists, and the settings they pass would start relayd. The package has no
// non-test code.
package deploy
