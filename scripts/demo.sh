#!/usr/bin/env bash
# Main job on the embedded default: builds the release preset and runs `tessera demo`,
# which generates a cluster and workload, compares the policies and writes out/demo.svg.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release >/dev/null
mkdir -p out
exec build/release/apps/tessera/tessera demo --plot out/demo.svg --json out/demo.json "$@"
