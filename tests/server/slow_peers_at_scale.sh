#!/usr/bin/env bash
# Slow and stuck peers at scale beside a normal load. petrel-server holds, all at once,
# 1 000 slowloris HTTP/1.1 connections (a request head one line every few seconds, never finished),
# 1 000 idle HTTP/2 connections over TLS (preface and SETTINGS, then no stream; python3-h2) and
# 500 QUIC connections whose client stops dead in the middle of a download (petrel-bench, then
# SIGSTOP: no more acknowledgements, no more packets), while wrk (h1), h2load (h2) and
# petrel-bench (h3) run a normal load.
# What must hold:
# - the normal load has zero failures, before the stuck peers and beside them;
# - every stuck peer is reaped by its timeout: each slowloris connection gets 408 and is closed
#   (counted as `header_timeout`), each idle h2 connection gets GOAWAY(NO_ERROR) and is closed,
#   each silent QUIC connection is dropped (open QUIC connections fall to 0 while its client is
#   still stopped); afterwards the server holds no connection;
# - the server's memory stays bounded (peak RSS under --max-rss-mb) and it stops with exit 0.
# The normal load's p99 beside the stuck peers is printed against its p99 without them (taken in
# the same run); --check-p99 also requires it within 2× (for a quiet machine, not for CI).
# Usage: slow_peers_at_scale.sh PETREL-SERVER PETREL-BENCH [--h1 N] [--h2 N] [--quic N]
#        [--timeout S] [--load-seconds S] [--trickle S] [--max-rss-mb MB] [--check-p99]
#   --timeout: the server's header, idle, send and body timeouts (default 30 s: longer than
#   setting up the stuck peers takes on a loaded machine, so that all are open when the load
#   begins); --trickle:
#   seconds between a slowloris connection's header lines (default 5).
set -euo pipefail
# Private loopback: thousands of connections, and the ports are this test's alone.
# shellcheck source=private_netns.sh
source "$(dirname "$0")/private_netns.sh" "$0" "$@"
bin="$1"
bench="$2"
shift 2
n_h1=1000
n_h2=1000
n_quic=500
timeout_s=30
trickle=5
load_s=5
max_rss_mb=1024
check_p99=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --h1) n_h1="$2"; shift 2 ;;
    --h2) n_h2="$2"; shift 2 ;;
    --quic) n_quic="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --load-seconds) load_s="$2"; shift 2 ;;
    --trickle) trickle="$2"; shift 2 ;;
    --max-rss-mb) max_rss_mb="$2"; shift 2 ;;
    --check-p99) check_p99=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
for tool in wrk h2load curl; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
/usr/bin/python3 -c 'import h2' 2>/dev/null || { echo "SKIP: python3-h2 is not installed"; exit 77; }
# Descriptors: the server holds every stuck connection, the script's client as many.
want_fds=$((n_h1 + n_h2 + n_quic + 1000))
if [[ "$(ulimit -Hn)" != unlimited && "$(ulimit -Hn)" -lt "$want_fds" ]]; then
  echo "SKIP: the descriptor limit ($(ulimit -Hn)) is below the $want_fds this test needs"
  exit 77
fi
ulimit -n "$want_fds"

work="$(mktemp -d /tmp/petrel-slow-peers-XXXXXX)"
export PETREL_STATE_DIR="$work/state"
# shellcheck source=server_test_lib.sh
source "$(dirname "$0")/server_test_lib.sh"
read -r http https metrics < <(python3 "$(dirname "$0")/../support/server_ports.py" 3)
mkdir -p "$work/root"
printf 'small response body\n' >"$work/root/small.txt"
head -c 50000000 /dev/urandom >"$work/root/big.bin"
start --listen 127.0.0.1 --http-port "$http" --https-port "$https" --root "$work/root" \
  --header-timeout "$timeout_s" --idle-timeout "$timeout_s" --send-timeout "$timeout_s" \
  --body-timeout "$timeout_s" --metrics-listen "127.0.0.1:$metrics"
# The server on one core and every client on the other (where there are two), so that the
# clients' own scheduling does not decide the latency the server is measured by.
clients=()
if [[ "$(nproc)" -ge 2 ]] && command -v taskset >/dev/null; then
  taskset -a -p -c 0 "$server_pid" >/dev/null
  clients=(taskset -c 1)
fi

metric() {  # metric NAME [LABEL-TEXT]: the sum of NAME's series (whose labels contain the text)
  curl -s --max-time 5 "http://127.0.0.1:$metrics/metrics" |
    awk -v name="$1" -v labels="${2:-}" '
      $1 == name || (index($1, name "{") == 1 && index($1, labels) > 0) { sum += $2 }
      END { printf "%d\n", sum }'
}
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds (bounded)
  local limit=$((SECONDS + $1)) what="$2"
  shift 2
  until "$@"; do
    [[ $SECONDS -lt $limit ]] || fail "$what: not within $limit s"
    sleep 0.1
  done
}

# The normal load: small requests on every protocol for --load-seconds.
normal_load() {  # normal_load LABEL
  "${clients[@]}" wrk -t 1 -c 8 -d "${load_s}s" --latency "http://127.0.0.1:$http/small.txt" >"$work/$1.wrk" 2>&1 &
  local wrk_pid=$!
  "${clients[@]}" h2load -c 4 -m 4 -D "$load_s" --log-file="$work/$1.h2log" "https://127.0.0.1:$https/small.txt" \
    >"$work/$1.h2load" 2>&1 &
  local h2load_pid=$!
  "${clients[@]}" "$bench" -k -c 4 -m 4 -D "$load_s" "https://127.0.0.1:$https/small.txt" >"$work/$1.bench" 2>&1 &
  local bench_pid=$!
  local pid
  for pid in "$wrk_pid" "$h2load_pid" "$bench_pid"; do
    timeout $((load_s + 60)) tail --pid="$pid" -f /dev/null || fail "$1 load did not end"
  done
  wait "$wrk_pid" || true
  wait "$h2load_pid" || true
  wait "$bench_pid" || true
}
normal_load unloaded

# The server's RSS, sampled until the stuck peers are gone.
rss_log="$work/rss"
(while kill -0 "$server_pid" 2>/dev/null; do
   awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status" 2>/dev/null || true
   sleep 0.2
 done) >"$rss_log" &
rss_pid=$!

# The stuck peers. The silent QUIC connections first, since opening 500 of them can take long
# on a loaded machine: their client downloads until it is stopped, and their idle timeout runs
# from then ...
quic_before=$(metric petrel_quic_connections_accepted_total)
"${clients[@]}" "$bench" -k -c "$n_quic" -m 1 -n "$n_quic" "https://127.0.0.1:$https/big.bin" \
  >"$work/stuck-bench.out" 2>&1 &
stuck_bench_pid=$!
# Accepted, not open at once: on a loaded machine the first handshakes a client gave up on may
# be dropped before the last connections arrive.
quic_accepted() {
  [[ "$(metric petrel_quic_connections_accepted_total)" -ge $((quic_before + n_quic)) ]]
}
quic_began=$SECONDS
wait_for 240 "$n_quic QUIC connections accepted" quic_accepted
sent_then=$(metric petrel_quic_worker_bytes_sent_total)
# ... stopped once their downloads are under way (64 KiB each on average) ...
downloading() {
  [[ "$(metric petrel_quic_worker_bytes_sent_total)" -ge $((sent_then + n_quic * 65536)) ]]
}
wait_for 120 "the QUIC downloads under way" downloading
kill -STOP "$stuck_bench_pid"
# On a loaded machine some of the 500 handshakes may not have finished (petrel-bench gives up
# after 10 s; the server, pinned to one core, is busy sending the others their files): the
# handshake timeout drops those, and half of them at least must be left. The others are the
# silent connections.
handshakes_over() {
  [[ "$(metric petrel_connections 'state="handshake",transport="quic"')" -eq 0 ]]
}
wait_for 60 "the pending QUIC handshakes dropped" handshakes_over
n_silent=$(metric petrel_quic_connections_open)
echo "QUIC: $n_silent of $n_quic connections downloading after $((SECONDS - quic_began)) s;" \
  "their client stopped"
[[ $n_silent -ge $((n_quic / 2)) ]] || fail "only $n_silent of $n_quic QUIC handshakes completed"
tcp_began=$SECONDS
# ... then the TCP ones, quick to connect (their timeouts run from their accept).
"${clients[@]}" /usr/bin/python3 "$(dirname "$0")/../support/stuck_peers.py" --h1-port "$http" --h2-port "$https" \
  --h1-count "$n_h1" --h2-count "$n_h2" --trickle "$trickle" --deadline $((timeout_s * 3 + 60)) \
  --ready "$work/stuck.ready" --report "$work/stuck.json" >"$work/stuck.out" 2>&1 &
stuck_pid=$!
wait_for 90 "the stuck TCP peers connected" test -s "$work/stuck.ready"
echo "TCP: $(cat "$work/stuck.ready") after $((SECONDS - tcp_began)) s"

open_tcp=$(metric petrel_tcp_connections_open)
open_quic=$(metric petrel_quic_connections_open)
echo "server: $open_tcp TCP and $open_quic QUIC connections open as the load begins"

load_began=$SECONDS
normal_load loaded
echo "load beside the stuck peers: $((SECONDS - load_began)) s; still open at its end:" \
  "$(metric petrel_tcp_connections_open) TCP, $(metric petrel_quic_connections_open) QUIC"

# Every stuck peer reaped: the QUIC connections while their client is still stopped.
nothing_open() {
  [[ "$(metric petrel_tcp_connections_open)" -eq 0 && "$(metric petrel_quic_connections_open)" -eq 0 ]]
}
wait_for $((timeout_s * 3 + 30)) "every stuck connection reaped" nothing_open
kill -9 "$stuck_bench_pid" 2>/dev/null || true
timeout 60 tail --pid="$stuck_pid" -f /dev/null || fail "stuck_peers.py did not end"
wait "$stuck_pid" || fail "stuck_peers.py failed: $(tail -5 "$work/stuck.out")"
kill "$rss_pid" 2>/dev/null || true
wait "$rss_pid" 2>/dev/null || true
awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status" >>"$rss_log"  # once everything is reaped
timeouts_h1=$(metric petrel_http_peer_limits_total 'limit="header_timeout"')
stop

python3 - "$work" "$n_h1" "$n_h2" "$max_rss_mb" "$timeouts_h1" "$check_p99" "$open_tcp" \
  "$open_quic" "$n_silent" <<'PY' || fail "see above"
import json, re, sys
work, n_h1, n_h2, max_rss_mb, timeouts_h1, check_p99, open_tcp, open_quic, n_quic = (
    sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
    sys.argv[6] == "1", int(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9]))
errors = []

def us(text):  # wrk's "1.23ms" / "950.00us" / "1.01s"
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6, "m": 60e6}[m.group(2)]

def load(label):
    out = {}
    wrk = open(f"{work}/{label}.wrk").read()
    m = re.search(r"(\d+) requests in", wrk)
    p99 = re.search(r"^\s*99%\s+(\S+)", wrk, re.M)
    bad = 0
    s = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", wrk)
    if s:
        bad += sum(int(x) for x in s.groups())
    n = re.search(r"Non-2xx or 3xx responses: (\d+)", wrk)
    if n:
        bad += int(n.group(1))
    out["h1"] = (int(m.group(1)) if m else 0, bad, us(p99.group(1)) if p99 else None)
    h2 = open(f"{work}/{label}.h2load").read()
    m = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", h2)
    times = sorted(int(l.split("\t")[2]) for l in open(f"{work}/{label}.h2log") if l.count("\t") >= 2)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))] if times else None
    out["h2"] = (int(m.group(2)) if m else 0,
                 sum(int(x) for x in m.groups()[2:]) if m else -1, p99)
    h3 = open(f"{work}/{label}.bench").read()
    m = re.search(r"summary: .*", h3)
    summary = dict(kv.split("=", 1) for kv in m.group(0)[len("summary: "):].split()) if m else {}
    bad = sum(int(summary.get(k, "0")) for k in
              ("failed", "failed_warm_up", "refused", "goaway", "lost", "connect_failed")) if summary else -1
    out["h3"] = (int(summary.get("succeeded", 0)), bad,
                 float(summary["latency_p99_us"]) if "latency_p99_us" in summary else None)
    return out

unloaded, loaded = load("unloaded"), load("loaded")
print("normal load   requests (failures)  p99 without / beside the stuck peers")
for p, tool in (("h1", "wrk"), ("h2", "h2load"), ("h3", "petrel-bench")):
    (n0, bad0, p0), (n1, bad1, p1) = unloaded[p], loaded[p]
    ratio = f"{p1 / p0:.2f}×" if p0 and p1 else "?"
    print(f"  {p} {tool:12} {n0} ({bad0}) / {n1} ({bad1})   {p0 or 0:.0f} µs / {p1 or 0:.0f} µs = {ratio}")
    for label, n, bad in (("without", n0, bad0), ("beside", n1, bad1)):
        if bad != 0 or n == 0:
            errors.append(f"{p} load {label} the stuck peers: {n} succeeded, {bad} failures")
    if check_p99 and p0 and p1 and p1 > 2 * p0:
        errors.append(f"{p}: p99 {p1:.0f} µs beside the stuck peers, over 2× {p0:.0f} µs")

stuck = json.load(open(f"{work}/stuck.json"))
print("stuck h1:", stuck["h1"])
print("stuck h2:", stuck["h2"])
h1, h2 = stuck["h1"], stuck["h2"]
want_h1 = {"HTTP/1.1 408 Request Timeout": n_h1} if n_h1 else {}
if h1["opened"] != n_h1 or h1["endings"] != want_h1:
    errors.append(f"slowloris: {h1['opened']} of {n_h1} opened, endings {h1['endings']} (want 408 for each)")
want_h2 = {"GOAWAY 0": n_h2} if n_h2 else {}
if h2["opened"] != n_h2 or h2["endings"] != want_h2:
    errors.append(f"idle h2: {h2['opened']} of {n_h2} opened, endings {h2['endings']} (want GOAWAY 0 for each)")
if timeouts_h1 < n_h1:
    errors.append(f"header_timeout counted {timeouts_h1} times, want >= {n_h1}")
# Every stuck peer still open as the load began (n_quic here: the QUIC connections that got
# past their handshake).
if open_tcp < n_h1 + n_h2 or open_quic < n_quic:
    errors.append(f"only {open_tcp} TCP / {open_quic} QUIC connections were open as the load began")
rss = [int(l) for l in open(f"{work}/rss") if l.strip().isdigit()]
print(f"server RSS: {rss[0] / 1024:.0f} MB at the start, peak {max(rss) / 1024:.0f} MB, "
      f"{rss[-1] / 1024:.0f} MB once the stuck peers were reaped")
if max(rss) > max_rss_mb * 1024:
    errors.append(f"peak RSS {max(rss) / 1024:.0f} MB over {max_rss_mb} MB")
for e in errors:
    print("ERROR:", e)
sys.exit(1 if errors else 0)
PY
echo "PASS: $n_h1 slowloris h1, $n_h2 idle h2, $n_quic silent QUIC connections reaped beside a load with no failure"
