#!/usr/bin/env bash
# The node flow on one machine, no cluster and no GPU: builds tessera-demo-node (release preset)
# and runs it. It starts the real scheduler runtime and the real node agent against an
# in-process fake API server, a fake kubelet and a fake NVML library, submits four pods
# (MIG instance, strict share, standard share, whole GPU) and prints each step.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build build/release --target tessera-demo-node >/dev/null
exec build/release/tools/demo_node/tessera-demo-node "$@"
