#!/usr/bin/env bash
# Floods beside a well-behaved client. One petrel-server (h2 over TLS and h3 on one port, h2c on
# another, Retry `auto`); first a quiet run of the polite load, then, one kind at a time, a
# hostile client keeps a flood going (petrel-flood for QUIC and HTTP/3, h2_flood.py for HTTP/2)
# while the same polite load runs beside it: petrel-bench (h3), then h2load (h2 over TLS), two
# connections each, one request at a time, small file.
#
# One line per flood: what the attacker did (units sent, connections, how the server ended
# them), what the server did (CPU seconds, the counters that moved), and what the polite
# clients saw (requests, failures, p99 latency against that of the same load alone just before:
# medians over --repeat rounds).
#
# --check (the ctest): every polite request succeeds during every flood, every connection-ending
# flood was ended by the server with the expected code, and each counted flood moved its
# counter. Latency is printed, never checked: it is a measurement, not a property of a loaded
# CI machine.
#
# Usage: bench/floods/run.sh [--build DIR] [--seconds S] [--rate N] [--repeat N]
#                            [--kinds K1,K2,...] [--workers N] [--check]
#   --build: the build tree (default build/); --seconds: each polite-load window (default 5);
#   --rate: the flood's units a second (default 2000); --repeat: rounds of (quiet window, flood
#   window) per flood, whose median p99s are compared (default 3; 1 with --check);
#   --kinds: a subset (default: all); --workers: the server's --workers (default: its own
#   choice for the machine).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$repo/build"
seconds=5
rate=2000
kinds=""
check=""
repeat=3
workers=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --kinds) kinds="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --check) check=1; repeat=1; shift ;;
    --workers) workers=(--workers "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
bin="$build/src/server/petrel-server"
bench="$build/src/tools/petrel-bench"
flood="$build/bench/floods/petrel-flood"
for f in "$bin" "$bench" "$flood"; do
  [[ -x "$f" ]] || { echo "missing $f (build the tree with benchmarks first)" >&2; exit 2; }
done
for tool in h2load curl python3; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done

# kind, tool, what ends it ("close:CODE" = the server closes the attacker's connection with that
# code; "-" = throttled, the connection stays), counter (a series of petrel_http_peer_limits_total
# or petrel_quic_transport_errors_total that must move; "-" = none).
all_floods=(
  "ping quic - -"
  "path-challenge quic - -"
  "retire quic close:9 transport_errors"
  "new-cid quic close:9 transport_errors"
  "ack-ranges quic close:7 transport_errors"
  "stream-limit quic close:4 transport_errors"
  "initial quic - retries"
  "rapid-reset h3 close:263 rapid_reset,h3"
  "oversize h3 - -"
  "request-frames h3 - -"
  "control-frames h3 - -"
  "unknown-streams h3 - -"
  "qpack-encoder h3 - -"
  "qpack-blocked h3 - -"
  "bad-qpack h3 close:513 protocol_error,h3"
  "h2-rapid-reset h2 close:11 rapid_reset,h2"
  "h2-ping h2 close:11 ping_flood,h2"
  "h2-settings h2 close:11 settings_flood,h2"
  "h2-empty-data h2 close:11 empty_data_flood,h2"
  "h2-continuation h2 close:11 continuation_flood,h2"
)
floods=()
for f in "${all_floods[@]}"; do
  read -r kind _ _ _ <<<"$f"
  if [[ -z "$kinds" || ",$kinds," == *",$kind,"* ]]; then floods+=("$f"); fi
done
[[ ${#floods[@]} -gt 0 ]] || { echo "no flood matches --kinds $kinds" >&2; exit 2; }

work="$(mktemp -d /tmp/petrel-floods-XXXXXX)"
export PETREL_STATE_DIR="$work/state"
# shellcheck source=../../tests/server/server_test_lib.sh
source "$repo/tests/server/server_test_lib.sh"
read -r http https metrics < <(python3 "$repo/tests/support/server_ports.py" 3)
mkdir -p "$work/root"
printf 'small response body\n' >"$work/root/small.txt"
start --listen 127.0.0.1 --http-port "$http" --https-port "$https" --root "$work/root" \
  --metrics-listen "127.0.0.1:$metrics" --retry auto --access-log off "${workers[@]}"
# The server on one core, the clients (polite and hostile) on the other, where there are two.
# Pinned once started, so that it keeps the threads it sized for the machine (a QUIC master and
# worker beside the TCP loop on two cores) unless --workers says otherwise.
clients=()
if [[ "$(nproc)" -ge 2 ]] && command -v taskset >/dev/null; then
  taskset -a -p -c 0 "$server_pid" >/dev/null
  clients=(taskset -c 1)
fi

metric() {  # metric NAME [LABEL-TEXT...]: the sum of NAME's series whose labels hold every text
  curl -s --max-time 5 "http://127.0.0.1:$metrics/metrics" |
    awk -v name="$1" -v l1="${2:-}" -v l2="${3:-}" '
      ($1 == name || index($1, name "{") == 1) && index($1, l1) > 0 && index($1, l2) > 0 {
        sum += $2 }
      END { printf "%d\n", sum }'
}
counter() {  # counter SPEC: transport_errors, retries, or LIMIT,PROTOCOL of petrel_http_peer_limits_total
  case "$1" in
    -) echo 0 ;;
    transport_errors) metric petrel_quic_transport_errors_total ;;
    retries) metric petrel_quic_retries_sent_total ;;
    *) metric petrel_http_peer_limits_total "limit=\"${1%,*}\"" "protocol=\"${1#*,}\"" ;;
  esac
}
server_cpu() {  # the server's user + system CPU, in clock ticks
  awk '{print $14 + $15}' "/proc/$server_pid/stat"
}

polite_load() {  # polite_load LABEL: both polite clients for --seconds
  # For the measurement one after the other: two closed-loop clients sharing a core wait for
  # each other's time slices, which put a ~1.2 ms step into petrel-bench's p99 (121 us alone,
  # 1 204 us beside h2load, same server). The check runs them at once (latency unused there).
  "${clients[@]}" "$bench" -k -c 2 -m 1 -D "$seconds" "https://127.0.0.1:$https/small.txt" \
    >"$work/$1.h3" 2>&1 &
  local bench_pid=$!
  if [[ -z "$check" ]]; then
    timeout $((${seconds%.*} + 60)) tail --pid="$bench_pid" -f /dev/null ||
      fail "$1: the polite load did not end"
  fi
  "${clients[@]}" h2load -c 2 -m 1 -D "$seconds" --log-file="$work/$1.h2log" \
    "https://127.0.0.1:$https/small.txt" >"$work/$1.h2" 2>&1 &
  local h2load_pid=$!
  local pid
  for pid in "$bench_pid" "$h2load_pid"; do
    timeout $((${seconds%.*} + 60)) tail --pid="$pid" -f /dev/null || fail "$1: the polite load did not end"
  done
  wait "$bench_pid" || true
  wait "$h2load_pid" || true
}

# What the polite clients saw: "h3_ok h3_failed h3_p99_us h2_ok h2_failed h2_p99_us".
polite_result() {
  python3 - "$work/$1" <<'EOF'
import re, sys
base = sys.argv[1]
summary = {}
for line in open(base + ".h3"):
    if line.startswith("summary:"):
        summary = dict(kv.split("=", 1) for kv in line.split()[1:])
h3 = (int(summary.get("succeeded", 0)),
      int(summary.get("failed", 1)) + int(summary.get("connect_failed", 0)) +
      int(summary.get("lost", 0)) + int(summary.get("refused", 0)),
      float(summary.get("latency_p99_us", "nan")))
text = open(base + ".h2").read()
m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
              r"(\d+) errored, (\d+) timeout", text)
try:
    times = sorted(int(l.split()[2]) for l in open(base + ".h2log") if len(l.split()) >= 3)
except OSError:
    times = []
p99 = times[min(len(times) - 1, int(len(times) * 0.99))] if times else float("nan")
h2 = (int(m.group(4)) if m else 0, int(m.group(5)) + int(m.group(6)) + int(m.group(7)) if m else 1,
      p99)
print("%d %d %.0f %d %d %.0f" % (h3 + h2))
EOF
}

cpu_before=$(server_cpu)
polite_load quiet
quiet_cpu=$(python3 -c "print('%.2f' % (($(server_cpu) - $cpu_before) / $(getconf CLK_TCK)))")
read -r q_h3_ok q_h3_bad q_h3_p99 q_h2_ok q_h2_bad q_h2_p99 < <(polite_result quiet)
printf 'quiet (%s s): server CPU %s s; h3 %s requests (%s failed), p99 %s us; h2 %s requests (%s failed), p99 %s us\n' \
  "$seconds" "$quiet_cpu" "$q_h3_ok" "$q_h3_bad" "$q_h3_p99" "$q_h2_ok" "$q_h2_bad" "$q_h2_p99"
problems=()
[[ "$q_h3_bad" == 0 && "$q_h2_bad" == 0 && "$q_h3_ok" -gt 0 && "$q_h2_ok" -gt 0 ]] ||
  problems+=("quiet run: polite requests failed")

median() { python3 -c "import statistics, sys; print('%.0f' % statistics.median(map(float, sys.argv[1:])))" "$@"; }
ratio() { python3 -c "import math; a,b=float('$1'),float('$2'); print('nan' if math.isnan(a) or not b else '%.2f' % (a/b))"; }

flood_window() {  # flood_window KIND LAYER LABEL: one flood with the polite load beside it
  local kind="$1" layer="$2" label="$3" flood_seconds
  # The flood outlasts the polite load: one window of --seconds with --check, two without.
  flood_seconds=$(python3 -c "print($seconds * (1 if '$check' else 2) + 1)")
  # For the measurement the attacker runs at SCHED_IDLE on the clients' core: it takes the time
  # the polite client leaves (waiting for its responses) and never preempts it, so that its own
  # cost (an attacker's, not the server's) stays out of the polite latency. Not for the check:
  # on a busy machine an idle-priority attacker might not reach the rates that trip the limits.
  local idle=()
  [[ -z "$check" ]] && command -v chrt >/dev/null && idle=(chrt --idle 0)
  if [[ "$layer" == h2 ]]; then
    "${clients[@]}" "${idle[@]}" python3 "$here/h2_flood.py" "$http" "${kind#h2-}" "$flood_seconds" "$rate" \
      >"$work/$label.flood" 2>&1 &
  else
    "${clients[@]}" "${idle[@]}" "$flood" --kind "$kind" --seconds "$flood_seconds" --rate "$rate" \
      --path /small.txt 127.0.0.1 "$https" >"$work/$label.flood" 2>&1 &
  fi
  local flood_pid=$!
  # The polite load begins once the flood has (the Initial flood makes its packets first).
  for _ in $(seq 1 600); do
    grep -q '^flood started' "$work/$label.flood" && break
    kill -0 "$flood_pid" 2>/dev/null || break
    sleep 0.05
  done
  polite_load "$label"
  timeout 60 tail --pid="$flood_pid" -f /dev/null || fail "$kind: the flood did not end"
  local rc=0
  wait "$flood_pid" || rc=$?
  [[ "$rc" == 0 ]] && grep -q '^flood ' "$work/$label.flood" ||
    problems+=("$kind: the flood client failed: $(tail -2 "$work/$label.flood")")
}

printf '%-15s %-5s %-62s %7s %-26s %-36s %-36s\n' flood layer "attacker (last round)" srv_cpu \
  "counter moved" "h3 polite: ok/failed p99 (x quiet)" "h2 polite: ok/failed p99 (x quiet)"
for f in "${floods[@]}"; do
  read -r kind layer ends counted <<<"$f"
  # Each round: the polite load alone, then beside the flood. The p99s compared are the
  # medians over the rounds: this machine's latency drifts by several times within a minute,
  # so neighbours are compared, more than once. The ctest has one round and the first quiet
  # run only.
  before=$(counter "$counted")
  cpu_total=0
  h3_ok=0 h3_bad=0 h2_ok=0 h2_bad=0
  q3=() q2=() f3=() f2=()
  for round in $(seq 1 "$repeat"); do
    if [[ -z "$check" ]]; then
      polite_load "$kind.quiet$round"
      read -r _ _ a _ _ b < <(polite_result "$kind.quiet$round")
      q3+=("$a") q2+=("$b")
    fi
    cpu_before=$(server_cpu)
    flood_window "$kind" "$layer" "$kind.$round"
    cpu_total=$((cpu_total + $(server_cpu) - cpu_before))
    read -r a1 b1 c1 a2 b2 c2 < <(polite_result "$kind.$round")
    h3_ok=$((h3_ok + a1)) h3_bad=$((h3_bad + b1)) h2_ok=$((h2_ok + a2)) h2_bad=$((h2_bad + b2))
    f3+=("$c1") f2+=("$c2")
  done
  [[ ${#q3[@]} -gt 0 ]] || { q3=("$q_h3_p99"); q2=("$q_h2_p99"); }
  qh3=$(median "${q3[@]}") qh2=$(median "${q2[@]}") fh3=$(median "${f3[@]}") fh2=$(median "${f2[@]}")
  cpu=$(python3 -c "print('%.2f' % ($cpu_total / $(getconf CLK_TCK) / $repeat))")
  after=$(counter "$counted")
  line=$(grep '^flood ' "$work/$kind.$repeat.flood" | tail -1 || true)
  # The attacker in short: units sent, octets sent a second, connections, how many the server
  # ended (and with which codes), its own CPU seconds.
  attacker=$(awk '{ for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] } }
    END { codes = v["close_codes"] v["goaway_codes"]
          printf "%s units, %.1f MB/s, %s conns, %s ended (%s), cpu %ss", v["units"],
                 v["sent_bytes"] / v["seconds"] / 1e6, v["connections"], v["server_closes"], codes,
                 v["cpu_s"] }' <<<"$line")
  printf '%-15s %-5s %-62s %7s %-26s %-36s %-36s\n' "$kind" "$layer" "$attacker" "$cpu" \
    "${counted}+$((after - before))" \
    "$h3_ok/$h3_bad ${fh3}us ($(ratio "$fh3" "$qh3")x of ${qh3})" \
    "$h2_ok/$h2_bad ${fh2}us ($(ratio "$fh2" "$qh2")x of ${qh2})"
  echo "  $kind p99 (us) quiet h3 ${q3[*]} h2 ${q2[*]}; flood h3 ${f3[*]} h2 ${f2[*]}; attacker: $line" >>"$work/details"

  [[ "$h3_bad" == 0 && "$h2_bad" == 0 && "$h3_ok" -gt 0 && "$h2_ok" -gt 0 ]] ||
    problems+=("$kind: polite requests failed (h3 $h3_ok/$h3_bad, h2 $h2_ok/$h2_bad)")
  if [[ "$ends" == close:* ]]; then
    code="${ends#close:}"
    grep -Eq "(close_codes|goaway_codes)=([0-9:,]*,)?$code:[1-9]" <<<"$line" ||
      problems+=("$kind: the server did not end the flood's connections with code $code")
  fi
  [[ "$counted" == - || $((after - before)) -gt 0 ]] || problems+=("$kind: $counted did not move")
done
cat "$work/details"
kill -0 "$server_pid" 2>/dev/null || problems+=("the server died")
stop

if [[ ${#problems[@]} -gt 0 ]]; then
  printf 'problem: %s\n' "${problems[@]}"
  [[ -n "$check" ]] && exit 1
fi
[[ -n "$check" ]] && echo "PASS: every polite request answered during every flood"
exit 0
