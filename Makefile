# nacos-lockd: a Nacos-compatible distributed lock server.
# `make run` starts one node; `make test` runs everything CI runs.

GO        ?= go
BIN       := bin
PORT      ?= 8848
DATA_DIR  ?= ./data
CONFIG    ?=   # make run CONFIG=application.properties
FUZZTIME  ?= 20000x
MVN       ?= mvn
MVN_FLAGS ?= -B -ntp -fae
# TRANSPORT picks the server's --transport for the interop suites (the
# binary reads NACOS_LOCKD_TRANSPORT); empty: the default, h2.
TRANSPORT ?=
NACOS33_FLAGS ?=   # e.g. -Dnacos33.client.version=3.3.0 -Dmaven.repo.local=/path/holding/it

.PHONY: release release-check dist-binaries image-context image image-test systemd-check k8s-test k8s-render k8s-helm-check helm build run test test-go fuzz-smoke fuzz interop interop-java interop-go interop-java-33 interop-nacos \
	nacos-fixtures vet settings-readme fmt-check proto clean help bench bench-quick bench-smoke bench-ab bench-etcd chaos chaos-ci

help: ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## binaries into ./bin: nacos-lockd, nacos-lockctl, nacos-lock-bench
	$(GO) build -trimpath -ldflags '$(STAMP)' -o $(BIN)/ ./cmd/...

# --- release: static binaries (no cgo, no libc: they run FROM scratch) with the version
# stamped in. VERSION defaults to `git describe`; BUILD_DATE to the commit's time, so two
# builds of one commit are byte-identical (override both for a release: make release VERSION=v1.0.0).
DIST       ?= dist
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT     ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)
PLATFORMS  ?= linux/amd64 linux/arm64
RELEASE_CMDS := nacos-lockd nacos-lockctl
STAMP      := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILD_DATE)
LDFLAGS    := -s -w $(STAMP)

release: ## static linux/amd64 and linux/arm64 binaries, version stamped, and SHA256SUMS into ./dist
	@rm -rf $(DIST)
	@$(MAKE) --no-print-directory dist-binaries
	cd $(DIST) && sha256sum $(addprefix nacos-lock*-,$(subst /,-,$(PLATFORMS))) > SHA256SUMS
	@$(MAKE) --no-print-directory release-check

dist-binaries: # the static binaries of PLATFORMS into ./dist, nothing else
	@mkdir -p $(DIST)
	@set -e; for p in $(PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; for c in $(RELEASE_CMDS); do \
		echo "build $(DIST)/$$c-$$os-$$arch ($(VERSION))"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch TZ=UTC $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(DIST)/$$c-$$os-$$arch ./cmd/$$c; \
		done; done

# --- container image (deploy/container/Containerfile): FROM scratch around the static binary
# built here, so nothing is pulled. The build context is the repository root (.containerignore
# lets in only what the Containerfile copies).
IMAGE     ?= localhost/nacos-lockd:$(VERSION)
PODMAN    ?= podman
ARCH      ?= $(shell $(GO) env GOARCH)
# On this machine kind podman's defaults cannot start a container: its default runtime crun
# refuses the host's hybrid cgroup layout ("cgroups in hybrid mode not supported, drop all
# controllers from cgroupv2"), and without CAP_SYS_RESOURCE neither runtime may raise
# RLIMIT_NOFILE/NPROC to podman's defaults. runc with limits within the host's hard ones works.
PODMAN_RUN_FLAGS ?= --runtime runc --ulimit nofile=16384:16384 --ulimit nproc=4096:4096

image-context: ## dist/ as the Containerfile wants it, for ARCH (default: this machine's)
	@$(MAKE) --no-print-directory dist-binaries PLATFORMS=linux/$(ARCH)
	@mkdir -p $(DIST)/container/data

image: image-context ## podman build the container image IMAGE (default localhost/nacos-lockd:VERSION)
	$(PODMAN) build --build-arg TARGETARCH=$(ARCH) --build-arg VERSION=$(VERSION) -f deploy/container/Containerfile -t $(IMAGE) .

image-test: image ## the image's files and config, then run it: a lock taken and released through it, a clean SIGTERM stop, state kept in /data (root podman)
	NACOS_LOCKD_IMAGE=$(IMAGE) NACOS_LOCKD_PODMAN='$(PODMAN)' NACOS_LOCKD_PODMAN_RUN_FLAGS='$(PODMAN_RUN_FLAGS)' \
		$(GO) test -count=1 -timeout 5m -run '^TestContainerImage$$' -v ./deploy

release-check: ## the release binary for this machine prints its stamped version; all are CGO_ENABLED=0; checksums match
	@arch=$$($(GO) env GOARCH); bin=$(DIST)/nacos-lockd-linux-$$arch; \
	out=$$($$bin --version) || { echo "$$bin --version failed"; exit 1; }; echo "$$out"; \
	case "$$out" in "nacos-lockd $(VERSION) (commit $(COMMIT), built $(BUILD_DATE),"*) ;; \
		*) echo "release-check: want version $(VERSION), commit $(COMMIT), date $(BUILD_DATE) in: $$out"; exit 1;; esac; \
	for f in $(DIST)/nacos-lock*-linux-*; do \
		$(GO) version -m $$f | grep -q 'CGO_ENABLED=0' || { echo "$$f: not built with CGO_ENABLED=0"; exit 1; }; \
	done
	cd $(DIST) && sha256sum --quiet -c SHA256SUMS

run: build ## one node: make run [PORT=8848] [DATA_DIR=./data] [CONFIG=application.properties]; SDK gRPC PORT+1000, Raft PORT-1000
	./$(BIN)/nacos-lockd --port $(PORT) --data-dir $(DATA_DIR) $(if $(strip $(CONFIG)),--config $(CONFIG))

test: vet fmt-check test-go systemd-check k8s-test image-test fuzz-smoke interop bench-smoke chaos-ci ## everything CI runs

vet: ## go vet, of the release build and of the build with the test hooks
	$(GO) vet ./...
	$(GO) vet -tags testhooks ./...

settings-readme: ## rewrite README.md's Configuration table from settings/table.go
	$(GO) test ./settings -run '^TestREADME$$' -update

fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# -tags testhooks: the test hooks' own tests (storage failpoint, --test-hooks file) need them
# compiled in. The binaries the process and cluster tests start are release builds (interop/procs
# builds them without the tag), and so are bin/ and dist/.
test-go: ## Go unit, gateway, process and cluster tests, race detector on, never cached (-count=1); the gateway's again over --transport grpc
	$(GO) test -race -count=1 -timeout 20m -tags testhooks ./...
	NACOS_LOCKD_TEST_TRANSPORT=grpc $(GO) test -race -count=1 -timeout 5m ./gateway

# Every fuzz target, FUZZTIME each. The default is a count of inputs, not a duration: with a
# duration, Go 1.26's fuzz coordinator can report a bare `context deadline exceeded` at the end
# of the window on a loaded machine (go.dev/issue/75804, fixed in Go 1.27; it failed our CI once,
# no crasher written). 20000 inputs take 1-20 s per target here. `make fuzz FUZZTIME=10m` for a
# long run (a duration, so that race can still end it).
FUZZ_TARGETS := \
	./statemachine:FuzzApplyCommand ./statemachine:FuzzReadSnapshot \
	./protocol:FuzzDecode ./protocol:FuzzLockOperationRequestDecoder ./protocol:FuzzLockReplyDecoder ./protocol:FuzzNotificationReplyDecoder ./compat:FuzzParseProperties ./compat:FuzzDecodeNacosSnapshot \
	./storage:FuzzReadSnapshotStream ./storage:FuzzDecodeRaftMeta ./gateway/admin:FuzzLoginForm \
	./gateway:FuzzLockRequest ./gateway/admin:FuzzLockRoutes ./transport/h2grpc:FuzzConn ./transport/h2grpc:FuzzPayloadDecode

fuzz-smoke: ## each fuzz target briefly (CI)
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; done

fuzz: fuzz-smoke ## same as fuzz-smoke; set FUZZTIME for a longer run

interop: interop-java interop-go ## suites against the real Nacos SDKs (CI)

interop-java: build ## nacos-client 3.0.0, 3.1.1, 3.2.1-2026.03.30 (one Maven reactor) against bin/nacos-lockd (TRANSPORT=grpc: on --transport grpc)
	NACOS_LOCKD_TRANSPORT=$(TRANSPORT) $(MVN) $(MVN_FLAGS) -f interop/java/pom.xml test -Dnacos.lockd.binary=$(CURDIR)/$(BIN)/nacos-lockd

interop-go: build ## nacos-sdk-go/v2 v2.3.2 RPC client against bin/nacos-lockd (own module interop/gosdk; TRANSPORT=grpc: on --transport grpc)
	cd interop/gosdk && $(GO) vet ./... && NACOS_LOCKD_TRANSPORT=$(TRANSPORT) NACOS_LOCKD_BINARY=$(CURDIR)/$(BIN)/nacos-lockd $(GO) test -count=1 -timeout 5m ./...

interop-java-33: build ## Gen 2 suite; needs a 3.3.x nacos-client in a local repository (none on Maven Central)
	$(MVN) $(MVN_FLAGS) -f interop/java/pom.xml test -Pnacos-3.3 -pl versions/v3.3 -Dnacos.lockd.binary=$(CURDIR)/$(BIN)/nacos-lockd $(NACOS33_FLAGS)

interop-nacos: build ## differential run vs a real Nacos 3.1.0 (pig-mesh rebuild); not in CI
	$(MVN) $(MVN_FLAGS) -q -f interop/nacos-peer/pom.xml package
	$(MVN) $(MVN_FLAGS) -f interop/java/pom.xml test -Pnacos-diff -pl versions/diff -Dnacos.lockd.binary=$(CURDIR)/$(BIN)/nacos-lockd

nacos-fixtures: ## regenerate compat/testdata/nacos from real Java serialisation (not in CI)
	$(MVN) -B -q -f interop/nacos-snapshot-fixtures/pom.xml compile exec:exec

# --- benchmark (bench/README.md). Ratios only: the machine is shared.
BENCH_FLAGS ?=


bench: build ## nacos-lockd (one node, and a 3-node cluster) beside etcd, Redis, ZooKeeper and the gRPC/dragonboat ceilings; table of ratios in bench/results/
	./$(BIN)/nacos-lock-bench suite --lockd $(BIN)/nacos-lockd --out bench/results $(BENCH_FLAGS)

bench-quick: build ## the same with 3 s points: does every peer still install and run?
	./$(BIN)/nacos-lock-bench suite --quick --lockd $(BIN)/nacos-lockd --out bench/results-quick $(BENCH_FLAGS)

bench-smoke: build ## CI: W1 and W2 against nacos-lockd alone (~20 s); fails on errors or FIFO violations, never on speed
	./$(BIN)/nacos-lock-bench smoke --lockd $(BIN)/nacos-lockd

bench-ab: build ## before/after of a change: make bench-ab B=/path/to/changed/nacos-lockd [AB_FLAGS='--workload w2 --clients 16']
	./$(BIN)/nacos-lock-bench ab --a $(BIN)/nacos-lockd --b $(B) $(AB_FLAGS)

bench-etcd: ## build the etcd peer (own module, etcd's dependencies stay out of go.mod)
	cd bench/etcd && $(GO) build -mod=mod -trimpath -o bin/etcd-peer .

# --- fault injection, histories checked with porcupine (interop/chaos/README.md)
DURATION ?= 30m
# Partitions need network namespaces (root, iproute2); CHAOS_CI_NET=auto falls back to loopback.
CHAOS_CI_NET ?= netns

# The chaos suite builds its own server binary with -tags testhooks (clock, disk and
# leader-transfer faults); CHAOS_BINARY overrides it.
chaos-ci: ## CI: 3 nodes, 3-minute seeded fault schedule (seed = date), then one node (the single-node engine) for 1 minute; fails on any violation
	CHAOS_REQUIRE_HOOKS=1 CHAOS_JAVA=require CHAOS_NET=$(CHAOS_CI_NET) $(GO) test -tags chaos -count=1 -timeout 20m -run '^(TestChaosCI|TestChaosCISingleNode|TestClockJumpLimits)$$' -v ./interop/chaos

chaos: ## long run: make chaos DURATION=30m (3 nodes, then 5 nodes, DURATION each)
	CHAOS_REQUIRE_HOOKS=1 CHAOS_DURATION=$(DURATION) $(GO) test -tags chaos -count=1 -timeout 0 -run '^TestChaos$$' -v ./interop/chaos

# --- deploy/systemd: the unit must pass systemd-analyze verify without a single warning (it
# exits 0 on "Unknown key ... ignoring", so any output fails). verify wants ExecStart's binary at
# /usr/local/bin/nacos-lockd, so it runs against a scratch root holding the unit, that binary and
# the host's own system units. TestSystemdUnit (./deploy, in test-go) runs ExecStart's command line.
systemd-check: build ## systemd-analyze verify deploy/systemd/nacos-lockd.service (CI; Debian package systemd)
	@command -v systemd-analyze >/dev/null || { echo "systemd-analyze is missing (Debian: apt-get install systemd)"; exit 1; }
	@root=$$(mktemp -d); trap 'rm -rf "$$root"' EXIT; \
	mkdir -p "$$root/usr/local/bin" "$$root/etc/systemd/system" "$$root/lib/systemd" && \
	cp -a /lib/systemd/system "$$root/lib/systemd/" && \
	cp $(BIN)/nacos-lockd "$$root/usr/local/bin/" && cp deploy/systemd/nacos-lockd.service "$$root/etc/systemd/system/" && \
	out=$$(systemd-analyze verify --root="$$root" /etc/systemd/system/nacos-lockd.service 2>&1); rc=$$?; \
	if [ $$rc -ne 0 ] || [ -n "$$out" ]; then echo "$$out"; echo "systemd-analyze verify failed (exit $$rc, or warnings above)"; exit 1; fi; \
	echo "systemd-analyze verify deploy/systemd/nacos-lockd.service: clean"

proto: ## regenerate protocol/pb with pinned protoc and plugins
	./protocol/gen.sh

clean: ## remove build output, ./dist too (not ./data)
	rm -rf $(BIN) $(DIST) bench/etcd/bin bench/results bench/results-quick interop/java/target interop/java/versions/*/target interop/nacos-peer/target interop/nacos-snapshot-fixtures/target

# --- deploy/kubernetes: plain manifests and a Helm chart. The manifests are the chart rendered
# with helm (make k8s-render) and committed beside it, each stamped with the hash of the chart
# files it came from. CI (k8s-test, own Go module: k8s.io/api stays out of go.mod) decodes every
# object of them strictly into the Kubernetes API types, checks that they fit together and the
# server, and fails when the chart changed after they were rendered. It also runs helm's lint and
# template as a library (helm_test.go): the rendered chart must equal the committed manifests.
# The helm command is not built in CI: from source it costs about 5.5 minutes cold on 2 cores.
HELM_VERSION ?= v3.22.0
HELM         ?= $(BIN)/helm
KUBE_VERSION ?= 1.32.0
K8S_DIR      := deploy/kubernetes
CHART        := $(K8S_DIR)/chart/nacos-lockd
# The chart's hash: sha256 of `sha256sum` over its files in byte order of their paths (the
# tests compute the same).
CHART_HASH    = $$(cd $(K8S_DIR) && find chart -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)
HELM_TEMPLATE = $(HELM) template --kube-version $(KUBE_VERSION)

k8s-test: ## CI: every manifest under deploy/kubernetes decoded strictly into k8s.io/api types, and checked (own module)
	cd $(K8S_DIR) && $(GO) vet ./... && $(GO) test -count=1 -timeout 5m ./...

helm: $(HELM) ## build helm $(HELM_VERSION) from source into ./bin (not in CI: ~5.5 min cold)
$(HELM):
	GOBIN=$(CURDIR)/$(BIN) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

k8s-render: $(HELM) ## helm lint --strict the chart, then render it into the committed manifests
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) -f $(K8S_DIR)/testdata/values-full.yaml
	@set -e; h=$(CHART_HASH); \
	hdr() { printf '# Generated by make k8s-render from %s (chart sha256 %s):\n# helm template %s\n# Do not edit: change the chart and render again.\n' $(CHART) $$h "$$1"; }; \
	a='nacos-lockd $(CHART) --namespace nacos-lockd'; \
	{ hdr "$$a"; $(HELM_TEMPLATE) $$a; } > $(K8S_DIR)/nacos-lockd.yaml; \
	a='nacos-lockd $(CHART) --namespace nacos-lockd --set serviceMonitor.enabled=true --show-only templates/servicemonitor.yaml'; \
	{ hdr "$$a"; $(HELM_TEMPLATE) $$a; } > $(K8S_DIR)/servicemonitor.yaml; \
	a='locks $(CHART) --namespace prod -f $(K8S_DIR)/testdata/values-full.yaml'; \
	{ hdr "$$a"; $(HELM_TEMPLATE) $$a; } > $(K8S_DIR)/testdata/rendered-full.yaml
	@echo "rendered: $(K8S_DIR)/nacos-lockd.yaml, servicemonitor.yaml, testdata/rendered-full.yaml"

k8s-helm-check: ## helm lint, helm template: fails if the committed manifests differ from a fresh render (not in CI)
	@$(MAKE) --no-print-directory k8s-render
	git diff --exit-code -- $(K8S_DIR)/nacos-lockd.yaml $(K8S_DIR)/servicemonitor.yaml $(K8S_DIR)/testdata/rendered-full.yaml
