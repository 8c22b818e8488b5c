# bub-mcp: `make run` starts the server with zero configuration; `make test`
# runs every check CI runs. Only Go is needed; the end-to-end suites install
# their own Node packages (see e2e/setup.sh), the sandbox and fs.grep tests
# bubblewrap and ripgrep (see scripts/test-deps.sh).

GO          ?= go
BIN         ?= bin/bub-mcp
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHTIME   ?= 1s
FUZZTIME    ?= 30s
# make run serves HTTP for a human to poke at; MCP clients launch
# `bub-mcp serve` (stdio) themselves. Override: make run RUN_ARGS=
RUN_ARGS    ?= --http 127.0.0.1:8080
PKGS        := ./...
# make build stamps the release, commit and date into `bub-mcp version` and
# strips the symbol table and DWARF (-s -w): a smaller binary that starts
# faster; `go build` alone still reports the module version and commit.
# The date is the commit's, not the clock's, so the stamps change only
# with the commit: bin/bub-mcp is rebuilt when a Go source, go.mod/go.sum
# or the stamps changed (bin/.ldflags), and `make run` twice does not
# relink (go build -o rewrites the file even when nothing changed).
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT      ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE        ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
LDFLAGS     := -s -w -X github.com/bubbuild/bub-mcp/cli.Version=$(VERSION) \
               -X github.com/bubbuild/bub-mcp/cli.Commit=$(COMMIT) -X github.com/bubbuild/bub-mcp/cli.Date=$(DATE)

.PHONY: all build run FORCE test fmt-check vet lint unit e2e-deps pg-setup test-deps bench fuzz e2e clean

all: build

# Every Go source (tracked or new, tests aside) and the module files.
GO_SOURCES  := $(filter-out %_test.go,$(wildcard $(shell git ls-files -co --exclude-standard -- '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/node_modules/*'))) go.mod go.sum

build: $(BIN)

# Rewritten only when the stamps differ, so its date tells make whether
# they changed.
$(dir $(BIN)).ldflags: FORCE
	@mkdir -p $(dir $(BIN)); echo '$(LDFLAGS)' | cmp -s - $@ || echo '$(LDFLAGS)' > $@

$(BIN): $(GO_SOURCES) $(dir $(BIN)).ldflags
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/bub-mcp

FORCE:

run: $(BIN)
	./$(BIN) serve $(RUN_ARGS)

# Every check, each step run even after a failure; the last line is
# `N passed, M failed` over all of them (scripts/test.sh). What the tests
# need is set up first: the npm packages and Node 22, PostgreSQL and
# bubblewrap (each idempotent; with CI=true a missing one fails).
test: e2e-deps pg-setup test-deps
	@bash scripts/test.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

lint:
	$(GO) run $(STATICCHECK) $(PKGS)

# upstream/'s tests mount the pinned npm MCP servers that e2e/setup.sh
# installs (idempotent: a no-op once node_modules matches the lockfile);
# cli's OAuth browser test and the console suite drive Debian's chromium
# with the playwright-core that e2e/console/setup.sh installs.
e2e-deps:
	bash e2e/setup.sh >/dev/null
	bash e2e/console/setup.sh >/dev/null

# The PostgreSQL store's tests run a throw-away cluster of Debian's
# postgresql (installed here when missing; needs root for apt-get).
unit: e2e-deps pg-setup test-deps
	$(GO) test -race -count=1 $(PKGS)

pg-setup:
	bash internal/pgtest/setup.sh

# bubblewrap for the sandbox tests, ripgrep for fs.grep's (installed with apt when root);
# Ory Hydra for the OAuth tests (built once per machine from the Go module proxy).
test-deps:
	@bash scripts/test-deps.sh
	@bash scripts/oidc-setup.sh

e2e:
	bash e2e/run.sh

bench: e2e-deps
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

# Every fuzz target for FUZZTIME each; make test runs their seeds only.
fuzz:
	@for d in $$(git grep -l '^func Fuzz' -- '*_test.go' | xargs -n1 dirname | sort -u); do \
	  for f in $$(git grep -h '^func Fuzz' -- "$$d/*_test.go" | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "== $$d $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./$$d || exit 1; \
	  done; \
	done

clean:
	rm -rf bin
