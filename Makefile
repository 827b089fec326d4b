# relayd — the byollm blind relay.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
FIXTURE     ?= deploy/fixture.example.json
SITE_ID     ?= site_example
BIN         ?= bin

.PHONY: all build run demo test test-short lint fmt bench fuzz clean

all: lint test build

## build: compile relayd and the demo into ./bin
build:
	$(GO) build -o $(BIN)/relayd ./cmd/relayd
	$(GO) build -o $(BIN)/relayd-demo ./cmd/relayd-demo

## run: start relayd on the embedded store with the example fixture
run:
	$(GO) run ./cmd/relayd --fixture $(FIXTURE) --site-id $(SITE_ID) --listen 127.0.0.1:8080 --admin-listen 127.0.0.1:9090

## demo: route one sealed job through the relay started by `make run`
demo:
	$(GO) run ./cmd/relayd-demo --relay http://127.0.0.1:8080 --keys deploy/demo-keys.json

## test: vet, formatting, every test with the race detector, then the store
## contract on Redis and on a Valkey Cluster without it (the race pass ran
## the same Go on a standalone Valkey)
test:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 40m ./...
	$(GO) test -count=1 -run '^(TestContractRedis|TestContractCluster|TestContractShardedCluster)$$' ./store/valkey/

## test-short: the tests without the race detector, for a quick loop
test-short:
	$(GO) test -count=1 ./...

## fuzz: run each fuzz target for FUZZTIME (make fuzz FUZZTIME=5m for a real
## session); `make test` already replays every committed seed corpus
FUZZTIME     ?= 10s
FUZZ_TARGETS := ./protocol:FuzzDecode ./protocol:FuzzParseSignature ./protocol/strictjson:FuzzParse \
                ./projection:FuzzParseFixture ./plane:FuzzHandler ./protocol/proto2:FuzzDecode
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) ./.ci/fuzz $(FUZZ_TARGETS)

## lint: go vet and staticcheck
lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: a short end-to-end benchmark (docs/performance.md has the full run);
## it starts its own redis-server on a free port and stops it afterwards
bench:
	@port=$$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'); \
	  redis-server --port $$port --bind 127.0.0.1 --save "" --appendonly no --daemonize yes --logfile /dev/null >/dev/null; \
	  $(GO) run ./cmd/relaybench --valkey-addr 127.0.0.1:$$port --jobs 500 --daemons 8 --depths 1000,10000 --depth-jobs 200 \
	    --limit-requests 50000; status=$$?; \
	  redis-cli -p $$port shutdown nosave >/dev/null 2>&1; exit $$status

## interop-control: the published byollm npm clients (pinned in
## interop/package-lock.json) against the reference relay, the suite's control;
## interop/README.md says what it checks and how relayd joins it
.PHONY: interop-control interop interop-deps
interop-control: interop-deps
	cd interop && INTEROP_RELAY=control timeout 240 node --test --test-concurrency=1 test/

## interop: the same suite against the control, relayd on the memory store, and
## three relayd replicas on one Valkey; relayd is built once for both. It never
## skips: a missing node, npm or redis-server, or a failed build, fails it.
## The three run at once (.ci/interop-suites); every run goes even when one
## fails, so CI shows all three.
INTEROP_RELAYS  := control relayd relayd-valkey-3
INTEROP_RELAYD  := $(CURDIR)/interop/.run/bin/relayd
interop: interop-deps interop-bin
	INTEROP_RELAYD_BIN=$(INTEROP_RELAYD) ./.ci/interop-suites test 180 $(INTEROP_RELAYS)

## interop-grants: relayd as its own grant author (docs/grants.md), driven by
## two published byollm daemons of two owners and the site SDK, with the
## published relay wired to the published control plane as the control
## (interop/grants/), on relayd's memory store and on three replicas on one
## Valkey. Its waits span the 30 s not-before of a transient decline, and
## T3 (b) (grants/permanence.test.mjs, relayd's external author) waits out
## a 60 s deadline.
INTEROP_GRANTS_RELAYS := control relayd relayd-valkey-3
.PHONY: interop-grants
interop-grants: interop-deps interop-bin
	INTEROP_FILES_AT_ONCE=2 INTEROP_RELAYD_BIN=$(INTEROP_RELAYD) ./.ci/interop-suites grants 360 $(INTEROP_GRANTS_RELAYS)

## interop-bin: the relayd both interop suites run, built once, so that
## `make -j2 interop interop-grants` (as .ci/run does) builds it once
.PHONY: interop-bin interop-deps
interop-bin:
	@command -v valkey-server >/dev/null || command -v redis-server >/dev/null || \
	  { echo "interop: neither valkey-server nor redis-server is on PATH"; exit 1; }
	$(GO) build -o $(INTEROP_RELAYD) ./cmd/relayd

interop-deps:
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "interop: node and npm are required"; exit 1; }
	cd interop && npm ci --no-audit --no-fund

clean:
	rm -rf $(BIN)
