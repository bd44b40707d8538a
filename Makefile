# Run `make` (or `make help`) for the list of targets.

BINARY := sharedos-mcp
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
FUZZTIME ?= 10s
STATICCHECK_VERSION ?= v0.8.2

.DEFAULT_GOAL := help
.PHONY: help build install test test-short lint fuzz bench bench-relay bench-remote demo snapshot golden conformance conformance-mcp otel-backends

help: ## list the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z-]*:.*## / { printf "  %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

build: ## build a static, version-stamped ./sharedos-mcp
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) .

install: ## go install with the same flags as build, into $(go env GOBIN), else $(go env GOPATH)/bin
	CGO_ENABLED=0 go install -trimpath -ldflags '$(LDFLAGS)' .
	@bin=$$(go env GOBIN); [ -n "$$bin" ] || bin=$$(go env GOPATH | cut -d: -f1)/bin; \
	echo "installed $$bin/$(BINARY)"; \
	case ":$$PATH:" in *":$$bin:"*) ;; \
	*) echo "note: $$bin is not on PATH; add it (export PATH=\"$$bin:\$$PATH\") to run $(BINARY) by name" ;; esac

test: ## the whole suite with the race detector, as CI runs it; ends with one line: all packages passed, or which failed
	@bash scripts/test.sh -race -count=1

test-short: ## the fast inner loop: -short, no race detector, no npm; under a minute with a warm cache
	@bash scripts/test.sh -short -count=1

otel-backends: ## build (once, minutes) the Jaeger and OpenTelemetry Collector the telemetry end-to-end test runs; prints the directory for SHAREDOS_OTEL_BIN
	bash scripts/otel-backends.sh

lint: ## gofmt, go vet and staticcheck
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

fuzz: ## run every Fuzz* target for FUZZTIME each (default 10s)
	bash scripts/fuzz.sh $(FUZZTIME)

bench: ## run the go test benchmarks (hot paths: framing, catalogue hashing, one relayed call)
	go test -run '^$$' -bench . -benchmem -timeout 600s ./...

bench-relay: ## measure serve against its floors (echo, direct, a minimal relay) and the Go and TypeScript SDK relays; rewrites BENCHMARKS.md (manual, never in CI)
	npm ci --prefix bench/node --no-audit --no-fund
	go run ./bench/cmd/benchrelay -markdown -keep BENCHMARKS.md > BENCHMARKS.md.tmp
	sed -n '/^<!-- benchremote:begin -->$$/,/^<!-- benchremote:end -->$$/p' BENCHMARKS.md | sed '1s/^/\n/' >> BENCHMARKS.md.tmp
	mv BENCHMARKS.md.tmp BENCHMARKS.md

bench-remote: ## measure a brokered remote call against a direct one and ToolHive's thv proxy (THV=path/to/thv, optional); rewrites its section of BENCHMARKS.md (manual, never in CI)
	go run ./bench/cmd/benchremote -thv "$(THV)" -update BENCHMARKS.md

demo: ## build; show what the example grants allow (kernel check); run the kernel under them on a copy of the demo tree, a scripted Claude Code session through serve, then its audit record and audit verify
	go run ./scripts/demo

snapshot: ## build the release archives into dist/ without publishing
	bash scripts/goreleaser.sh release --snapshot --clean

golden: ## rewrite golden files from the current output; review the diff
	go test ./install ./shim ./kernel ./kernel/config ./internal/service -update

conformance: ## drive the installed harness CLIs end to end; writes conformance/RESULTS.md
	go run ./conformance

conformance-mcp: ## the official MCP conformance suite against serve and the reference kernel; writes conformance/mcp/RESULTS.md
	npm ci --prefix conformance/mcp --no-audit --no-fund --loglevel=error
	go run ./conformance/mcp
