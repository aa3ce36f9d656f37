# zonal: make build | test | run | bench | module
#
# Every target installs what it needs (Debian packages, the NGINX source, Go
# modules) through the scripts under build/, so a fresh machine needs only
# Go and this repository.

GO       ?= go
GOFLAGS  ?=
export GOFLAGS

BIN      := bin
NGINX    := $(BIN)/nginx
# Seconds of fuzzing per target in `make test`; `make fuzz FUZZ_SECONDS=300`
# for a longer run.
FUZZ_SECONDS ?= 10

.PHONY: all build nginx zonal module test test-go test-c fuzz bench run clean help

all: build

help:
	@echo "make build   bin/nginx (with the zonal module) and bin/zonal"
	@echo "make test    every test: C reader, Go packages, NGINX integration"
	@echo "make run     a local demo of the data plane on loopback"
	@echo "make bench   benchmarks, printing figures"
	@echo "make module  the module as a dynamic module for Debian's nginx"
	@echo "make fuzz    fuzz the table reader longer (FUZZ_SECONDS=300)"

build: nginx zonal

nginx:
	build/nginx.sh

zonal:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/zonal ./cmd/zonal

module:
	build/module.sh

test: build test-c test-go

test-c:
	cgo/ctest/run.sh test
	cgo/ctest/run.sh fuzz $(FUZZ_SECONDS)

test-go:
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZ_SECONDS)s ./cgo/table/

fuzz: FUZZ_SECONDS = 300
fuzz:
	cgo/ctest/run.sh fuzz $(FUZZ_SECONDS)
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZ_SECONDS)s ./cgo/table/
	$(GO) test -run '^$$' -fuzz '^FuzzEncodeRoundTrip$$' -fuzztime $(FUZZ_SECONDS)s ./cgo/table/

bench: nginx
	test/bench/run.sh

run: build
	test/demo/run.sh

clean:
	rm -rf $(BIN)
