# syntax=docker/dockerfile:1
#
# The strand image: one static binary on distroless, running as a
# non-root user. Build and run (see the README's "Deploying"):
#
#   docker build -t strand --build-arg VERSION=$(git describe --tags --always) \
#       --build-arg COMMIT=$(git rev-parse HEAD) --build-arg BUILD_TIME=$(date -u +%FT%TZ) .
#   docker run -p 9092:9092 -p 9644:9644 -p 8081:8081 strand
#
# Published, the HTTP port (9644) and the schema registry (8081) take no
# caller without credentials beyond /healthz, /readyz and /metrics: give
# the agent --admin-token-file (or --http-tls with client certificates),
# and registry clients may also use HTTP basic auth as a SASL user.
#
# deploy/docker_test.go runs this file's go build command and checks the
# binary is static, and checks the USER, EXPOSE and HEALTHCHECK below.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, so a source change reuses the downloaded modules.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# .git is not in the build context (.dockerignore), so the commit and
# version come in as build arguments; empty ones leave what Go's build
# info knows (strand version).
ARG VERSION="" COMMIT="" BUILD_TIME=""
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
        -ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT -X main.buildTime=$BUILD_TIME" \
        -o /out/strand ./cmd/strand
# The data directory, owned by the runtime user: distroless has no shell
# to make it at run time.
RUN mkdir -p /out/var/lib/strand

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/strand /strand
COPY --from=build --chown=65532:65532 /out/var/lib/strand /var/lib/strand
# distroless's nonroot user, by number so that Kubernetes' runAsNonRoot
# can check it without a passwd file.
USER 65532:65532
# Listen on every interface: a container's loopback is unreachable from
# outside it. Each is an environment variable rather than an argument so
# that `docker run strand serve --objstore ...` keeps them.
ENV STRAND_KAFKA_LISTEN=:9092 \
    STRAND_HTTP_LISTEN=:9644 \
    STRAND_SCHEMA_REGISTRY_LISTEN=:8081 \
    STRAND_DATA_DIR=/var/lib/strand
EXPOSE 9092 9644 8081
# strand healthcheck asks /readyz on STRAND_HTTP_LISTEN; no shell needed.
# The start period covers replaying the log at start.
HEALTHCHECK --interval=10s --timeout=5s --start-period=2m --retries=3 \
    CMD ["/strand", "healthcheck"]
ENTRYPOINT ["/strand"]
CMD ["serve"]
