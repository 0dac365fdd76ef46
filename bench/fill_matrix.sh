#!/usr/bin/env bash
# The FGD paper's fill matrix (protocol: ../shared/reference/fgd-benchmark.md): every
# policy x seeds 42-51 x the 17 trace files of the paper, one `tessera sim fill` per trace file.
#
# Usage: bench/fill_matrix.sh RESULTS.md
# Writes a markdown table (trace file x policy: mean unallocated GPU % at 100% arrival over the
# seeds; the best of each row in bold; whether fgd beats the five other baselines and whether
# tessera beats fgd) and the total wall and CPU time to stdout and to RESULTS.md, and keeps each
# file's JSON and wall/user/system seconds (times.txt) in RESULTS-json/.
# Environment (defaults in brackets):
#   TESSERA_BIN  tessera binary [build/release/apps/tessera/tessera]
#   TRACES       trace directory [../shared/traces/alibaba-gpu-2023]
#   POLICIES     comma-separated [random,dotprod,clustering,packing,bestfit,fgd,tessera]
#   SEEDS        [42-51]
#   THREADS      worker threads per run, 0 = all cores [0]
#   FILES        space-separated trace names [the paper's 17]
# Relative paths are taken from the repository root. Needs jq and /usr/bin/time (Debian packages
# jq, time). Exit status: 0 on success, non-zero if a run fails, 2 on a usage error.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 RESULTS.md" >&2
  exit 2
fi
results=$(realpath -m "$1")
cd "$(dirname "$0")/.."

bin=${TESSERA_BIN:-build/release/apps/tessera/tessera}
traces=${TRACES:-../shared/traces/alibaba-gpu-2023}
policies=${POLICIES:-random,dotprod,clustering,packing,bestfit,fgd,tessera}
seeds=${SEEDS:-42-51}
threads=${THREADS:-0}
files=${FILES:-"default cpu050 cpu100 cpu200 cpu250 gpushare40 gpushare60 gpushare80 gpushare100
  gpuspec10 gpuspec20 gpuspec25 gpuspec33 multigpu20 multigpu30 multigpu40 multigpu50"}
baselines=(random dotprod clustering packing bestfit)

command -v jq >/dev/null || { echo "$0: needs jq (apt-get install jq)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "$0: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
[ -x "$bin" ] || { echo "$0: no binary at $bin (build the release preset first)" >&2; exit 2; }
nodes="$traces/openb_node_list_gpu_node.csv"
[ -r "$nodes" ] || { echo "$0: cannot read $nodes" >&2; exit 2; }

json_dir="${results%.md}-json"
mkdir -p "$json_dir" "$(dirname "$results")"
IFS=, read -r -a pols <<<"$policies"

has_policy() {
  local p
  for p in "${pols[@]}"; do [ "$p" = "$1" ] && return 0; done
  return 1
}

calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }

times_file="$json_dir/times.txt"
: >"$times_file"
start=$(date +%s.%N)
for f in $files; do
  echo "fill_matrix: $f" >&2
  /usr/bin/time -f "$f %e %U %S" -a -o "$times_file" \
    "$bin" sim fill --nodes "$nodes" --pods "$traces/openb_pod_list_$f.csv" --policy "$policies" \
    --seeds "$seeds" --threads "$threads" --json "$json_dir/$f.json" >/dev/null
done
end=$(date +%s.%N)
wall=$(calc "$end - $start")
cpu=$(awk '{ s += $3 + $4 } END { printf "%.1f", s }' "$times_file")

value() { jq -r --arg p "$2" '.policies[$p].unalloc_pct_at_100' "$json_dir/$1.json"; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }

{
  echo "Mean unallocated GPU % at 100% arrival, seeds $seeds, tune 1.3 (lower is better; best in bold)."
  echo
  header="| trace |"
  rule="|---|"
  for p in "${pols[@]}"; do
    header+=" $p |"
    rule+="---:|"
  done
  header+=" fgd beats the 5 baselines | tessera beats fgd |"
  rule+="---|---|"
  echo "$header"
  echo "$rule"
  fgd_wins=0
  tessera_wins=0
  for f in $files; do
    declare -A v=()
    best=""
    for p in "${pols[@]}"; do
      v[$p]=$(printf '%.2f' "$(value "$f" "$p")")
      if [ -z "$best" ] || lt "${v[$p]}" "$best"; then best=${v[$p]}; fi
    done
    row="| $f |"
    for p in "${pols[@]}"; do
      if [ "${v[$p]}" = "$best" ]; then row+=" **${v[$p]}** |"; else row+=" ${v[$p]} |"; fi
    done
    fgd_cell="n/a"
    if has_policy fgd; then
      fgd=$(value "$f" fgd)
      other=""
      for b in "${baselines[@]}"; do
        has_policy "$b" || continue
        x=$(value "$f" "$b")
        if [ -z "$other" ] || lt "$x" "$other"; then other=$x; fi
      done
      if [ -n "$other" ]; then
        margin=$(printf '%+.2f' "$(calc "$fgd - $other")")
        if lt "$fgd" "$other"; then
          fgd_cell="yes ($margin)"
          fgd_wins=$((fgd_wins + 1))
        else
          fgd_cell="no ($margin)"
        fi
      fi
    fi
    tessera_cell="n/a"
    if has_policy fgd && has_policy tessera; then
      t=$(value "$f" tessera)
      margin=$(printf '%+.2f' "$(calc "$t - $(value "$f" fgd)")")
      if lt "$t" "$(value "$f" fgd)"; then
        tessera_cell="yes ($margin)"
        tessera_wins=$((tessera_wins + 1))
      else
        tessera_cell="no ($margin)"
      fi
    fi
    echo "$row $fgd_cell | $tessera_cell |"
    unset v
  done
  n=$(wc -w <<<"$files")
  echo
  echo "Margins in brackets: fgd minus the best of the other baselines; tessera minus fgd (points)."
  echo "fgd beats the other baselines on $fgd_wins of $n files; tessera beats fgd on $tessera_wins of $n."
  printf 'Total wall time: %.1f s (CPU %s s) for %s files x %s policies x seeds %s' \
    "$wall" "$cpu" "$n" "${#pols[@]}" "$seeds"
  printf ' (%s, --threads %s, %s cores).\n' "$bin" "$threads" "$(nproc)"
} | tee "$results"
