# Everyday tasks. CI runs .ci/run, which covers test, lint and generate.
GO ?= go

.PHONY: all build test race lint lint-contract fmt generate bench fuzz soak ci

all: lint test

build:
	$(GO) build -o bin/substate ./cmd/substate

test:
	$(GO) test ./...

race:
	$(GO) test -race ./...

lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l .; echo "run make fmt"; exit 1)
	$(GO) vet ./...
	.ci/tools staticcheck golangci-lint
	bin/tools/staticcheck ./...
	bin/tools/golangci-lint run ./...

# The contract documents under the pinned linters of contract/lint:
# Redocly CLI (recommended-strict) and the AsyncAPI CLI (npm, about 450 MB).
lint-contract:
	cd contract/lint && (test -d node_modules/.bin || npm ci --ignore-scripts --no-audit --no-fund) && ./run

fmt:
	gofmt -w .

generate:
	$(GO) generate ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Kill the change feed between commit and publish many more times than the
# tests do: in process, and as a real worker process killed with SIGKILL.
soak:
	SUBSTATE_SOAK_CYCLES=20000 $(GO) test -run '^TestChangeFeedCrash$$' -count=1 -timeout 2h ./publishers/
	SUBSTATE_SOAK_KILLS=200 $(GO) test -run '^TestCrashChangeFeed$$' -count=1 -timeout 2h ./cmd/substate/

fuzz:
	FUZZTIME=30s bash .ci/run

ci:
	bash .ci/run
