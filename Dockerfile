# bub-mcp in a container: a static binary on a small Debian with what the
# tools need at run time (bash for bash, python3 for run_code, git and
# ca-certificates for web.fetch and everyday commands), run as a non-root
# user. Build: docker build -t bub-mcp .
# Run:   docker run --rm -p 8080:8080 -v "$PWD:/work" -v bub-home:/home/bub/.bub \
#          -e BUB_TOKEN=... bub-mcp
# It serves streamable HTTP on 0.0.0.0:8080; a non-loopback bind needs an
# auth token (the default command reads it from $BUB_TOKEN through
# /etc/bub-mcp/bub.toml) or --insecure.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
# go.mod replaces a module with this patched copy (see its PATCHES.md).
COPY third_party ./third_party
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/bubbuild/bub-mcp/cli.Version=${VERSION}" \
      -o /out/bub-mcp ./cmd/bub-mcp

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bash python3 git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 --shell /bin/bash bub \
 && mkdir -p /work /etc/bub-mcp && chown bub:bub /work
COPY --from=build /out/bub-mcp /usr/local/bin/bub-mcp
# The token is read from the environment at start; only its hash is kept.
RUN printf '[profiles.default]\nworkspace = "/work"\nconfine = true\n\n[[auth.tokens]]\nname = "container"\nenv = "BUB_TOKEN"\n' > /etc/bub-mcp/bub.toml
USER bub
WORKDIR /work
ENV BUB_CONFIG=/etc/bub-mcp/bub.toml BUB_LOG_FORMAT=json
EXPOSE 8080
HEALTHCHECK CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && grep -qE '^(ok|degraded)' <&3"]
ENTRYPOINT ["bub-mcp"]
CMD ["serve", "--http", "0.0.0.0:8080"]
