# syntax=docker/dockerfile:1
#
# relayd container image: a static, cgo-free binary on a distroless base that
# has no shell, no package manager and runs as a non-root user.
#
#   docker build -t byollm/relayd:dev .
#
# GO_VERSION must be at least the go line of go.mod (deploy/deploy_test.go
# checks this).

ARG GO_VERSION=1.26.8

# ---- build ------------------------------------------------------------------
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 \
    GOFLAGS=-buildvcs=false \
    GOTOOLCHAIN=local

# Modules first, in their own layer and a cache mount, so a source change
# does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/relayd ./cmd/relayd

# ---- run --------------------------------------------------------------------
# distroless/static carries CA certificates (for Valkey over TLS), /etc/passwd
# with the nonroot user and tzdata, and nothing else: no shell, so probes and
# health checks go over HTTP from outside the container (see
# docker-compose.yml and deploy/kubernetes).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/relayd /usr/local/bin/relayd
# 65532 is "nonroot" in distroless; numeric so runAsNonRoot can verify it.
USER 65532:65532
# 8080: the public listener (the protocol). 9090: the admin listener
# (/healthz, /readyz, /metrics, /debug), which must stay private. In a
# container set RELAYD_ADMIN_LISTEN=:9090, because the default binds it to
# 127.0.0.1 only.
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/relayd"]
