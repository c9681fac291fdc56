#!/usr/bin/env bash
# Builds (Release) and runs Petrel's microbenchmarks, one binary after another, printing Google
# Benchmark's console table. Figures recorded in bench/RESULTS.md come from this script.
# Usage: bench/micro/run.sh [benchmark-filter-regex]   (env MIN_TIME, default 1 second)
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/install-deps.sh >/dev/null
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DPETREL_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench --target spsc_ring_bench timer_bench router_bench header_map_bench \
  middleware_bench >/dev/null
filter=${1:-.}
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
for b in spsc_ring_bench timer_bench router_bench header_map_bench middleware_bench; do
  build-bench/bench/micro/$b --benchmark_filter="$filter" --benchmark_min_time="${MIN_TIME:-1}" \
    --benchmark_counters_tabular=true 2>&1 | grep -v '^\*\*\*WARNING'
done
