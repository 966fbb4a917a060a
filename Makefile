# Everyday tasks. CI runs .ci/run, which covers test, lint and generate.
GO ?= go

.PHONY: all build test race lint fmt generate bench fuzz ci

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

fmt:
	gofmt -w .

generate:
	$(GO) generate ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

fuzz:
	FUZZTIME=30s bash .ci/run

ci:
	bash .ci/run
