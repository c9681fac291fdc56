#!/usr/bin/env bash
# UDP send syscalls per HTTP/3 request of petrel-server, for one or more builds side by side:
# strace -c -f on the server under petrel-bench at two load sizes, reported per request as the
# difference of the two, so that start-up, handshakes and closes cancel.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/h3/send_syscalls.sh [options] BUILD_DIR [BUILD_DIR ...]

For each build (a directory with src/server/petrel-server and src/tools/petrel-bench), runs
petrel-server --workers 0 (pinned to CPU 0) under `strace -f -c` while petrel-bench (CPU 1)
sends N1 and then, against a fresh server, N2 requests for a 12-byte file; prints sendmsg,
sendmmsg, recvmmsg and epoll_wait calls per request over the N2 - N1 extra requests.
The builds run one after the other, in the order given, once per round.

  -c N          connections (default 50)
  -m N          requests in flight per connection (default 10)
  --n1 N        the smaller load (default 20000)
  --n2 N        the larger load (default 50000)
  --rounds N    rounds (default 1)
  -h, --help    this text

Needs strace, taskset, ss. Each petrel-bench run is bounded by `timeout 120`.
EOF
}

conns=50 streams=10 n1=20000 n2=50000 rounds=1
builds=()
while (($#)); do
  case $1 in
    -c) conns=$2; shift 2 ;;
    -m) streams=$2; shift 2 ;;
    --n1) n1=$2; shift 2 ;;
    --n2) n2=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    *) builds+=("$1"); shift ;;
  esac
done
((${#builds[@]})) || { usage >&2; exit 2; }
((n2 > n1)) || { echo "--n2 must be larger than --n1" >&2; exit 2; }
for t in strace taskset ss; do
  command -v "$t" >/dev/null || { echo "$t is missing (scripts/install-deps.sh --bench)" >&2; exit 2; }
done
for b in "${builds[@]}"; do
  [[ -x $b/src/server/petrel-server && -x $b/src/tools/petrel-bench ]] ||
    { echo "$b: petrel-server or petrel-bench not built" >&2; exit 2; }
done

work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/www"
printf 'hello-petrel' >"$work/www/12b"

# Prints "sendmsg sendmmsg recvmmsg epoll_wait" calls for one run of `n` requests.
run_once() { # build n
  local build=$1 n=$2 port
  port=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  rm -f "$work/strace.txt"
  taskset -c 0 strace -f -c -o "$work/strace.txt" -e trace=sendmsg,sendmmsg,recvmmsg,epoll_wait \
    "$build/src/server/petrel-server" --listen 127.0.0.1 --http-port 0 --https-port "$port" \
    --workers 0 --grace 1 --root "$work/www" >"$work/server.log" 2>&1 &
  server_pid=$!
  local ready=0
  for _ in $(seq 1 100); do
    if ss -Hlun "sport = :$port" | grep -q .; then ready=1; break; fi
    sleep 0.1
  done
  ((ready)) || { echo "petrel-server did not start:" >&2; cat "$work/server.log" >&2; exit 1; }
  sleep 0.5  # the line says it listens before its loop runs
  if ! taskset -c 1 timeout 120 "$build/src/tools/petrel-bench" -k -t 1 -c "$conns" -m "$streams" \
      -n "$n" "https://127.0.0.1:$port/12b" >"$work/bench.log" 2>&1; then
    echo "petrel-bench failed:" >&2; tail -3 "$work/bench.log" >&2; exit 1
  fi
  # strace's child is the server: stop it, and strace writes its table when it exits.
  pkill -TERM -f -- "--https-port $port " || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
  awk '$NF ~ /^(sendmsg|sendmmsg|recvmmsg|epoll_wait)$/ { n[$NF] = $4 }
       END { printf "%d %d %d %d\n", n["sendmsg"], n["sendmmsg"], n["recvmmsg"], n["epoll_wait"] }' \
    "$work/strace.txt"
}

echo "# petrel-server --workers 0 under petrel-bench -c $conns -m $streams; per request over $n1 -> $n2 requests"
printf '%-40s %10s %10s %10s %10s %14s\n' build sendmsg sendmmsg recvmmsg epoll_wait "sends/turn"
for ((round = 1; round <= rounds; round++)); do
  for b in "${builds[@]}"; do
    read -r s1 m1 r1 e1 < <(run_once "$b" "$n1")
    read -r s2 m2 r2 e2 < <(run_once "$b" "$n2")
    python3 - "$b" "$((n2 - n1))" "$((s2 - s1))" "$((m2 - m1))" "$((r2 - r1))" "$((e2 - e1))" <<'PY'
import sys
b, n, s, m, r, e = sys.argv[1], *map(int, sys.argv[2:])
turns = max(e, 1)
print(f"{b:<40} {s / n:10.4f} {m / n:10.4f} {r / n:10.4f} {e / n:10.4f} {(s + m) / turns:14.2f}")
PY
  done
done
