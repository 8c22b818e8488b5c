# bub-mcp: `make run` starts the server with zero configuration; `make test`
# runs every check CI runs. Only Go is needed; the end-to-end suites install
# their own Node packages (see e2e/setup.sh).

GO          ?= go
BIN         ?= bin/bub-mcp
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHTIME   ?= 1s
# make run serves HTTP for a human to poke at; MCP clients launch
# `bub-mcp serve` (stdio) themselves. Override: make run RUN_ARGS=
RUN_ARGS    ?= --http 127.0.0.1:8080
PKGS        := ./...
# make build stamps the release, commit and date into `bub-mcp version` and
# strips the symbol table and DWARF (-s -w): a smaller binary that starts
# faster; `go build` alone still reports the module version and commit.
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT      ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE        ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS     := -s -w -X github.com/bubbuild/bub-mcp/cli.Version=$(VERSION) \
               -X github.com/bubbuild/bub-mcp/cli.Commit=$(COMMIT) -X github.com/bubbuild/bub-mcp/cli.Date=$(DATE)

.PHONY: all build run test fmt-check vet lint unit bench e2e clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/bub-mcp

run: build
	./$(BIN) serve $(RUN_ARGS)

# Every check, each step run even after a failure; the last line is
# `N passed, M failed` over all of them (scripts/test.sh).
test:
	@bash scripts/test.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

lint:
	$(GO) run $(STATICCHECK) $(PKGS)

unit:
	$(GO) test -race -count=1 $(PKGS)

e2e:
	bash e2e/run.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

clean:
	rm -rf bin
