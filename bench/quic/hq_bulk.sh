#!/usr/bin/env bash
# hq-interop bulk download: goodput and server CPU seconds per GB, QuicClient → QuicServer
# (petrel-hq-client → petrel-hq-server), for workers = 0 and 1 and GSO on and off, alternating
# the configurations round by round. The server is pinned to CPU 0, the client to CPU 1.
# Server CPU is read from /proc/<pid>/stat (user + system) around each download.
#
# Usage: bench/quic/hq_bulk.sh [SIZE_MB (default 100)] [ROUNDS (default 2)]
set -euo pipefail
cd "$(dirname "$0")/../.."
size_mb=${1:-100}
rounds=${2:-2}
bash scripts/install-deps.sh >/dev/null
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DPETREL_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench --target petrel-hq-server petrel-hq-client >/dev/null
server_bin=build-bench/src/quic/hq/petrel-hq-server
client_bin=build-bench/src/quic/hq/petrel-hq-client

work=$(mktemp -d)
trap 'kill "${server_pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/www" "$work/dl"
head -c $((size_mb * 1024 * 1024)) /dev/urandom >"$work/www/file"
want=$(sha256sum "$work/www/file" | cut -d' ' -f1)
tick=$(getconf CLK_TCK)
port=$((10000 + RANDOM % 20000))

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, $(uname -r), ${size_mb} MiB file"
printf '%-10s %-4s %-6s %12s %14s %10s\n' workers gso round "goodput" "server_cpu_s" "cpu_s/GB"
for round in $(seq 1 "$rounds"); do
  for config in "0 1" "0 0" "1 1" "1 0"; do
    read -r workers gso <<<"$config"
    port=$((port + 1))
    taskset -c 0 "$server_bin" --listen "127.0.0.1:$port" --root "$work/www" --workers "$workers" \
      --gso "$gso" 2>"$work/server.log" &
    server_pid=$!
    # Wait until the server answers (bounded).
    for _ in $(seq 1 50); do
      if taskset -c 1 "$client_bin" --insecure --download "$work/dl" \
        "https://127.0.0.1:$port/missing" >/dev/null 2>&1; then break; fi
      sleep 0.1
    done
    rm -f "$work/dl/file"
    before=$(cpu_ticks "$server_pid")
    start=$(date +%s.%N)
    timeout 120 taskset -c 1 "$client_bin" --insecure --download "$work/dl" \
      "https://127.0.0.1:$port/file" >/dev/null 2>"$work/client.log" || {
      echo "client failed:"; cat "$work/client.log"; exit 1; }
    end=$(date +%s.%N)
    after=$(cpu_ticks "$server_pid")
    kill -INT "$server_pid"; wait "$server_pid" || true
    got=$(sha256sum "$work/dl/file" | cut -d' ' -f1)
    [[ $got == "$want" ]] || { echo "download differs (workers=$workers gso=$gso)"; exit 1; }
    awk -v b=$((size_mb * 1024 * 1024)) -v s="$start" -v e="$end" -v c0="$before" -v c1="$after" \
      -v t="$tick" -v w="$workers" -v g="$gso" -v r="$round" 'BEGIN {
        secs = e - s; cpu = (c1 - c0) / t;
        printf "%-10s %-4s %-6s %9.1f Mb/s %14.2f %10.2f\n", w, g, r, b * 8 / secs / 1e6, cpu, cpu / (b / 1e9) }'
  done
done
