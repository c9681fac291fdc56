#!/usr/bin/env bash
# WebSocket echo throughput and per-message cost of petrel-server --websocket-echo /ws, over h1
# (ws://), h2 (RFC 8441 extended CONNECT on h2c) and h3 (RFC 9220), loaded by petrel-ws-load
# (bench/websocket/ws_load.cc). No permessage-deflate: the load does not offer it.
#
# throughput mode (default): the matrix {protocols} x {small, large messages} x {1, C connections},
# each connection keeping W messages in flight. For each cell: messages/s, MB/s (payload, one
# direction), server CPU per message (utime+stime of /proc/PID/stat over the run, handshakes
# included, / messages) and the load tool's CPU per message. The server is pinned to CPU 0 and
# the load tool to CPU 1 (taskset) where there are two CPUs.
#
# callgrind mode: per protocol, the server under callgrind twice, echoing N1 then N2 small
# messages on one connection (W 1); instructions per message = (Ir(N2) - Ir(N1)) / (N2 - N1), so
# start-up, the handshake and shutdown cancel. Then the top functions of the N2 run.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/websocket/run.sh --build DIR [options]

  --build DIR        build with src/server/petrel-server and bench/websocket/petrel-ws-load
                     (this script builds nothing:
                      ninja -C DIR petrel-server petrel-ws-load)
  --mode MODE        throughput (default) or callgrind
  --protocols LIST   subset of h1,h2,h3 (default all)
  --small BYTES      small message size (default 32)
  --large BYTES      large message size (default 65536)
  --conns LIST       connection counts (default 1,100)
  --window W         messages in flight per connection (default 8)
  --small-n N        messages per small-message cell (default 60000)
  --large-n N        messages per large-message cell (default 4000)
  --timeout S        bound of each load run in seconds (default 30)
  --workers N        petrel-server --workers (default 1)
  --n1 N --n2 N      callgrind mode: the two loads (default 2000 and 6000)
  --top N            callgrind mode: functions listed (default 15; 0: none)
  --log-dir DIR      keep logs and callgrind files there
EOF
}

die() { echo "ws-bench: $*" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=
mode=throughput
protocols=h1,h2,h3
small=32
large=65536
conns_list=1,100
window=8
small_n=60000
large_n=4000
timeout_s=30
workers=1
n1=2000
n2=6000
top=15
log_dir=
while (($#)); do
  case $1 in
    --build) build=${2:?}; shift 2 ;;
    --mode) mode=${2:?}; shift 2 ;;
    --protocols) protocols=${2:?}; shift 2 ;;
    --small) small=${2:?}; shift 2 ;;
    --large) large=${2:?}; shift 2 ;;
    --conns) conns_list=${2:?}; shift 2 ;;
    --window) window=${2:?}; shift 2 ;;
    --small-n) small_n=${2:?}; shift 2 ;;
    --large-n) large_n=${2:?}; shift 2 ;;
    --timeout) timeout_s=${2:?}; shift 2 ;;
    --workers) workers=${2:?}; shift 2 ;;
    --n1) n1=${2:?}; shift 2 ;;
    --n2) n2=${2:?}; shift 2 ;;
    --top) top=${2:?}; shift 2 ;;
    --log-dir) log_dir=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
[[ -n $build ]] || die "--build DIR is required"
server_bin=$build/src/server/petrel-server
load_bin=$build/bench/websocket/petrel-ws-load
[[ -x $server_bin ]] || die "missing $server_bin"
[[ -x $load_bin ]] || die "missing $load_bin"
[[ $mode == throughput || $mode == callgrind ]] || die "unknown mode $mode"
if [[ $mode == callgrind ]]; then command -v valgrind >/dev/null || die "valgrind not installed"; fi

work=$(mktemp -d /tmp/petrel-ws-bench-XXXXXX)
[[ -n $log_dir ]] && mkdir -p "$log_dir"
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  if [[ -n $log_dir ]]; then cp -r "$work"/. "$log_dir"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

read -r http_port https_port < <(python3 "$repo/tests/support/server_ports.py" 2)
mkdir -p "$work/root" "$work/state"
export PETREL_STATE_DIR=$work/state
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -keyout "$work/key.pem" -out "$work/cert.pem" >/dev/null 2>&1 ||
  die "openssl could not make a certificate"

server_on=()
load_on=()
if [[ $(nproc) -ge 2 ]] && command -v taskset >/dev/null; then
  server_on=(taskset -c 0)
  load_on=(taskset -c 1)
  pinning="server on CPU 0, load tool on CPU 1"
else
  pinning="not pinned"
fi

server_args=(--listen 127.0.0.1 --http-port "$http_port" --https-port "$https_port"
  --workers "$workers" --grace 1 --root "$work/root" --cert "$work/cert.pem"
  --key "$work/key.pem" --access-log off --websocket-echo /ws)

start_server() { # tag [wrapper...]
  local tag=$1
  shift
  : >"$work/$tag.log"
  "${server_on[@]}" "$@" "$server_bin" "${server_args[@]}" >"$work/$tag.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do
    grep -q "listening on" "$work/$tag.log" && return 0
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/$tag.log" >&2; die "server exited"; }
    sleep 0.1
  done
  die "server did not start within 60 s"
}

stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 600); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
port_of() { [[ $1 == h3 ]] && echo "$https_port" || echo "$http_port"; }

failed=0
if [[ $mode == throughput ]]; then
  hz=$(getconf CLK_TCK)
  start_server throughput
  echo "petrel-server --workers $workers; $pinning; window $window per connection"
  printf '| proto | size | conns | messages | msgs/s | MB/s | server CPU µs/msg | client CPU µs/msg |\n'
  printf '|---|---:|---:|---:|---:|---:|---:|---:|\n'
  for proto in ${protocols//,/ }; do
    for size in "$small" "$large"; do
      for c in ${conns_list//,/ }; do
        if [[ $size == "$small" ]]; then n=$small_n; else n=$large_n; fi
        t0=$(cpu_ticks "$server_pid")
        if ! out=$("${load_on[@]}" "$load_bin" --proto "$proto" --port "$(port_of "$proto")" \
          -c "$c" -w "$window" -s "$size" -n "$n" -t "$timeout_s" 2>&1); then
          failed=1
        fi
        t1=$(cpu_ticks "$server_pid")
        echo "$out" >>"$work/load.log"
        python3 - "$out" "$t0" "$t1" "$hz" <<'EOF'
import sys
out, t0, t1, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
kv = dict(p.split("=", 1) for p in out.split() if "=" in p)
m = int(kv.get("messages", 0))
def per(x):
    return f"{x / m * 1e6:.1f}" if m else "-"
note = "" if kv.get("errors") == "0" else " FAILED: " + out.split("first_error=", 1)[-1]
print(f"| {kv.get('proto')} | {kv.get('size')} | {kv.get('conns')} | {m} | "
      f"{float(kv.get('msgs_per_s', 0)):.0f} | {kv.get('MB_per_s')} | "
      f"{per((t1 - t0) / hz)} | {per(float(kv.get('client_cpu_s', 0)))} |{note}")
EOF
      done
    done
  done
  stop_server
else
  echo "petrel-server --workers $workers under callgrind; $small-byte messages, 1 connection, window 1"
  echo "| proto | Ir at $n1 | Ir at $n2 | instructions per message |"
  echo "|---|---:|---:|---:|"
  for proto in ${protocols//,/ }; do
    declare -A ir=()
    for n in "$n1" "$n2"; do
      tag=cg-$proto-$n
      start_server "$tag" valgrind --tool=callgrind --callgrind-out-file="$work/$tag.out" \
        --log-file="$work/$tag.valgrind.log"
      if ! "${load_on[@]}" "$load_bin" --proto "$proto" --port "$(port_of "$proto")" -c 1 -w 1 \
        -s "$small" -n "$n" -t 120 >>"$work/load.log" 2>&1; then
        failed=1
        tail -1 "$work/load.log" >&2
      fi
      stop_server
      python3 "$repo/bench/cost/callgrind_cost.py" --own "$server_bin" "$work/$tag.out" \
        >"$work/$tag.json"
      ir[$n]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["total"])' \
        "$work/$tag.json")
    done
    echo "| $proto | ${ir[$n1]} | ${ir[$n2]} | $(((ir[$n2] - ir[$n1]) / (n2 - n1))) |"
    if ((top > 0)); then
      for n in "$n1" "$n2"; do
        python3 "$repo/bench/cost/callgrind_cost.py" --own "$server_bin" --top 400 \
          "$work/cg-$proto-$n.out" >"$work/top-$proto-$n.json"
      done
      # Per function: (self Ir at N2 - self Ir at N1) / (N2 - N1), the costliest first.
      python3 - "$work/top-$proto-$n1.json" "$work/top-$proto-$n2.json" "$((n2 - n1))" "$top" \
        "$proto" >>"$work/tops.txt" <<'EOF'
import json, sys
a, b = (json.load(open(f))["top"] for f in sys.argv[1:3])
extra, top, proto = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
key = lambda e: (e["fn"], e["ob"])
ia = {key(e): e["ir"] for e in a}
rows = sorted(((e["ir"] - ia.get(key(e), 0)) / extra, e["fn"], e["ob"]) for e in b)[::-1][:top]
print(f"\n{proto}: instructions per message by function (self)")
for per, fn, ob in rows:
    print(f"  {per:8.0f}  {fn[:90]}  [{ob}]")
EOF
    fi
    unset ir
  done
  if ((top > 0)); then cat "$work/tops.txt"; fi
fi
exit "$failed"
