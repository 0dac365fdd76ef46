#!/usr/bin/env bash
# Wall time of one fill experiment (one trace file, one policy, one seed, one thread), for
# comparison with the reference simulator's ~10 minutes per experiment.
#
# Usage: bench/fill_one.sh
# Runs `tessera sim fill` RUNS times after one warm-up run, with hyperfine when it is installed,
# otherwise with a loop of /usr/bin/time, and prints the median wall seconds on the last line.
# Environment (defaults in brackets):
#   TESSERA_BIN  [build/release/apps/tessera/tessera]
#   TRACES       [../shared/traces/alibaba-gpu-2023]
#   POD_FILE     trace name [default]   POLICY [fgd]   SEED [42]   RUNS [10]
# Relative paths are taken from the repository root. Exit status 0, non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${TESSERA_BIN:-build/release/apps/tessera/tessera}
traces=${TRACES:-../shared/traces/alibaba-gpu-2023}
pods="$traces/openb_pod_list_${POD_FILE:-default}.csv"
policy=${POLICY:-fgd}
seed=${SEED:-42}
runs=${RUNS:-10}
[ -x "$bin" ] || { echo "$0: no binary at $bin (build the release preset first)" >&2; exit 1; }

cmd=("$bin" sim fill --nodes "$traces/openb_node_list_gpu_node.csv" --pods "$pods"
  --policy "$policy" --seeds "$seed" --threads 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if command -v hyperfine >/dev/null; then
  hyperfine --style basic --warmup 1 --runs "$runs" --export-json "$tmp/h.json" \
    "$(printf '%q ' "${cmd[@]}")" >&2
  if command -v jq >/dev/null; then
    median=$(jq -r '.results[0].median' "$tmp/h.json")
  else
    median=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["median"])' \
      "$tmp/h.json")
  fi
  tool=hyperfine
else
  "${cmd[@]}" >/dev/null
  for ((i = 0; i < runs; ++i)); do
    /usr/bin/time -f '%e' -a -o "$tmp/times" "${cmd[@]}" >/dev/null
  done
  median=$(sort -g "$tmp/times" | awk '{ v[NR] = $1 } END {
    print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  tool=/usr/bin/time
fi
printf 'fill_one: %s, %s, seed %s, 1 thread, %s runs (%s)\n' "$(basename "$pods")" "$policy" \
  "$seed" "$runs" "$tool"
printf 'median wall seconds: %.3f\n' "$median"
