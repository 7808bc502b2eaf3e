# nacos-lockd: a Nacos-compatible distributed lock server.
# `make run` starts one node; `make test` runs everything CI runs.

GO        ?= go
BIN       := bin
PORT      ?= 8848
DATA_DIR  ?= ./data
FUZZTIME  ?= 10s
MVN       ?= mvn

.PHONY: build run test test-go fuzz-smoke interop interop-java vet fmt-check proto clean help

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## binaries into ./bin
	$(GO) build -trimpath -o $(BIN)/ ./cmd/...

run: build ## one node, embedded storage, main port 8848 (gRPC 9848, Raft 7848), data in ./data
	./$(BIN)/nacos-lockd --port $(PORT) --data-dir $(DATA_DIR)

test: vet fmt-check test-go fuzz-smoke interop ## everything CI runs

vet: ## go vet
	$(GO) vet ./...

fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test-go: ## Go unit, gateway and process tests, race detector on
	$(GO) test -race -timeout 15m ./...

fuzz-smoke: ## every fuzz target for FUZZTIME (default 10s)
	$(GO) test -run '^$$' -fuzz '^FuzzApplyCommand$$' -fuzztime $(FUZZTIME) ./statemachine
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./protocol
	$(GO) test -run '^$$' -fuzz '^FuzzParseProperties$$' -fuzztime $(FUZZTIME) ./compat

interop: interop-java ## suites against the real Nacos SDKs

interop-java: build ## real com.alibaba.nacos:nacos-client against bin/nacos-lockd
	$(MVN) -B -q -f interop/java/pom.xml test -Dnacos.lockd.binary=$(CURDIR)/$(BIN)/nacos-lockd

proto: ## regenerate protocol/pb with pinned protoc and plugins
	./protocol/gen.sh

clean: ## remove build output (not ./data)
	rm -rf $(BIN) interop/java/target
