# Containerized mount-utilities host: build, test and demo.
# Run `make help` for the list of targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO          ?= go
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS     := -s -w -X github.com/mountcontainers/mountcontainers/internal/shared/version.Version=$(VERSION) -X github.com/mountcontainers/mountcontainers/internal/shared/version.Revision=$(REVISION)
BIN         ?= bin
# urfave_cli_no_docs leaves out urfave/cli's man-page generator, grpcnotrace
# gRPC's x/net/trace debug pages (and html/template): processes start faster
# (measured on the one-binary shim: 0.4 ms and 0.3 ms). Keep in step with
# images/Dockerfile and internal/node/shim/shimtest.ReleaseTags.
BUILD_TAGS  := urfave_cli_no_docs,grpcnotrace
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# A count, not a duration: Go 1.26's fuzz coordinator can fail a run with
# "context deadline exceeded" when a duration ends under load (go.dev/issue/75804).
FUZZTIME    ?= 200000x

export CGO_ENABLED ?= 0

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build every binary into ./bin.
	$(GO) build -trimpath -tags '$(BUILD_TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# kubectl runs kubectl-mountpod_rollout as "kubectl mountpod-rollout" and
# kubectl-mountpod-rollout as "kubectl mountpod rollout" (docs/upgrade.md).
.PHONY: kubectl-plugin
kubectl-plugin: build ## Link bin/kubectl-mountpod_rollout (and -rollout) to mountpod-rollout, for kubectl.
	ln -sfn mountpod-rollout $(BIN)/kubectl-mountpod_rollout
	ln -sfn mountpod-rollout $(BIN)/kubectl-mountpod-rollout

.PHONY: test
test: verify unit fuzz-replay e2e ## Run all tests: verify, unit tests (with -race), the fuzz targets' committed inputs and the end-to-end suite (root).

# The unit tests and fuzz-replay go through test/tools/testsummary: go test's
# usual output (V=1: -v's), then the failed tests with their last log
# entries. TEST_DIGEST=FILE also appends a short digest of the failures to
# FILE (.ci/run). UNIT_TIMEOUT ends a hang with Go's goroutine dump.
TESTSUMMARY  := $(BIN)/tools/testsummary
UNIT_TIMEOUT ?= 15m
GO_TEST_JSON  = 2>&1 | $(TESTSUMMARY) $(if $(V),-v) $${TEST_DIGEST:+-digest "$$TEST_DIGEST"}

.PHONY: unit
unit: ## Run the unit tests with the race detector (no root needed; a few minutes), failures summarised at the end.
	@$(GO) build -o $(TESTSUMMARY) ./test/tools/testsummary
	HELM=$$(test/tools/tool.sh helm) CGO_ENABLED=1 $(GO) test -race -count=1 -timeout $(UNIT_TIMEOUT) -json ./... $(GO_TEST_JSON)

# Fuzz targets as package:Target[:count]; a target without a count runs
# FUZZTIME. The slower targets have smaller counts, so that `make fuzz`
# takes about two minutes on 2 CPUs (test/README.md, "Fuzzing").
FUZZ_TARGETS := \
	./pkg/registration:FuzzDecode \
	./internal/shared/mountrecord:FuzzDecode \
	./internal/boundary:FuzzValidatePluginName:100000x \
	./internal/pod/scope:FuzzParseMemoryLimit:100000x \
	./internal/boundary/execsocket:FuzzPlainUID:50000x \
	./internal/shared/fs/glusterfs:FuzzParseOptions:30000x \
	./internal/shared/fs:FuzzServerPolicy:20000x \
	./internal/shared/fs/cephfs:FuzzCephFSOptions:30000x \
	./internal/shared/fs/cephfs:FuzzCephAdmin:50000x \
	./internal/node/flexvolume:FuzzDecodeSettings:25000x \
	./internal/node/shim:FuzzArgv:5000x \
	./internal/node/shim:FuzzDecodeMapping:12000x \
	./internal/pod/execserver:FuzzCheckStart:30000x \
	./internal/shared/mountinfo:FuzzUnescape:100000x \
	./internal/shared/mountinfo:FuzzParse:100000x \
	./internal/shared/fs/glusterfs/clientargs:FuzzArgs:50000x \
	./pkg/execbatch:FuzzDecodeRequest:50000x \
	./internal/shared/oldnames:FuzzFlags:100000x
# FUZZLONG is what `make fuzz-long` runs: a number N is N times each
# target's count (about N times two minutes); a duration (10m) or a count
# (5000000x) is each target's -fuzztime.
FUZZLONG    ?= 30
FUZZ_ENV     = GO='$(GO)' FUZZ_TARGETS='$(FUZZ_TARGETS)' FUZZTIME='$(FUZZTIME)' \
	FUZZ_ALL='$(if $(filter command line environment,$(origin FUZZTIME)),$(FUZZTIME))'

# The packages with fuzz targets, for fuzz-replay.
FUZZ_PKGS = $(sort $(dir $(shell grep -rlE --include='*_test.go' '^func Fuzz[A-Z]' . 2>/dev/null)))

.PHONY: fuzz-replay
fuzz-replay: ## Run every fuzz target on its seed corpus and testdata/fuzz inputs only, without fuzzing (deterministic; part of `make test`).
	@$(GO) build -o $(TESTSUMMARY) ./test/tools/testsummary
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout $(UNIT_TIMEOUT) -run '^Fuzz' -json $(FUZZ_PKGS) $(GO_TEST_JSON)

.PHONY: fuzz
fuzz: ## Fuzz every target of FUZZ_TARGETS for its count (FUZZTIME=... sets every one) and print the executions per target.
	@$(FUZZ_ENV) test/fuzz.sh

.PHONY: fuzz-long
fuzz-long: ## Fuzz every target longer: FUZZLONG times its count (default 30, about an hour), or FUZZLONG=10m each.
	@$(FUZZ_ENV) FUZZ_ALL= FUZZLONG='$(FUZZLONG)' test/fuzz.sh

.PHONY: e2e
e2e: ## Run the end-to-end suites on a real Kubernetes of one node, then of three, then Kubernetes' External Storage suite against the CSI drivers (root; installs, builds and caches the bed; test/README.md).
	test/bed/e2e.sh

.PHONY: e2e-nodes
e2e-nodes: ## Run the three-node suite alone: rollouts that move writers between nodes (root; test/README.md).
	E2E_SUITES=nodes test/bed/e2e.sh

.PHONY: e2e-systemd
e2e-systemd: ## Run the layout-dependent tests (scopes, recovery, the node itself) on a node with systemd as PID 1: containerd and the kubelet as its services on the systemd cgroup driver, scopes as transient units (root; test/README.md).
	E2E_SUITES=systemd test/bed/e2e.sh

.PHONY: e2e-quickstart
e2e-quickstart: ## Run docs/quickstart.md's commands as written against the bed: images built and pushed to a registry stand-in, helm install, a pod writing to a GlusterFS claim (root; test/README.md).
	E2E_TAGS=e2e_quickstart E2E_RUN='^TestQuickstart$$' test/bed/e2e.sh

.PHONY: conformance
conformance: ## Run Kubernetes' External Storage e2e suite against the CSI driver, everything it qualifies for, [Serial] and [Slow] included (root; test/README.md).
	CONFORMANCE_SET=all E2E_SUITES=conformance test/bed/e2e.sh

.PHONY: e2e-multiarch
e2e-multiarch: ## Build the images for linux/amd64 and linux/arm64 (make images PLATFORMS=...; arm64's base bootstrapped and its steps run under qemu-user-static, which it installs and registers) and run each platform's tools in its image (root; no cluster; test/README.md).
	test/bed/setup.sh
	$(GO) test -tags e2e_multiarch -count=1 -v -timeout 90m ./test/multiarch

.PHONY: e2e-load
e2e-load: ## Run the load test alone: 100 pods with GlusterFS volumes at once, of the Flexvolume driver through the exec socket (with mount-scope's mount.glusterfs and the distribution's script) and CRI, a mount per pod and shared per volume (the default), of the CSI driver through each, and 100 with an emptyDir to compare (root; 12 min 5 s on 2026-11-30, the bed and its cached build included; E2E_LOAD_ROUNDS=N runs each wave N times and gives the median of its ratios; BENCHMARKS.md).
	E2E_TAGS=e2e_load E2E_RUN=TestLoad test/bed/e2e.sh

.PHONY: e2e-scale
e2e-scale: ## Run the three-node suite with the rollout plan at full scale: 500 fake nodes and 15,000 pods (root; BENCHMARKS.md).
	E2E_SUITES=nodes E2E_SCALE_NODES=500 E2E_NODES_TIMEOUT=60m test/bed/e2e.sh

# Every build tag of the tests at once: the files of e2e, e2e_load and
# e2e_nodes compile together and no file needs a tag to be absent, so one
# run of each checker sees every file.
VERIFY_TAGS := e2e,e2e_load,e2e_nodes,e2e_conformance,e2e_systemd,e2e_quickstart,e2e_multiarch

.PHONY: chart
chart: ## helm lint and helm template of charts/mountcontainers, held against the kustomize overlays (deploy/charts_test.go; helm built once by test/tools/tool.sh helm). Part of `make unit`.
	HELM=$$(test/tools/tool.sh helm) $(GO) test -count=1 -run '^TestChart' ./deploy

.PHONY: verify
verify: ## Check formatting, go vet and staticcheck (of every file, the e2e-tagged ones included).
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags $(VERIFY_TAGS) ./...
	$(GO) run $(STATICCHECK) -tags $(VERIFY_TAGS) ./...

.PHONY: bench
bench: ## Run the benchmarks.
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: demo
demo: ## Run the demo: a claim provisioned by the GlusterFS CSI driver, mounted by a pod through the mount pod on a node without mount.glusterfs (root; tears down).
	test/demo/demo.sh

.PHONY: demo-keep
demo-keep: ## Run the demo and leave the bed, pods and volume running, with instructions to look around.
	DEMO_KEEP=1 test/demo/demo.sh

.PHONY: demo-flexvolume
demo-flexvolume: ## Run the Flexvolume demo: a pod's inline flexVolume mounted through the mount pod (root; tears down).
	DEMO_FLAVOR=flexvolume test/demo/demo.sh

# The images the deploy runs, one name each: $(REGISTRY)/mountcontainers/
# {mountpod,csi-driver}:$(VERSION) (images/build.sh says more).
REGISTRY    ?= localhost
PLATFORMS   ?=

.PHONY: images
images: ## Build every image the deploy runs (mountpod, csi-driver) with buildah as $(REGISTRY)/mountcontainers/NAME:$(VERSION); PLATFORMS=linux/amd64,linux/arm64 builds a manifest list of both (images/build.sh).
	REGISTRY=$(REGISTRY) VERSION=$(VERSION) REVISION=$(REVISION) PLATFORMS=$(PLATFORMS) images/build.sh build

.PHONY: push
push: ## Push what `make images` built to REGISTRY=... and write bin/images/values-images.yaml (Helm) and kustomize-images.yaml, pinned by digest.
	@if [[ "$(REGISTRY)" == localhost ]]; then echo "push: set REGISTRY=<your registry>, as for make images" >&2; exit 2; fi
	REGISTRY=$(REGISTRY) VERSION=$(VERSION) REVISION=$(REVISION) OUT=$(BIN)/images images/build.sh push

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN)
