# Containerized mount-utilities host: build, test and demo.
# Run `make help` for the list of targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO          ?= go
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS     := -s -w -X github.com/mountcontainers/mountcontainers/internal/version.Version=$(VERSION) -X github.com/mountcontainers/mountcontainers/internal/version.Revision=$(REVISION)
BIN         ?= bin
# urfave_cli_no_docs leaves out urfave/cli's man-page generator, grpcnotrace
# gRPC's x/net/trace debug pages (and html/template): processes start faster
# (measured on the one-binary shim: 0.4 ms and 0.3 ms). Keep in step with
# images/Dockerfile and internal/shimtest.ReleaseTags.
BUILD_TAGS  := urfave_cli_no_docs,grpcnotrace
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# A count, not a duration: Go 1.26's fuzz coordinator can fail a run with
# "context deadline exceeded" when a duration ends under load (go.dev/issue/75804).
FUZZTIME    ?= 200000x
IMAGE       ?= localhost/mountcontainers/mountpod:$(VERSION)
IMAGE_ARGS  := -f images/Dockerfile --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE)

export CGO_ENABLED ?= 0

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build every binary into ./bin.
	$(GO) build -trimpath -tags '$(BUILD_TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

.PHONY: test
test: verify unit fuzz e2e ## Run all tests: verify, unit tests (with -race), a short fuzz run and the end-to-end suite (root).

.PHONY: unit
unit: ## Run the unit tests with the race detector (no root needed, seconds).
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...

# Fuzz targets as package:Target; each runs for FUZZTIME.
FUZZ_TARGETS := ./pkg/registration:FuzzDecode ./internal/mountrecord:FuzzDecode ./internal/scope:FuzzValidatePluginName ./internal/scope:FuzzParseMemoryLimit

.PHONY: fuzz
fuzz: ## Fuzz every target of FUZZ_TARGETS for FUZZTIME each (default 200000x, about 10 s each).
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t#*:} ($${t%%:*}) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) "$${t%%:*}" || exit 1; \
	done

.PHONY: e2e
e2e: ## Run the end-to-end suite on a real single-node Kubernetes (root; installs, builds and caches the bed; test/README.md).
	test/bed/e2e.sh

.PHONY: verify
verify: ## Check formatting, go vet and staticcheck (also of the e2e-tagged files).
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags e2e ./...

.PHONY: bench
bench: ## Run the benchmarks.
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: demo
demo: ## Run the demo: a pod mounts a GlusterFS volume through the mount pod on a node without mount.glusterfs (root; tears down).
	test/demo/demo.sh

.PHONY: demo-keep
demo-keep: ## Run the demo and leave the bed, pods and volume running, with instructions to look around.
	DEMO_KEEP=1 test/demo/demo.sh

.PHONY: image
image: ## Build the mount-pod image from images/Dockerfile with docker or buildah.
	@if command -v docker >/dev/null && docker info >/dev/null 2>&1; then \
		docker build $(IMAGE_ARGS) . ; \
	elif command -v buildah >/dev/null; then \
		buildah bud --isolation=chroot $(IMAGE_ARGS) . ; \
	else echo "image: neither docker nor buildah is available" >&2; exit 1; fi

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN)
