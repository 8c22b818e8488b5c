# bub-mcp: `make run` starts the server with zero configuration; `make test`
# runs every check CI runs. Only Go is needed; the end-to-end suites install
# their own Node packages (see e2e/setup.sh) and the sandbox tests
# bubblewrap (see scripts/test-deps.sh).

GO          ?= go
BIN         ?= bin/bub-mcp
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHTIME   ?= 1s
# make run serves HTTP for a human to poke at; MCP clients launch
# `bub-mcp serve` (stdio) themselves. Override: make run RUN_ARGS=
RUN_ARGS    ?= --http 127.0.0.1:8080
PKGS        := ./...

.PHONY: all build run test fmt-check vet lint unit test-deps bench e2e clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/bub-mcp

run: build
	./$(BIN) serve $(RUN_ARGS)

test: fmt-check vet lint unit e2e

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

lint:
	$(GO) run $(STATICCHECK) $(PKGS)

unit: test-deps
	$(GO) test -race -count=1 $(PKGS)

# bubblewrap for the sandbox tests (installed with apt when root).
test-deps:
	@bash scripts/test-deps.sh

e2e:
	bash e2e/run.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

clean:
	rm -rf bin
