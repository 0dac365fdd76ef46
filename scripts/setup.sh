#!/usr/bin/env bash
# Installs the Debian packages the build and tests need. Idempotent: prints nothing and
# exits 0 when everything is already installed.
set -euo pipefail
packages=(build-essential cmake ninja-build g++ clang clang-format libgtest-dev libgmock-dev
  libbenchmark-dev nlohmann-json3-dev libcli11-dev jq time libcpp-httplib-dev libssl-dev
  libyaml-cpp-dev pkg-config buildah ca-certificates openssl python3 python3-yaml
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc prometheus ccache)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
