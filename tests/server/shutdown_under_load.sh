#!/usr/bin/env bash
# SIGTERM while petrel-server is under load on every protocol: wrk (h1), h2load (h2) and
# petrel-bench (h3) keep small requests going, and large downloads on each protocol are in flight
# (curl over h1 and h2 and petrel-client over h3, each reading at a limited rate so the server
# holds the rest, and gtlsclient over h3 at full speed).
# What must hold:
# - the server exits 0 within the grace period;
# - every download completes byte-exact (each had its first bytes before the signal);
# - no response was cut short: every response the server began it also finished
#   (access log `completed`), and every response it finished the client received whole — the
#   server's count of finished responses per protocol equals what wrk, h2load and petrel-bench
#   count as complete. A request the server did not begin was refused in the open (GOAWAY,
#   H3_REQUEST_REJECTED, a closed keep-alive connection, a refused connect).
# Usage: shutdown_under_load.sh PETREL-SERVER PETREL-BENCH PETREL-CLIENT [--size BYTES]
#        [--downloads N]
#        [--seconds S] [--grace S]
#   --size: bytes of each download (default 40 MB: more than loopback's socket buffers hold,
#   so the server is still sending when the signal comes); --downloads: per protocol (default
#   10; over h3 half of them gtlsclient); --seconds: how long the rate-limited downloads take
#   (default 10). The issue's full run: --size 100000000 --downloads 20 --seconds 20
#   --grace 120.
set -euo pipefail
# Private loopback: the load tools open thousands of connections, the ports are this test's alone.
# shellcheck source=private_netns.sh
source "$(dirname "$0")/private_netns.sh" "$0" "$@"
bin="$1"
bench="$2"
client="$3"
shift 3
size=40000000
downloads=10
seconds=10
grace=60
while [[ $# -gt 0 ]]; do
  case "$1" in
    --size) size="$2"; shift 2 ;;
    --downloads) downloads="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --grace) grace="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
for tool in wrk h2load curl gtlsclient; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
work="$(mktemp -d /tmp/petrel-shutdown-XXXXXX)"
export PETREL_STATE_DIR="$work/state"
# shellcheck source=server_test_lib.sh
source "$(dirname "$0")/server_test_lib.sh"
read -r http https < <(python3 "$(dirname "$0")/../support/server_ports.py" 2)

mkdir -p "$work/root" "$work/dl"
head -c "$size" /dev/urandom >"$work/root/big.bin"
printf 'small response body\n' >"$work/root/small.txt"
start --listen 127.0.0.1 --http-port "$http" --https-port "$https" --root "$work/root" \
  --grace "$grace" --access-log json --access-log-file "$work/access.log"

# The downloads. The rate limit makes each take about --seconds; gtlsclient reads at the pace
# of its single core.
rate=$((size / seconds + 1))
pids=()
names=()
for i in $(seq 1 "$downloads"); do
  curl -sS --http1.1 --limit-rate "$rate" -o "$work/dl/h1-$i" \
    "http://127.0.0.1:$http/big.bin" 2>"$work/dl/h1-$i.err" &
  pids+=($!); names+=("h1-$i")
  curl -sS -k --http2 --limit-rate "$rate" -o "$work/dl/h2-$i" \
    "https://127.0.0.1:$https/big.bin" 2>"$work/dl/h2-$i.err" &
  pids+=($!); names+=("h2-$i")
  mkdir -p "$work/dl/h3-$i.d"
  if ((i % 2 == 0)); then
    gtlsclient -q --exit-on-all-streams-close --download "$work/dl/h3-$i.d" 127.0.0.1 "$https" \
      "https://127.0.0.1:$https/big.bin" >/dev/null 2>"$work/dl/h3-$i.err" &
  else
    "$client" -k --timeout $((grace + 60)) --limit-rate "$rate" --download "$work/dl/h3-$i.d" \
      "https://127.0.0.1:$https/big.bin" 2>"$work/dl/h3-$i.err" &
  fi
  pids+=($!); names+=("h3-$i")
done

# The load: each tool runs until the server is gone (wrk until it is told to stop).
wrk -t 1 -c 16 -d 600 "http://127.0.0.1:$http/small.txt" >"$work/wrk.out" 2>&1 &
wrk_pid=$!
h2load -c 8 -m 10 -n 100000000 "https://127.0.0.1:$https/small.txt" >"$work/h2load.out" 2>&1 &
h2load_pid=$!
"$bench" -k -c 8 -m 10 -n 100000000 "https://127.0.0.1:$https/small.txt" \
  >"$work/bench.out" 2>&1 &
bench_pid=$!

# Once every load tool has had answers (the access log grows fast: look at its end only).
loaded() {
  local recent proto
  recent="$(tail -c 1000000 "$work/access.log")"
  for proto in HTTP/1.1 HTTP/2 HTTP/3; do
    grep -qF "\"path\":\"/small.txt\",\"protocol\":\"$proto\"" <<<"$recent" || return 1
  done
}
deadline=$((SECONDS + 30))
until loaded; do
  [[ $SECONDS -lt $deadline ]] || fail "the load did not get answers within 30 s"
  sleep 0.1
done

# Signal once every download has bytes.
h3_file() { echo "$work/dl/h3-$1.d/big.bin"; }
missing="?"
deadline=$((SECONDS + 30))
while [[ $SECONDS -lt $deadline ]]; do
  missing=""
  for i in $(seq 1 "$downloads"); do
    [[ -s "$work/dl/h1-$i" ]] || missing+=" h1-$i"
    [[ -s "$work/dl/h2-$i" ]] || missing+=" h2-$i"
    [[ -s "$(h3_file "$i")" ]] || missing+=" h3-$i"
  done
  [[ -z "$missing" ]] && break
  sleep 0.05
done
[[ -z "$missing" ]] || fail "downloads without a byte after 30 s:$missing"
in_flight=0
for i in $(seq 1 "$downloads"); do
  for f in "$work/dl/h1-$i" "$work/dl/h2-$i" "$(h3_file "$i")"; do
    [[ "$(stat -c %s "$f")" -lt "$size" ]] && in_flight=$((in_flight + 1))
  done
done
echo "SIGTERM with $in_flight of $((3 * downloads)) downloads in flight"
stop_at=$(date +%s.%N)
kill -TERM "$server_pid"
timeout $((grace + 30)) tail --pid="$server_pid" -f /dev/null || fail "server did not stop"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
stopped_at=$(date +%s.%N)
[[ $rc -eq 0 ]] || fail "server exit status $rc after SIGTERM"
echo "server stopped $(python3 -c "print(f'{$stopped_at - $stop_at:.2f}')") s after SIGTERM"

# The clients: the downloads and h2load / petrel-bench end by themselves once the server has
# gone; wrk is told to stop (SIGINT: it prints its totals).
kill -INT "$wrk_pid" 2>/dev/null || true
for pid in "${pids[@]}" "$wrk_pid" "$h2load_pid" "$bench_pid"; do
  timeout 60 tail --pid="$pid" -f /dev/null || fail "client $pid did not end within 60 s of the server"
done
bad=0
for idx in "${!pids[@]}"; do
  name="${names[$idx]}"
  crc=0
  wait "${pids[$idx]}" || crc=$?
  out="$work/dl/$name"
  [[ "$name" == h3-* ]] && out="$(h3_file "${name#h3-}")"
  if [[ $crc -ne 0 ]] || ! cmp -s "$out" "$work/root/big.bin"; then
    echo "download $name: exit $crc, $(stat -c %s "$out" 2>/dev/null || echo 0) of $size bytes: $(head -c 300 "$work/dl/$name.err")" >&2
    bad=$((bad + 1))
  fi
done
[[ $bad -eq 0 ]] || fail "$bad of $((3 * downloads)) downloads did not complete byte-exact"
echo "downloads: $((3 * downloads)) of $((3 * downloads)) complete and byte-exact"
wait "$wrk_pid" || true
wait "$h2load_pid" || true
wait "$bench_pid" || true

python3 - "$work" "$downloads" "$size" <<'PY' || fail "responses cut short (above)"
import json, re, sys
work, downloads, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
records = [json.loads(l) for l in open(f"{work}/access.log") if l.strip()]
text = lambda r: json.dumps(r)
def proto(r):
    for p in ("HTTP/1.1", "HTTP/2", "HTTP/3"):
        if f'"{p}"' in text(r):
            return p
    return "?"
errors = []
begun_unfinished = [r for r in records if not r.get("completed") and r.get("status", 0) != 0]
if begun_unfinished:
    errors.append(f"{len(begun_unfinished)} responses begun and not finished, e.g. {begun_unfinished[:3]}")
never_answered = [r for r in records if r.get("status", 0) == 0]
finished = {}
for r in records:
    if r.get("completed") and r.get("status") == 200:
        key = (proto(r), "big" if "big.bin" in text(r) else "small")
        finished[key] = finished.get(key, 0) + 1
for p in ("HTTP/1.1", "HTTP/2", "HTTP/3"):
    if finished.get((p, "big"), 0) != downloads:
        errors.append(f"{p}: the server finished {finished.get((p, 'big'), 0)} downloads, want {downloads}")

wrk = open(f"{work}/wrk.out").read()
m = re.search(r"(\d+) requests in", wrk)
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", wrk)
h1_client = int(m.group(1)) if m else -1
if non2xx:
    errors.append(f"wrk: {non2xx.group(1)} responses other than 2xx/3xx")
h2 = open(f"{work}/h2load.out").read()
m = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", h2)
h2_client = int(m.group(2)) if m else -1
h3 = open(f"{work}/bench.out").read()
m = re.search(r"summary: .*", h3)
summary = dict(kv.split("=", 1) for kv in m.group(0)[len("summary: "):].split()) if m else {}
h3_client = int(summary.get("succeeded", -1))
for key in ("failed_status", "failed_transport", "lost", "connect_failed"):
    if summary.get(key, "0") != "0":
        errors.append(f"petrel-bench: {key}={summary.get(key)} (only refused requests and connections closed after GOAWAY are expected)")
for p, client, tool in (("HTTP/1.1", h1_client, "wrk"), ("HTTP/2", h2_client, "h2load"),
                        ("HTTP/3", h3_client, "petrel-bench")):
    server = finished.get((p, "small"), 0)
    print(f"{p}: server finished {server} small responses, {tool} received {client} whole")
    if client != server:
        errors.append(f"{p}: server finished {server} responses, {tool} counted {client} complete")
print(f"requests the server read and never answered (closed keep-alive, reset streams): {len(never_answered)}")
print("h2load:", re.search(r"requests: .*", h2).group(0) if re.search(r"requests: .*", h2) else "?")
print("petrel-bench:", {k: summary.get(k) for k in ("succeeded", "refused", "goaway", "lost")})
print("wrk:", " ".join(l.strip() for l in wrk.splitlines() if "requests in" in l or "Socket errors" in l))
for e in errors:
    print("ERROR:", e)
sys.exit(1 if errors else 0)
PY
echo "PASS: SIGTERM under load, nothing cut short"
