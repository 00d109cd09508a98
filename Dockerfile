# Tollgate's container image (docs/design.md §14): built on Debian 12 with the packages of
# scripts/deps.sh, run from Debian 12 slim with only the shared libraries, as a non-root user.
#
#   docker build -t tollgate .          (BuildKit, the default since Docker 23: RUN --mount)
#   podman build --format docker -t tollgate .   (docker format: OCI images drop HEALTHCHECK)
#   docker run -p 8080:8080 -p 127.0.0.1:9090:9090 \
#     -e TOLLGATE_POW_SECRET=... -e TOLLGATE_ADMIN_TOKEN=... tollgate
#
# scripts/image.sh builds it with whichever engine is here (base images made with debootstrap
# when no registry answers) and smoke-tests the result.

# ---- build: the two binaries, nothing else ---------------------------------------------------
FROM docker.io/library/debian:bookworm AS build

# scripts/deps.sh's tollgate_run_packages without the tour's tools (openssl, curl,
# python3-websockets); its tollgate_test_packages are left out with the tests and benchmarks.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake ninja-build g++ ccache pkg-config \
      libyaml-cpp-dev libboost1.81-dev libssl-dev libspdlog-dev prometheus-cpp-dev libhiredis-dev libnghttp2-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
# Only what the two targets compile: an edit to tests/, bench/ or the docs keeps this layer.
COPY CMakeLists.txt ./
COPY gateway gateway
COPY tools tools

# RelWithDebInfo: the optimisation the tests and benchmarks run with (-O2); the debug
# information is stripped below. The ccache directory is a build cache, not a layer, so a
# rebuild after an edit recompiles only what changed. BUILD_TESTING and TOLLGATE_BENCH off: no
# Catch2 or Google Benchmark needed.
ARG BUILD_TYPE=RelWithDebInfo
ENV CCACHE_DIR=/root/.cache/ccache CCACHE_BASEDIR=/src CCACHE_MAXSIZE=2G
RUN --mount=type=cache,target=/root/.cache/ccache \
    ccache --zero-stats >/dev/null \
 && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
      -DBUILD_TESTING=OFF -DTOLLGATE_BENCH=OFF \
 && cmake --build build --target tollgate tollgate-echo \
 && (ccache --show-stats || true)
RUN strip build/tollgate build/tollgate-echo

# ---- runtime --------------------------------------------------------------------------------
FROM docker.io/library/debian:bookworm-slim

# The shared libraries of `ldd tollgate` beyond libc and libstdc++ (tollgate-echo needs only
# OpenSSL's). No ca-certificates: TLS to Redis names its CA file in the configuration.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libyaml-cpp0.7 libssl3 libspdlog1.10 libfmt9 libprometheus-cpp-core1.0 libhiredis0.14 libnghttp2-14 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
 && groupadd --system --gid 10001 tollgate \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin tollgate \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/tollgate

COPY --from=build /src/build/tollgate /src/build/tollgate-echo /usr/local/bin/
COPY deploy/docker/healthcheck.sh /usr/local/bin/tollgate-healthcheck
# The default configuration, owned by root and readable by the gateway's user. Secrets are not
# in it: TOLLGATE_POW_SECRET and TOLLGATE_ADMIN_TOKEN come from the environment at run time.
COPY deploy/docker/gateway.yaml /etc/tollgate/gateway.yaml
COPY policies/default.yaml /etc/tollgate/policies/default.yaml

USER 10001:10001
# The shipped binary, with the shipped libraries and as its user, accepts the shipped
# configuration (a build fails here rather than a container at start).
RUN ["/usr/local/bin/tollgate", "--check-config", "/etc/tollgate/gateway.yaml"]
# /var/lib/tollgate: where store.state_file goes (docs/configuration.md, "The state file").
VOLUME ["/etc/tollgate", "/var/lib/tollgate"]
# public listener, admin listener (/metrics, /healthz, /readyz, /admin/*)
EXPOSE 8080 9090
# The healthcheck's port: change it with the admin port of a mounted configuration.
ENV TOLLGATE_ADMIN_PORT=9090
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/tollgate-healthcheck"]
# SIGTERM drains (in-flight requests finish) before the gateway exits; SIGHUP reloads
# (docker kill -s HUP).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/tollgate"]
CMD ["--config", "/etc/tollgate/gateway.yaml"]

# Last, so that a new revision changes no layer above.
ARG VERSION=unknown
ARG REVISION=unknown
LABEL org.opencontainers.image.title="tollgate" \
      org.opencontainers.image.description="Reverse-proxy rate-limiting gateway: GCRA limits per address, proof-of-work challenges, bans, Prometheus metrics" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim"
