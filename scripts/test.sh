#!/usr/bin/env bash
# Full test suite: installs dependencies, builds the ASan/UBSan preset, runs every CTest test
# and the format check.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan "$@"
