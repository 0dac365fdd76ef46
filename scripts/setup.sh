#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, and ccache, which only speeds up
# builds: the tests run without it when it cannot be installed. Idempotent: prints nothing and
# exits 0 when everything is already installed.
set -euo pipefail
packages=(build-essential cmake ninja-build g++ clang clang-format libgtest-dev libgmock-dev
  libbenchmark-dev nlohmann-json3-dev libcli11-dev jq time libcpp-httplib-dev libssl-dev
  libyaml-cpp-dev pkg-config buildah ca-certificates openssl python3 python3-yaml
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc prometheus)
optional=(ccache)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=() missing_optional=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
for p in "${optional[@]}"; do installed "$p" || missing_optional+=("$p"); done
[ ${#missing[@]} -eq 0 ] && [ ${#missing_optional[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ${#missing_optional[@]} -gt 0 ]; then
  echo "setup: installing ${missing_optional[*]} (optional)"
  if ! { [ ${#missing[@]} -gt 0 ] || $SUDO apt-get update -qq >/dev/null; } ||
    ! $SUDO apt-get install -y -qq --no-install-recommends "${missing_optional[@]}" >/dev/null; then
    echo "setup: could not install ${missing_optional[*]}; building without it" >&2
  fi
fi
