# Sluice monorepo. `make help` lists the targets.
MODULES := libs services/metadata services/frontend services/storage services/offsets tools integration
# TOOL_MODULES only pin the build of a program the local cluster runs
# (tools/objectstore: versitygw, the S3-compatible object store of tiered
# storage). They stay out of go.work, so that their dependencies do not move
# the versions of the modules above, are built with GOWORK=off and have no
# tests.
TOOL_MODULES := tools/objectstore
PKG := github.com/sluicemq/sluice
BINARIES := $(PKG)/services/metadata/cmd/sluice-metadata $(PKG)/services/frontend/cmd/sluice-frontend \
            $(PKG)/services/storage/cmd/sluice-storage $(PKG)/services/offsets/cmd/sluice-offsets \
            $(PKG)/tools/cmd/sluicectl $(PKG)/tools/cmd/sluice-dev $(PKG)/tools/cmd/sluice-bench
GO ?= go
# VERSION is the release the binaries report with -version: the nearest git
# tag, or "dev"; the commit is recorded by the Go toolchain (-buildvcs).
VERSION ?= $(shell git describe --tags 2>/dev/null || echo dev)
LDFLAGS := -X github.com/sluicemq/sluice/libs/server/version.Version=$(VERSION)
# -parallel 3: integration/local's tests each start clusters of their own and
# mostly wait on them (a test keeps about a third of this machine's two cores
# busy), so three at once (integration/local/*/doc.go).
TEST_FLAGS ?= -race -count=1 -timeout 20m -parallel 3

SERVICES := metadata storage frontend offsets
# COMPOSE is Docker's compose plugin (v2) when the engine has it, else the
# standalone docker-compose (v1, Debian's package); either reads the files.
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

.PHONY: help build test test-deps vet lint fmt tidy tidy-check shape run clean bench fuzz certs figures images up up-tls down

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build every binary into ./bin
	@mkdir -p bin
	$(GO) build -buildvcs=auto -ldflags '$(LDFLAGS)' -o bin/ $(BINARIES)
	cd tools/objectstore && GOWORK=off CGO_ENABLED=0 $(GO) build -o ../../bin/ github.com/versity/versitygw/cmd/versitygw

test: test-deps ## run every module's tests with -race (test-deps first)
	@set -e; for m in $(MODULES); do \
		echo "== test $$m"; \
		(cd $$m && $(GO) test $(TEST_FLAGS) ./...); \
	done

test-deps: ## install (as root) or name the Debian packages the tests drive: kcat, python3-kafka, python3-confluent-kafka, chromium, strace, iproute2, curl
	@tools/scripts/test-deps.sh

# STATICCHECK is the pinned staticcheck, fetched from the Go module proxy.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: ## staticcheck every module (CI runs it; the tree is clean)
	@set -e; for m in $(MODULES); do echo "== staticcheck $$m"; (cd $$m && $(GO) run $(STATICCHECK) ./...); done

vet: ## go vet every module
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done

shape: ## the code's size and complexity counters, checked against tools/internal/shape/allow.txt (also a test of tools)
	@cd tools && $(GO) run ./cmd/sluice-shape -root ..

fmt: ## fail when any file is not gofmt-formatted
	@out=$$(gofmt -l $(MODULES) $(TOOL_MODULES)); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

tidy: ## go mod tidy every module
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) mod tidy); done
	@set -e; for m in $(TOOL_MODULES); do (cd $$m && GOWORK=off $(GO) mod tidy); done

tidy-check: ## fail when a module's go.mod or go.sum is not tidy, or a module does not build without go.work
	@set -e; for m in $(MODULES); do \
		(cd $$m && $(GO) mod tidy -diff >/dev/null) || { echo "$$m: go.mod/go.sum not tidy; run make tidy"; exit 1; }; \
		(cd $$m && GOWORK=off $(GO) build ./...) || { echo "$$m: does not build outside go.work (an import missing from go.mod?)"; exit 1; }; \
	done
	@set -e; for m in $(TOOL_MODULES); do \
		(cd $$m && GOWORK=off $(GO) mod tidy -diff >/dev/null) || { echo "$$m: go.mod/go.sum not tidy; run make tidy"; exit 1; }; \
		(cd $$m && GOWORK=off CGO_ENABLED=0 $(GO) build -o /dev/null tool) || { echo "$$m: its tool does not build"; exit 1; }; \
	done

certs: ## write a development CA and certificates to ./certs (make run and docker-compose service names)
	$(GO) run ./tools/cmd/sluice-certs -dir certs

fuzz: ## run every fuzz target for FUZZTIME each (default 10s); failing inputs land in testdata/fuzz as seeds
	@tools/scripts/fuzz.sh $(or $(FUZZTIME),10s)

figures: ## measure the storage figures of docs/dev/performance-log.md (append and fetch vs their physical limits)
	@tools/scripts/storage-figures.sh

bench: ## run the Go benchmarks of the hot paths
	@set -e; for m in libs services/storage; do (cd $$m && $(GO) test -run '^$$' -bench . -benchmem ./...); done

run: build ## build and start a local cluster on 127.0.0.1 (data in ./data); Ctrl-C stops it
	@./bin/sluice-dev -bin ./bin -data ./data

images: ## build static binaries and the sluice/<service>:dev images (FROM scratch)
	@mkdir -p bin/docker
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags='-s -w $(LDFLAGS)' -o bin/docker/ $(filter-out %/sluice-dev %/sluicectl %/sluice-bench,$(BINARIES))
	cd tools/objectstore && GOWORK=off CGO_ENABLED=0 $(GO) build -o ../../bin/docker/ github.com/versity/versitygw/cmd/versitygw
	@set -e; for s in $(SERVICES) objectstore; do \
		docker build -q -f deploy/docker/$$s.Dockerfile -t sluice/$$s:dev . >/dev/null; \
		echo "built sluice/$$s:dev"; \
	done

up: images build ## start the docker-compose cluster (3 metadata, 3 storage, 2 frontends, 3 offsets, the object store); SLUICE_ADVERTISED_HOST makes it reachable from other hosts
	$(COMPOSE) up -d
	@echo "frontends on http://127.0.0.1:8080 and :8082, Kafka on 127.0.0.1:9092 and :9094; ./bin/sluicectl works against it as against make run"

up-tls: images build ## start the docker-compose cluster over TLS with the certificates of make certs (docker-compose.tls.yml)
	@test -f certs/node.pem || { echo "no certs/node.pem: run make certs first"; exit 1; }
	$(COMPOSE) -f docker-compose.yml -f docker-compose.tls.yml up -d
	@echo "frontends on https://127.0.0.1:8080 and :8082; sluicectl --tls-ca certs/ca.pem --tls-cert certs/client.pem --tls-key certs/client-key.pem ..."

down: ## stop the docker-compose cluster and remove its volumes
	$(COMPOSE) down -v

clean: ## remove build outputs
	rm -rf bin
