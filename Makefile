# meshgw — the two commands of the README are `make demo` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
BIN := bin
# make build stamps the binaries' --version (and what meshctl peers shows as VERSION).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/meshgw/meshgw/version.Version=$(VERSION) -X github.com/meshgw/meshgw/version.Commit=$(COMMIT)

.PHONY: all build demo test test-short lint fuzz proto bench bench-quick clean help docs deploy-check chaos

all: build

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s "$$(printf '\t')"

build: ## Build meshgw, meshctl and fakeworker (every cmd/) into bin/, stamped with VERSION and COMMIT.
	@mkdir -p $(BIN)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

demo: build ## Start a local mesh with fake engines and print what to try.
	scripts/demo.sh

test: build ## Install test dependencies, lint, run every test, check deploy/ with the real tools, and run each fuzzer for 2 s.
	scripts/test-deps.sh
	scripts/lint.sh
	$(GO) test -count=1 -timeout 15m ./...
	scripts/deploy-check.sh
	scripts/fuzz.sh

test-short: ## Go tests without the slow multi-process suites.
	$(GO) test -count=1 -short ./...

deploy-check: build ## Check deploy/ with promtool, grpc_health_probe, systemd-analyze and the parsers of Docker, compose, kustomize.
	scripts/test-deps.sh
	scripts/deploy-check.sh

# make chaos: SEED, DURATION, NODES, ENGINES, FAULTS (comma-separated kinds, default all) and REPORT;
# REGIONS (2 or more: over a simulated WAN), WAN_DELAY (one way) and CUT_HOLD (a region cut's hold).
SEED ?= 1
DURATION ?= 120s
NODES ?= 3
ENGINES ?= 3
FAULTS ?=

chaos: build ## The chaos test across processes (docs/chaos.md): SEED, DURATION, NODES, ENGINES, FAULTS, REPORT (chaos-report.json), REGIONS, WAN_DELAY, CUT_HOLD.
	scripts/test-deps.sh
	$(BIN)/meshgw-chaos --seed $(SEED) --duration $(DURATION) --nodes $(NODES) --engines $(ENGINES) \
		$(if $(FAULTS),--faults $(FAULTS)) --report $(or $(REPORT),chaos-report.json) \
		$(if $(REGIONS),--regions $(REGIONS)) $(if $(WAN_DELAY),--wan-delay $(WAN_DELAY)) $(if $(CUT_HOLD),--cut-hold $(CUT_HOLD))

docs: ## Regenerate docs/flags.md from meshgw's flags (go test ./cmd/meshgw fails while it is stale).
	MESHGW_UPDATE_DOCS=1 $(GO) test -count=1 -run 'TestFlagsReference' ./cmd/meshgw

lint: ## gofmt, go vet and staticcheck.
	scripts/lint.sh

fuzz: ## Run each fuzzer for FUZZTIME (default 2s; FUZZ=regexp picks some).
	scripts/fuzz.sh

proto: ## Regenerate protobuf/gRPC code from api/ with pinned tools.
	scripts/proto.sh

bench: build ## Benchmark meshgw against direct and HAProxy (BENCH_QUICK=1 for a short run).
	scripts/bench.sh

bench-quick: build ## The short benchmark run (under a minute).
	BENCH_QUICK=1 scripts/bench.sh

clean: ## Remove build outputs.
	rm -rf $(BIN)
