#!/usr/bin/env bash
# Side-by-side HTTP/3 benchmark: petrel-server against ngtcp2's example server gtlsserver
# (GnuTLS backend), both serving the same files with the same certificate, loaded by
# petrel-bench.
#
# Scenarios: `small` — a 12-byte file, C connections x M streams for D seconds; `big` — one
# download of a 100 MB file (-c 1 -m 1 -n 1); `many` — 2 000 connections with one request in
# flight each (10 requests per connection), then the server's memory with as many connections
# open and idle, and after its idle timeout has closed them. Each scenario runs gtlsserver, petrel, gtlsserver,
# petrel, ... (a fresh server per run, one alive at a time). The server is pinned to CPU 0 and
# petrel-bench to CPU 1, all on 127.0.0.1. Server CPU time is utime + stime from /proc/PID/stat
# (all threads) around the measured petrel-bench process. See bench/h3/README.md.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/h3/vs_gtlsserver.sh [options] [BUILD_DIR]

  BUILD_DIR         a Petrel build with petrel-server and petrel-bench built (default:
                    $PETREL_BUILD_DIR, else build-pbench); this script builds nothing:
                    cmake --build BUILD_DIR --target petrel-server petrel-bench
  --rounds N        runs per scenario and server, alternating gtlsserver/petrel (default 3)
  --duration S      seconds per measured `small` run (default 10)
  --warmup S        unmeasured `small` load before each measured run, on separate
                    connections (default 1; 0 = none)
  --connections C   `small`: connections (default 50)
  --streams M       `small`: requests in flight per connection (default 10)
  --big-mb N        `big`: size of the file in MB of 10^6 bytes (default 100)
  --many N          `many`: connections (default 2000)
  --workers N       petrel-server --workers (default 0: one thread reads and serves; 1: a
                    reading thread and one worker, both on CPU 0)
  --scenarios LIST  comma-separated subset of small,big,many (default small,big)
  --loss P          `big`: the download goes through petrel-netsim dropping P percent of the
                    datagrams in each direction at random (seed = round number; default 0 =
                    direct); each run also prints the datagrams and bytes the relay forwarded
                    to the client and the drops, so retransmission shows as bytes beyond the
                    file's
  --gtlsserver BIN  (default /usr/sbin/gtlsserver, Debian package ngtcp2-server)
  --nice N          nice value of server and client (default -20 as root, else 0)
  --log-dir DIR     keep the petrel-bench outputs and server logs in DIR
  --help            this text

Needs: gtlsserver, openssl (CLI, for the certificate), python3 (free ports), taskset, 2 CPUs.
Exit status: 0 when every run completed without a failure, 1 when some run failed (after the
table), 2 for a usage or setup problem.
EOF
}

die() { echo "vs_gtlsserver: $*" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=${PETREL_BUILD_DIR:-$repo/build-pbench}
rounds=3
duration=10
warmup=1
conns=50
streams=10
big_mb=100
many=2000
workers=0
# `many`: the idle timeout both servers get, so that the memory can be seen going back.
many_idle_s=5
scenarios=small,big
loss=0
gtls_bin=/usr/sbin/gtlsserver
log_dir=
if [[ $(id -u) -eq 0 ]]; then nice_value=-20; else nice_value=0; fi

while (($#)); do
  case $1 in
    --rounds) rounds=${2:?}; shift 2 ;;
    --duration) duration=${2:?}; shift 2 ;;
    --warmup) warmup=${2:?}; shift 2 ;;
    --connections) conns=${2:?}; shift 2 ;;
    --streams) streams=${2:?}; shift 2 ;;
    --big-mb) big_mb=${2:?}; shift 2 ;;
    --many) many=${2:?}; shift 2 ;;
    --workers) workers=${2:?}; shift 2 ;;
    --scenarios) scenarios=${2:?}; shift 2 ;;
    --loss) loss=${2:?}; shift 2 ;;
    --gtlsserver) gtls_bin=${2:?}; shift 2 ;;
    --nice) nice_value=${2:?}; shift 2 ;;
    --log-dir) log_dir=${2:?}; shift 2 ;;
    --help | -h) usage; exit 0 ;;
    -*) usage >&2; die "unknown option: $1" ;;
    *) build_dir=$1; shift ;;
  esac
done
for n in "$rounds" "$duration" "$warmup" "$conns" "$streams" "$big_mb" "$many" "$workers"; do
  [[ $n =~ ^[0-9]+$ ]] || die "not a non-negative integer: $n"
done
((rounds > 0 && duration > 0 && conns > 0 && streams > 0 && big_mb > 0 && many > 0)) ||
  die "rounds, duration, connections, streams, big-mb and many must be > 0"
[[ $loss =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v p="$loss" 'BEGIN { exit !(p < 100) }' ||
  die "--loss wants a percentage below 100: $loss"
IFS=, read -r -a scenario_list <<<"$scenarios"
for s in "${scenario_list[@]}"; do
  [[ $s == small || $s == big || $s == many ]] || die "unknown scenario: $s (want small, big, many)"
done

petrel_bin=$build_dir/src/server/petrel-server
bench_bin=$build_dir/src/tools/petrel-bench
[[ -x $petrel_bin ]] || die "petrel-server not found at $petrel_bin (see --help)"
[[ -x $bench_bin ]] || die "petrel-bench not found at $bench_bin (see --help)"
[[ -x $gtls_bin ]] || die "gtlsserver not found at $gtls_bin (apt-get install ngtcp2-server)"
netsim_bin=$build_dir/interop/sim/petrel-netsim
if [[ $loss != 0 ]]; then
  [[ -x $netsim_bin ]] || die "petrel-netsim not found at $netsim_bin (cmake --build BUILD_DIR --target petrel-netsim)"
fi
for tool in openssl python3 taskset; do
  command -v "$tool" >/dev/null || die "$tool not found"
done
[[ $nice_value =~ ^-?[0-9]+$ ]] || die "not an integer: $nice_value"
nice -n "$nice_value" true 2>/dev/null || die "cannot run at nice $nice_value (use --nice 0)"
prio=(nice -n "$nice_value")
taskset -c 0,1 true 2>/dev/null || die "CPUs 0 and 1 are not both available to this process"
tick=$(getconf CLK_TCK)
big_bytes=$((big_mb * 1000000))

# --- Temp dir and cleanup ------------------------------------------------------------------
work=$(mktemp -d /tmp/petrel-vs-gtls.XXXXXX)
server_pid=
netsim_pid=
idle_client_pid=
cleanup() {
  if [[ -n $netsim_pid ]]; then kill -KILL "$netsim_pid" 2>/dev/null || true; fi
  if [[ -n $idle_client_pid ]]; then kill -KILL "$idle_client_pid" 2>/dev/null || true; fi
  if [[ -n $server_pid ]]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  if [[ -n $log_dir ]]; then
    mkdir -p "$log_dir"
    cp -r "$work/logs/." "$log_dir/" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work/www" "$work/logs"
printf 'hello-petrel' >"$work/www/12b"
head -c "$big_bytes" /dev/urandom >"$work/www/big"
[[ $(wc -c <"$work/www/12b") -eq 12 && $(wc -c <"$work/www/big") -eq $big_bytes ]] ||
  die "test files have the wrong size"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$work/key.pem" -out "$work/cert.pem" >/dev/null 2>&1 || die "openssl failed"

# A port free for both UDP and TCP (petrel-server's --https-port binds both).
free_port() {
  python3 -c '
import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
t = socket.socket(); t.bind(("127.0.0.1", u.getsockname()[1]))
print(u.getsockname()[1])'
}

# --- Servers -------------------------------------------------------------------------------
port=

start_server() { # server tag [idle_timeout_s]
  local log=$work/logs/$2.server.log idle=${3:-}
  port=$(free_port) || die "no free port"
  if [[ $1 == gtls ]]; then
    "${prio[@]}" taskset -c 0 "$gtls_bin" -q ${idle:+--timeout=${idle}s} -d "$work/www" \
      127.0.0.1 "$port" "$work/key.pem" "$work/cert.pem" >"$log" 2>&1 &
  else
    "${prio[@]}" taskset -c 0 "$petrel_bin" --listen 127.0.0.1 --https-port "$port" \
      --http-port 0 --workers "$workers" --grace 1 ${idle:+--idle-timeout "$idle"} \
      --root "$work/www" --cert "$work/cert.pem" --key "$work/key.pem" >"$log" 2>&1 &
  fi
  server_pid=$!
  # Ready when one request over HTTP/3 succeeds (bounded: 100 tries).
  local ok=0
  for _ in $(seq 1 100); do
    if timeout 5 taskset -c 1 "$bench_bin" -k -n 1 -c 1 -m 1 "https://127.0.0.1:$port/12b" \
      >"$work/logs/$2.probe.log" 2>&1; then
      ok=1
      break
    fi
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; die "$1 exited at startup"; }
    sleep 0.1
  done
  ((ok)) || { cat "$log" "$work/logs/$2.probe.log" >&2; die "$1 did not answer on port $port"; }
}

stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

# utime + stime of the server process (all its threads), in ticks.
server_ticks() {
  awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$server_pid/stat" ||
    die "server process $server_pid vanished during the run"
}

# The server's resident memory in KiB.
server_rss_kib() {
  awk '/^VmRSS:/ { print $2 }' "/proc/$server_pid/status" ||
    die "server process $server_pid vanished during the run"
}

# `many`, second part: opens $many connections that keep one request in flight, waits until
# the server's memory stops growing (2 s without growth, at most 60 s), kills the client so
# that every connection is left open and idle, and prints the server's RSS in KiB then
# ("idle"), and once its idle timeout has closed them ("after").
idle_memory() { # tag url
  local out=$work/logs/$1.idle.out
  "${prio[@]}" taskset -c 1 "$bench_bin" -k -t 1 -c "$many" -m 1 -D 600 "$2/12b" >"$out" 2>&1 &
  idle_client_pid=$!
  local client=$idle_client_pid last=0 still=0 rss
  for _ in $(seq 1 300); do
    sleep 0.2
    rss=$(server_rss_kib)
    if ((rss > last)); then last=$rss; still=0; else still=$((still + 1)); fi
    ((still >= 10)) && break
  done
  kill -KILL "$client" 2>/dev/null || true
  wait "$client" 2>/dev/null || true
  idle_client_pid=
  sleep 0.5
  local idle_rss
  idle_rss=$(server_rss_kib)
  sleep $((many_idle_s + 3))
  echo "$idle_rss $(server_rss_kib)"
}

# Busy and steal ticks of CPUs 0 and 1 together: "busy steal".
machine_ticks() {
  awk '/^cpu[01] / { busy += $2 + $3 + $4 + $7 + $8; steal += $9 } END { print busy, steal }' /proc/stat
}

# Runs petrel-bench on CPU 1 with the given arguments into OUT; prints the summary's fields
# (requests succeeded failed elapsed_s req_per_s body_bytes p99_us ok) and the client's CPU
# seconds, from `times` of the subshell.
load() { # out timeout_s args...
  local out=$1 limit=$2
  shift 2
  (timeout "$limit" "${prio[@]}" taskset -c 1 "$bench_bin" "$@" >"$out" 2>&1; rc=$?
   times >"$out.times"; exit $rc) || true
  awk '/^summary:/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
         printf "%d %d %d %s %s %s %s %d", v["requests"], v["succeeded"], v["failed"] + v["connect_failed"] + v["lost"] + v["failed_warm_up"],
                v["elapsed_s"], v["req_per_s"], v["body_bytes"], v["latency_p99_us"], v["ok"]
         found = 1 }
       END { if (!found) printf "0 0 1 0 0 0 0 0" }' "$out"
  awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); n += a[1] * 60 + a[2] }
                 printf " %.2f\n", n }' "$out.times"
}

# --- Runs ----------------------------------------------------------------------------------
results=$work/results.tsv
: >"$results"
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo |
  cut -d: -f2 | sed 's/^ //')), kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $("$petrel_bin" --version | head -1); gtlsserver from $(dpkg-query -W -f '${Package} ${Version}' ngtcp2-server 2>/dev/null || echo "$gtls_bin")"
echo "# small: 12 B file, -c${conns} -m${streams} -D${duration} after ${warmup}s warm-up; big: one ${big_mb} MB download (-c1 -m1 -n1)$([[ $loss != 0 ]] && echo ", through petrel-netsim with ${loss}% loss each way"); many: -c${many} -m1 -n$((many * 10)), idle timeout ${many_idle_s} s"
echo "# petrel-server --workers ${workers}"
echo "# ${rounds} rounds, nice ${nice_value}; server on CPU 0, petrel-bench on CPU 1; fresh server per run"
printf '%-5s %-6s %5s %9s %9s %8s %5s %9s %13s %12s %9s %11s %7s\n' scen server round "req/s" \
  "MB/s" "p99_ms" fail "srv_cpu_s" "req/srv_cpu_s" "srv_cpu_s/GB" "cli_cpu_s" "other_cpu_s" \
  "steal_s"

any_fail=0
for sc in "${scenario_list[@]}"; do
  for round in $(seq 1 "$rounds"); do
    for srv in gtls petrel; do
      tag=$sc.$srv.$round
      if [[ $sc == many ]]; then start_server "$srv" "$tag" "$many_idle_s"; else start_server "$srv" "$tag"; fi
      url=https://127.0.0.1:$port
      rss_start=$(server_rss_kib)
      if [[ $sc == small ]]; then
        if ((warmup > 0)); then
          load "$work/logs/$tag.warmup.out" $((warmup + 30)) -k -c "$conns" -m "$streams" \
            -D "$warmup" "$url/12b" >/dev/null
        fi
        args=(-k -t 1 -c "$conns" -m "$streams" -D "$duration" "$url/12b")
        limit=$((duration + 30))
      elif [[ $sc == many ]]; then
        args=(-k -t 1 -c "$many" -m 1 -n $((many * 10)) "$url/12b")
        limit=300
      else
        if [[ $loss != 0 ]]; then
          # The relay runs beside the client on CPU 1; its stats file is written when it exits.
          rm -f "$work/netsim.port" "$work/logs/$tag.netsim.json"
          "${prio[@]}" taskset -c 1 "$netsim_bin" --listen 127.0.0.1:0 --server "127.0.0.1:$port" \
            --loss-to-client "$loss" --loss-to-server "$loss" --seed "$round" \
            --ready-file "$work/netsim.port" --stats-file "$work/logs/$tag.netsim.json" \
            --max-seconds 600 >"$work/logs/$tag.netsim.log" 2>&1 &
          netsim_pid=$!
          for _ in $(seq 1 100); do [[ -s $work/netsim.port ]] && break; sleep 0.05; done
          [[ -s $work/netsim.port ]] || die "petrel-netsim did not start (see $tag.netsim.log)"
          url=https://127.0.0.1:$(<"$work/netsim.port")
        fi
        args=(-k -c 1 -m 1 -n 1 "$url/big")
        limit=600
      fi
      read -r m0 st0 < <(machine_ticks)
      t0=$(server_ticks)
      read -r reqs ok_reqs fail elapsed rps body p99_us bench_ok cli_cpu < <(load "$work/logs/$tag.out" "$limit" "${args[@]}")
      t1=$(server_ticks)
      read -r m1 st1 < <(machine_ticks)
      if [[ $sc == many ]]; then
        # In this shell (not a substitution's subshell), so that an interrupted run's cleanup
        # knows the idle client.
        idle_memory "$tag" "$url" >"$work/idle.txt"
        read -r rss_idle rss_after <"$work/idle.txt"
        awk -v t="$tag" -v n="$many" -v a="$rss_start" -v b="$rss_idle" -v c="$rss_after" 'BEGIN {
          printf "# %s memory: %.1f MB at start, %.1f MB with %d connections open and idle " \
                 "(%.0f KiB each), %.1f MB after the idle timeout\n", t, a / 1024, b / 1024, n,
                 (b - a) / n, c / 1024 }'
      fi
      stop_server
      if [[ -n $netsim_pid ]]; then
        kill -TERM "$netsim_pid" 2>/dev/null || true
        wait "$netsim_pid" 2>/dev/null || true
        netsim_pid=
        python3 - "$work/logs/$tag.netsim.json" "$big_bytes" "$tag" <<'PY' || true
import json, sys
s = json.load(open(sys.argv[1])); size = int(sys.argv[2])
c, v = s["to_client"], s["to_server"]
print("# %s through petrel-netsim: to the client %d datagrams forwarded, %d dropped, %.1f MB "
      "forwarded (%.3fx the file); to the server %d forwarded, %d dropped"
      % (sys.argv[3], c["forwarded"], c["dropped_loss"], c["bytes"] / 1e6, c["bytes"] / size,
         v["forwarded"], v["dropped_loss"]))
PY
      fi
      if [[ $sc == big && $body -ne $big_bytes ]]; then fail=$((fail + 1)); fi
      if [[ $bench_ok -ne 1 ]]; then fail=$((fail > 0 ? fail : 1)); fi
      ((fail == 0)) || any_fail=1
      srv_cpu=$(awk -v a="$t0" -v b="$t1" -v t="$tick" 'BEGIN { printf "%.2f", (b - a) / t }')
      other=$(awk -v a="$m0" -v b="$m1" -v t="$tick" -v s="$srv_cpu" -v c="$cli_cpu" \
        'BEGIN { printf "%.2f", (b - a) / t - s - c }')
      steal=$(awk -v a="$st0" -v b="$st1" -v t="$tick" 'BEGIN { printf "%.2f", (b - a) / t }')
      # Derived figures: requests per server CPU-second for `small`, server CPU-seconds per GB
      # of body for `big` ("-" for the other; "inf" when the server used less than one tick).
      read -r mbs per_cpu cpu_gb < <(awk -v sc="$sc" -v r="$ok_reqs" -v c="$srv_cpu" -v b="$body" \
        -v e="$elapsed" 'BEGIN {
        mbs = e > 0 ? b / e / 1e6 : 0
        per = sc == "big" ? "-" : c > 0 ? sprintf("%.0f", r / c) : "inf"
        gb = sc != "big" ? "-" : b > 0 ? sprintf("%.2f", c / (b / 1e9)) : "inf"
        printf "%.1f %s %s\n", mbs, per, gb }')
      p99=$(awk -v u="$p99_us" 'BEGIN { printf "%.2f", u / 1000 }')
      printf '%-5s %-6s %5s %9.0f %9.1f %8s %5s %9s %13s %12s %9s %11s %7s\n' "$sc" "$srv" \
        "$round" "$rps" "$mbs" "$p99" "$fail" "$srv_cpu" "$per_cpu" "$cpu_gb" "$cli_cpu" "$other" \
        "$steal"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$sc" "$srv" "$round" "$rps" "$mbs" \
        "$p99" "$fail" "$srv_cpu" "$per_cpu" "$cpu_gb" "$other" >>"$results"
    done
  done
done

# --- Medians and ratios --------------------------------------------------------------------
echo
echo "# medians per scenario and server; ratio = petrel / gtlsserver (> 1 is better for petrel"
echo "# in req/s, MB/s and req/srv_cpu_s; < 1 is better for petrel in p99 and srv_cpu_s/GB)"
printf '%-5s %-6s %9s %9s %8s %9s %13s %12s %11s\n' scen server "req/s" "MB/s" "p99_ms" \
  "srv_cpu_s" "req/srv_cpu_s" "srv_cpu_s/GB" "other_cpu_s"
# Median of the numbers on stdin; "-" when there are none.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
  if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for sc in "${scenario_list[@]}"; do
  declare -A med=()
  for srv in gtls petrel; do
    for col in 4:rps 5:mbs 6:p99 8:cpu 9:per 10:gb 11:oth; do
      med[$srv.${col#*:}]=$(awk -F'\t' -v s="$sc" -v v="$srv" -v c="${col%%:*}" \
        '$1 == s && $2 == v && $c != "inf" && $c != "-" { print $c }' "$results" | median)
    done
    awk -v sc="$sc" -v srv="$srv" -v rps="${med[$srv.rps]}" -v mbs="${med[$srv.mbs]}" \
      -v p99="${med[$srv.p99]}" -v cpu="${med[$srv.cpu]}" -v per="${med[$srv.per]}" \
      -v gb="${med[$srv.gb]}" -v oth="${med[$srv.oth]}" '
      function f(x, fmt) { return x == "-" ? "-" : sprintf(fmt, x) }
      BEGIN { printf "%-5s %-6s %9s %9s %8s %9s %13s %12s %11s\n", sc, srv, f(rps, "%.0f"),
              f(mbs, "%.1f"), f(p99, "%.2f"), f(cpu, "%.2f"), f(per, "%.0f"), f(gb, "%.2f"),
              f(oth, "%.2f") }'
  done
  awk -v sc="$sc" -v r1="${med[gtls.rps]}" -v r2="${med[petrel.rps]}" -v m1="${med[gtls.mbs]}" \
    -v m2="${med[petrel.mbs]}" -v l1="${med[gtls.p99]}" -v l2="${med[petrel.p99]}" \
    -v c1="${med[gtls.per]}" -v c2="${med[petrel.per]}" -v g1="${med[gtls.gb]}" \
    -v g2="${med[petrel.gb]}" '
    function ratio(a, b) { return (a == "-" || b == "-" || a <= 0) ? "-" : sprintf("%.2fx", b / a) }
    BEGIN { printf "%-5s %-6s %9s %9s %8s %9s %13s %12s\n", sc, "ratio", ratio(r1, r2),
            ratio(m1, m2), ratio(l1, l2), "", ratio(c1, c2), ratio(g1, g2) }'
  unset med
done

if ((any_fail)); then
  echo
  echo "vs_gtlsserver: FAILED: some run had failed requests or connections (see the fail column" \
    "and the petrel-bench outputs; --log-dir keeps them)" >&2
  exit 1
fi
