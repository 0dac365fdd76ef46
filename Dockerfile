# Tessera's container image, for hosts with a container engine:
#   docker build -t ghcr.io/tessera-scheduler/tessera:0.1.0 .
# Without one, scripts/build-image.sh builds the same layout (binary at /usr/local/bin/tessera,
# user 65532, CA certificates) from a local build, with buildah and no base image.

# Build: Debian 12 with the product's build dependencies from scripts/setup.sh (the rest of that
# list serves the tests, benchmarks, format check and image tooling). Only the `tessera` target,
# with the node agent's device plugin (gRPC and protobuf from Debian).
FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build g++ nlohmann-json3-dev libcli11-dev libcpp-httplib-dev \
      libssl-dev libyaml-cpp-dev pkg-config libgrpc++-dev libprotobuf-dev protobuf-compiler \
      protobuf-compiler-grpc \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake --preset release -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF \
 && cmake --build --preset release --target tessera

# Runtime: the packages of the shared libraries `ldd` lists for the release binary (found with
# `dpkg -S`): libc6 (libc, libm, the loader), libgcc-s1, libstdc++6, libssl3 (libssl, libcrypto),
# libyaml-cpp0.7, libcpp-httplib0.11, libbrotli1 and zlib1g (cpp-httplib's compression), and for
# the device plugin libgrpc++1.51, libgrpc29, libprotobuf32, libabsl20220623, libc-ares2 and
# libre2-9; plus CA certificates. Some are in bookworm-slim already; listing them keeps the set explicit.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libc6 libgcc-s1 libstdc++6 libssl3 libyaml-cpp0.7 libcpp-httplib0.11 libbrotli1 zlib1g \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libc-ares2 libre2-9 \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 tessera \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin tessera
COPY --from=build /src/build/release/apps/tessera/tessera /usr/local/bin/tessera
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/tessera"]
