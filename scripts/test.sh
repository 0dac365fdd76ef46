#!/usr/bin/env bash
# Full test suite: installs dependencies, builds the real Kubernetes control plane into its cache
# (scripts/k8s-setup.sh, in the background and at low priority while the ASan/UBSan preset
# builds), then runs every CTest test and the format check. Arguments go to ctest.
# TESSERA_SKIP_K8S=1 leaves out the control-plane build and the "k8s" tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

k8s_pid=""
if [ "${TESSERA_SKIP_K8S:-0}" != 1 ]; then
  k8s_out=$(mktemp)
  k8s_log=$(mktemp)
  TESSERA_K8S_BUILD_JOBS=${TESSERA_K8S_BUILD_JOBS:-2} scripts/k8s-setup.sh >"$k8s_out" 2>"$k8s_log" &
  k8s_pid=$!
fi

# Compiler output is cached outside the repository (keyed by ccache on the compiler, its flags
# and the preprocessed source), so a clone builds only what changed since the last run.
# TESSERA_CCACHE=0 builds without it.
launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_C_COMPILER_LAUNCHER=)
if [ "${TESSERA_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/ccache}"
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-6G}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake --preset asan "${launcher[@]}" >/dev/null
cmake --build --preset asan

extra=()
if [ -n "$k8s_pid" ]; then
  if ! wait "$k8s_pid"; then
    echo "test: building the Kubernetes control plane failed:" >&2
    cat "$k8s_log" >&2
    exit 1
  fi
  TESSERA_K8S_BIN=$(tail -n 1 "$k8s_out")
  export TESSERA_K8S_BIN
  grep -E "built in|already built" "$k8s_log" >&2 || true
  rm -f "$k8s_out" "$k8s_log"
else
  extra=(-LE k8s)
fi
ctest --preset asan "${extra[@]}" "$@"
