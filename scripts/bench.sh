#!/usr/bin/env bash
# Builds the default preset, runs the reference benchmarks and prints the
# ratios against their in-run baselines and their targets as a Markdown table.
#
#   bash scripts/bench.sh [OUT.json]     # default build/bench.json
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-build/bench.json}

bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target ortmem_reference_bench
mkdir -p "$(dirname "$out")"
# Repetitions run in random order, so a slow spell of a shared machine lands
# on baselines and subjects alike and the medians' ratios stay comparable.
build/default/reference/bench/ortmem_reference_bench --benchmark_repetitions=9 \
  --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
  --benchmark_out="$out" --benchmark_out_format=json >/dev/null
/usr/bin/python3 scripts/bench_ratios.py "$out"
