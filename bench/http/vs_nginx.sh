#!/usr/bin/env bash
# Side-by-side HTTP/1.1, HTTP/2 over TLS and h2c benchmark: petrel-server against nginx, both
# serving the same 12-byte file from the same document root with the same certificate.
#
# Each scenario runs nginx, petrel, nginx, petrel, ... (one server alive at a time, started fresh
# for each run). The server (all its processes/threads) is pinned to CPU 0 and the load generator
# to CPU 1; everything talks over 127.0.0.1. Server CPU time is user + system from
# /proc/<pid>/stat around the measured run (nginx: master + workers), so the script reports both
# requests/s (wall) and requests per server CPU-second. See bench/http/README.md.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/http/vs_nginx.sh [options]

  --duration S      seconds per measured run (default 10)
  --rounds N        rounds per scenario and server, alternating nginx/petrel (default 2)
  --warmup S        unmeasured warm-up load before each run, same tool (default 1; 0 = none)
  --connections C   concurrent connections (default 50)
  --streams M       h2 concurrent streams per connection, h2load -m (default 10)
  --scenarios LIST  comma-separated subset of h1,h2,h2c (default h1,h2,h2c)
  --petrel BIN      petrel-server binary (default build-benchh/src/server/petrel-server; build
                    it with: cmake -S . -B build-benchh -G Ninja -DCMAKE_BUILD_TYPE=Release
                    -DPETREL_BUILD_TESTS=OFF -DPETREL_BUILD_BENCH=OFF &&
                    cmake --build build-benchh --target petrel-server)
  --nginx BIN       nginx binary (default: nginx on PATH, else /usr/sbin/nginx)
  --nice N          run the server and the load generator at this nice value (default -20 as
                    root, else 0), so that other work on the machine disturbs the runs less
  --log-dir DIR     keep the raw tool outputs, server logs and configs in DIR
  --help            this text

Needs: nginx (Debian nginx-light), wrk, h2load (nghttp2-client), openssl, curl, taskset, and
2 CPUs (0 and 1). Install the load tools with: bash scripts/install-deps.sh --bench
Exit status: 0 when every run completed with no failure or error, 1 when some run had failures
or errors (after printing the table), 2 for a usage or setup problem.
EOF
}

die() { echo "vs_nginx: $*" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/../.." && pwd)
duration=10
rounds=2
warmup=1
conns=50
streams=10
scenarios=h1,h2,h2c
petrel_bin=$repo/build-benchh/src/server/petrel-server
nginx_bin=
log_dir=
if [[ $(id -u) -eq 0 ]]; then nice_value=-20; else nice_value=0; fi

while (($#)); do
  case $1 in
    --duration) duration=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --warmup) warmup=${2:?}; shift 2 ;;
    --connections) conns=${2:?}; shift 2 ;;
    --streams) streams=${2:?}; shift 2 ;;
    --scenarios) scenarios=${2:?}; shift 2 ;;
    --petrel) petrel_bin=${2:?}; shift 2 ;;
    --nginx) nginx_bin=${2:?}; shift 2 ;;
    --nice) nice_value=${2:?}; shift 2 ;;
    --log-dir) log_dir=${2:?}; shift 2 ;;
    --help | -h) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
done
for n in "$duration" "$rounds" "$warmup" "$conns" "$streams"; do
  [[ $n =~ ^[0-9]+$ ]] || die "not a non-negative integer: $n"
done
((duration > 0 && rounds > 0 && conns > 0 && streams > 0)) || die "duration, rounds, connections and streams must be > 0"
IFS=, read -r -a scenario_list <<<"$scenarios"
for s in "${scenario_list[@]}"; do
  [[ $s == h1 || $s == h2 || $s == h2c ]] || die "unknown scenario: $s (want h1, h2, h2c)"
done

# --- Tools ---------------------------------------------------------------------------------
if [[ -z $nginx_bin ]]; then
  nginx_bin=$(command -v nginx || true)
  [[ -n $nginx_bin ]] || nginx_bin=/usr/sbin/nginx
fi
[[ -x $nginx_bin ]] || die "nginx not found ($nginx_bin); run: bash scripts/install-deps.sh --bench"
for tool in wrk h2load openssl curl taskset ss; do
  command -v "$tool" >/dev/null || die "$tool not found; run: bash scripts/install-deps.sh --bench"
done
[[ $nice_value =~ ^-?[0-9]+$ ]] || die "not an integer: $nice_value"
nice -n "$nice_value" true 2>/dev/null || die "cannot run at nice $nice_value (use --nice 0)"
prio=(nice -n "$nice_value")
[[ -x $petrel_bin ]] || die "petrel-server not found at $petrel_bin (see --help for the build command)"
taskset -c 0,1 true 2>/dev/null || die "CPUs 0 and 1 are not both available to this process"

tick=$(getconf CLK_TCK)
run_timeout=$((warmup + duration + 30))

# --- Temp dir and cleanup ------------------------------------------------------------------
work=$(mktemp -d /tmp/petrel-vs-nginx.XXXXXX)
chmod 755 "$work" # nginx workers may run as 'nobody' and must read the document root
server_pids=()
cleanup() {
  local pid
  for pid in "${server_pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${server_pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [[ -n $log_dir ]]; then
    mkdir -p "$log_dir"
    cp -r "$work/logs/." "$work/nginx.conf" "$log_dir/" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work/www" "$work/logs" "$work/nginx-tmp"
printf 'hello-petrel' >"$work/www/12b"
[[ $(wc -c <"$work/www/12b") -eq 12 ]] || die "test file is not 12 bytes"
chmod 755 "$work/www"
chmod 644 "$work/www/12b"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$work/key.pem" -out "$work/cert.pem" >/dev/null 2>&1 || die "openssl failed"
chmod 644 "$work/key.pem" "$work/cert.pem"

# Five free ports: nginx h1, nginx TLS (h1+h2), nginx h2c; petrel cleartext (h1+h2c), petrel TLS.
# Below Linux's ephemeral range (32768 and up): a load tool's own connection, given one of them as
# its local port, would keep the next server from binding it.
pick_ports() {
  local base p busy
  for _ in $(seq 1 20); do
    base=$((10000 + RANDOM % 20000))
    busy=0
    for p in $(seq "$base" $((base + 4))); do
      if ss -Htln "sport = :$p" | grep -q .; then busy=1; fi
    done
    if ((busy == 0)); then echo "$base"; return; fi
  done
  die "no free port range found"
}
base=$(pick_ports)
ngx_h1=$base ngx_tls=$((base + 1)) ngx_h2c=$((base + 2)) pet_http=$((base + 3)) pet_tls=$((base + 4))

cat >"$work/nginx.conf" <<EOF
# Private config for bench/http/vs_nginx.sh. One worker process = one core, like petrel-server
# --workers 0. The master only supervises; its CPU time is counted anyway.
worker_processes 1;
daemon off;
master_process on;
pid $work/nginx.pid;
error_log $work/logs/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nodelay on;
  keepalive_timeout 75s;
  keepalive_requests 1000000;
  types { }
  default_type application/octet-stream;
  client_body_temp_path $work/nginx-tmp/body;
  proxy_temp_path $work/nginx-tmp/proxy;
  fastcgi_temp_path $work/nginx-tmp/fastcgi;
  uwsgi_temp_path $work/nginx-tmp/uwsgi;
  scgi_temp_path $work/nginx-tmp/scgi;
  # nginx 1.22's default stops at TLSv1.2; offer 1.3 as petrel does so both negotiate the same.
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_certificate $work/cert.pem;
  ssl_certificate_key $work/key.pem;
  server {
    listen 127.0.0.1:$ngx_h1;
    listen 127.0.0.1:$ngx_tls ssl http2;
    listen 127.0.0.1:$ngx_h2c http2;
    root $work/www;
  }
}
EOF
"$nginx_bin" -t -p "$work/nginx-tmp" -e "$work/logs/nginx-error.log" -c "$work/nginx.conf" \
  >"$work/logs/nginx-t.log" 2>&1 || { cat "$work/logs/nginx-t.log" >&2; die "nginx -t failed"; }

# --- Servers -------------------------------------------------------------------------------
server_pid=
cpu_pids=()

# URL of the 12-byte file for a scenario on the current server.
url_for() { # server scenario
  case $1:$2 in
    nginx:h1) echo "http://127.0.0.1:$ngx_h1/12b" ;;
    nginx:h2) echo "https://127.0.0.1:$ngx_tls/12b" ;;
    nginx:h2c) echo "http://127.0.0.1:$ngx_h2c/12b" ;;
    petrel:h1 | petrel:h2c) echo "http://127.0.0.1:$pet_http/12b" ;;
    petrel:h2) echo "https://127.0.0.1:$pet_tls/12b" ;;
  esac
}

# One GET with curl; prints "<http_version> <status> <body>".
probe() { # scenario url
  local opt
  case $1 in
    h1) opt=--http1.1 ;;
    h2) opt=--http2 ;;
    h2c) opt=--http2-prior-knowledge ;;
  esac
  taskset -c 1 curl -sk --max-time 2 "$opt" -w ' %{http_version} %{http_code}' "$2" 2>/dev/null |
    awk '{print $2, $3, $1}'
}

start_server() { # server scenario tag
  local log=$work/logs/$3.server.log
  if [[ $1 == nginx ]]; then
    rm -f "$work/nginx.pid"
    "${prio[@]}" taskset -c 0 "$nginx_bin" -p "$work/nginx-tmp" -e "$work/logs/nginx-error.log" \
      -c "$work/nginx.conf" >"$log" 2>&1 &
  else
    "${prio[@]}" taskset -c 0 "$petrel_bin" --listen 127.0.0.1 --http-port "$pet_http" --https-port "$pet_tls" \
      --workers 0 --no-h3 --grace 1 --root "$work/www" --cert "$work/cert.pem" \
      --key "$work/key.pem" >"$log" 2>&1 &
  fi
  server_pid=$!
  server_pids=("$server_pid")
  local url want got
  url=$(url_for "$1" "$2")
  case $2 in h1) want=1.1 ;; *) want=2 ;; esac
  for _ in $(seq 1 100); do
    got=$(probe "$2" "$url" || true)
    [[ $got == "$want 200 hello-petrel" ]] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; die "$1 exited at startup"; }
    sleep 0.05
  done
  [[ $got == "$want 200 hello-petrel" ]] ||
    { cat "$log" >&2; die "$1 $2: probe of $url gave '$got', want '$want 200 hello-petrel'"; }
  cpu_pids=("$server_pid")
  if [[ $1 == nginx ]]; then
    local child
    for child in $(ps -o pid= --ppid "$server_pid"); do cpu_pids+=("$child"); done
    ((${#cpu_pids[@]} >= 2)) || die "nginx worker process not found"
  fi
}

stop_server() {
  local pid
  local all=("${cpu_pids[@]}")
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  for pid in "${all[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait "$server_pid" 2>/dev/null || true
  server_pids=()
}

# Server CPU ticks (utime + stime) summed over the server's processes; each stat line already
# sums the process's threads.
server_ticks() {
  local pid total=0 t
  for pid in "${cpu_pids[@]}"; do
    t=$(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$pid/stat") ||
      die "server process $pid vanished during the run"
    total=$((total + t))
  done
  echo "$total"
}

# Busy ticks (everything but idle, iowait and steal) of CPUs 0 and 1 together, and their steal
# ticks: "busy steal". Busy minus server minus client CPU is what other work took from the two
# cores during a run.
machine_ticks() {
  awk '/^cpu[01] / { busy += $2 + $3 + $4 + $7 + $8; steal += $9 } END { print busy, steal }' /proc/stat
}

# --- Load generators -----------------------------------------------------------------------
cat >"$work/report.lua" <<'EOF'
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "VSNGINX requests=%d bytes=%d duration_us=%d p99_us=%d connect=%d read=%d write=%d status=%d timeout=%d\n",
    summary.requests, summary.bytes, summary.duration, latency:percentile(99), e.connect, e.read, e.write,
    e.status, e.timeout))
end
EOF

# Runs the load tool (CPU 1) and prints one result line:
#   requests wall_s req_per_s p99_ms failures failure_detail bytes_per_response client_cpu_s
# The subshell's `times` reports the tool's CPU (its children) after it exits.
load() { # scenario url seconds out_file
  local sc=$1 url=$2 secs=$3 out=$4
  if [[ $sc == h1 ]]; then
    (timeout "$run_timeout" "${prio[@]}" taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" --latency \
      -s "$work/report.lua" "$url" >"$out" 2>&1; rc=$?; times >"$out.times"; exit $rc) || true
    awk '/^VSNGINX/ {
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        secs = v["duration_us"] / 1e6
        fail = v["connect"] + v["read"] + v["write"] + v["status"] + v["timeout"]
        detail = sprintf("connect=%d,read=%d,write=%d,timeout=%d,non2xx3xx=%d",
                         v["connect"], v["read"], v["write"], v["timeout"], v["status"])
        printf "%d %.3f %.1f %.3f %d %s %.0f", v["requests"], secs, v["requests"] / secs,
               v["p99_us"] / 1000, fail, detail, v["requests"] ? v["bytes"] / v["requests"] : 0
        found = 1 }
      END { if (!found) printf "0 0 0 0 1 no-wrk-result 0" }' "$out"
  else
    rm -f "$out.lat"
    (timeout "$run_timeout" "${prio[@]}" taskset -c 1 h2load -t1 -c"$conns" -m"$streams" -D"$secs" \
      --log-file="$out.lat" "$url" >"$out" 2>&1; rc=$?; times >"$out.times"; exit $rc) || true
    local p99
    p99=$(cut -f3 "$out.lat" 2>/dev/null | sort -n |
      awk '{ v[NR] = $1 } END { if (NR == 0) { print 0; exit }
             i = int(NR * 0.99); if (i < NR * 0.99) i++; printf "%.3f", v[i] / 1000 }')
    rm -f "$out.lat"
    awk -v p99="$p99" '
      /^finished in/ { secs = $3 + 0; rps = $4 + 0; fin = 1 }
      /^requests:/ { total = $2; started = $4; done = $6; ok = $8; failed = $10; errored = $12;
                     tmo = $14; req = 1 }
      /^status codes:/ { non2xx = $5 + $7 + $9; sc = 1 }
      /^traffic:/ { bytes = substr($3, 2) + 0 }
      END {
        if (!fin || !req || !sc) { printf "0 0 0 0 1 no-h2load-result 0"; exit }
        # Streams still open when the duration ends are neither done nor failed (started >
        # done); every done request must have succeeded with a 2xx status.
        fail = failed + errored + tmo + non2xx + (done - ok)
        detail = sprintf("failed=%d,errored=%d,timeout=%d,non2xx=%d,done-succeeded=%d",
                         failed, errored, tmo, non2xx, done - ok)
        # Traffic includes the connection prefaces and TLS records: bytes on the wire per response.
        printf "%d %.3f %.1f %s %d %s %.0f", ok, secs, rps, p99, fail, detail, ok ? bytes / ok : 0 }' "$out"
  fi
  # Second line of `times`: children's user and system time, e.g. "0m1.234s 0m0.567s".
  awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); n += a[1] * 60 + a[2] }
                 printf " %.2f\n", n }' "$out.times"
}

# --- Runs ----------------------------------------------------------------------------------
declare -A tls_seen=()
results=$work/results.tsv
: >"$results"
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo |
  cut -d: -f2 | sed 's/^ //')), kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $("$nginx_bin" -v 2>&1); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $(h2load --version)"
echo "# $("$petrel_bin" --version)"
echo "# ${duration}s runs, ${warmup}s warm-up, ${rounds} rounds, -c${conns}, h2 -m${streams}, nice ${nice_value};" \
  "server on CPU 0, load generator on CPU 1"
echo "# srv_cpu_s / cli_cpu_s: server / load generator CPU seconds in the run; other_cpu_s: CPU"
echo "# seconds that other work took on the two cores meanwhile; steal_s: hypervisor steal"
echo "# B/resp: bytes the client read per response (h2: all traffic incl. TLS / successes)"
printf '%-4s %-6s %5s %9s %8s %8s %9s %12s %9s %11s %7s %6s %s\n' scen server round "req/s" \
  "p99_ms" failures srv_cpu_s req/srv_cpu_s cli_cpu_s other_cpu_s steal_s B/resp "failure detail"
for sc in "${scenario_list[@]}"; do
  for round in $(seq 1 "$rounds"); do
    for srv in nginx petrel; do
      tag=$sc.$srv.$round
      start_server "$srv" "$sc" "$tag"
      url=$(url_for "$srv" "$sc")
      if ((warmup > 0)); then load "$sc" "$url" "$warmup" "$work/logs/$tag.warmup.out" >/dev/null; fi
      read -r m0 st0 <<<"$(machine_ticks)"
      t0=$(server_ticks)
      line=$(load "$sc" "$url" "$duration" "$work/logs/$tag.out")
      t1=$(server_ticks)
      read -r m1 st1 <<<"$(machine_ticks)"
      # The server must still serve after the run.
      after=$(probe "$sc" "$url" || true)
      stop_server
      read -r reqs secs rps p99 fail detail bpr cli_cpu <<<"$line"
      if [[ $sc == h2 && -z ${tls_seen[$srv]:-} ]]; then
        tls_seen[$srv]=$(awk '/^TLS Protocol:/ { p = $3 } /^Cipher:/ { c = $2 }
          /^Server Temp Key:/ { k = $4 } END { print p, c, k }' "$work/logs/$tag.out")
      fi
      if [[ $after != *" 200 hello-petrel" ]]; then
        fail=$((fail + 1)); detail="$detail,probe-after-run='$after'"
      fi
      srv_cpu=$(awk -v a="$t0" -v b="$t1" -v t="$tick" 'BEGIN { printf "%.2f", (b - a) / t }')
      other_cpu=$(awk -v a="$m0" -v b="$m1" -v t="$tick" -v s="$srv_cpu" -v c="$cli_cpu" \
        'BEGIN { printf "%.2f", (b - a) / t - s - c }')
      steal=$(awk -v a="$st0" -v b="$st1" -v t="$tick" 'BEGIN { printf "%.2f", (b - a) / t }')
      per_cpu=$(awk -v r="$reqs" -v c="$srv_cpu" 'BEGIN { if (c > 0) printf "%.0f", r / c; else print "inf" }')
      [[ $fail -eq 0 ]] && shown_detail=- || shown_detail=$detail
      printf '%-4s %-6s %5s %9.0f %8.2f %8s %9s %12s %9s %11s %7s %6s %s\n' "$sc" "$srv" "$round" \
        "$rps" "$p99" "$fail" "$srv_cpu" "$per_cpu" "$cli_cpu" "$other_cpu" "$steal" "$bpr" \
        "$shown_detail"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$sc" "$srv" "$round" "$rps" \
        "$p99" "$fail" "$srv_cpu" "$per_cpu" "$reqs" "$cli_cpu" "$other_cpu" "$steal" >>"$results"
    done
  done
done

# --- Medians and ratios --------------------------------------------------------------------
for srv in nginx petrel; do
  if [[ -n ${tls_seen[$srv]:-} ]]; then echo "# h2 TLS negotiated with $srv: ${tls_seen[$srv]}"; fi
done
echo
echo "# medians per scenario and server; ratio = petrel / nginx"
printf '%-4s %-6s %9s %8s %9s %13s %9s %11s\n' scen server "req/s" "p99_ms" "srv_cpu_s" \
  "req/srv_cpu_s" "cli_cpu_s" "other_cpu_s"
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
  else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for sc in "${scenario_list[@]}"; do
  declare -A med=()
  for srv in nginx petrel; do
    for col in 4:rps 5:p99 7:cpu 8:per 10:cli 11:oth; do
      med[$srv.${col#*:}]=$(awk -F'\t' -v s="$sc" -v v="$srv" -v c="${col%%:*}" \
        '$1 == s && $2 == v { print $c }' "$results" | median)
    done
    printf '%-4s %-6s %9.0f %8.2f %9.2f %13.0f %9.2f %11.2f\n' "$sc" "$srv" "${med[$srv.rps]}" \
      "${med[$srv.p99]}" "${med[$srv.cpu]}" "${med[$srv.per]}" "${med[$srv.cli]}" "${med[$srv.oth]}"
  done
  awk -v sc="$sc" -v r1="${med[nginx.rps]}" -v r2="${med[petrel.rps]}" -v l1="${med[nginx.p99]}" \
    -v l2="${med[petrel.p99]}" -v c1="${med[nginx.per]}" -v c2="${med[petrel.per]}" 'BEGIN {
      printf "%-4s %-6s %8.2fx %7.2fx %9s %12.2fx\n", sc, "ratio", r2 / r1, l2 / l1, "", c2 / c1 }'
  unset med
done

total_fail=$(awk -F'\t' '{ n += $6 } END { print n + 0 }' "$results")
if ((total_fail > 0)); then
  echo
  echo "vs_nginx: FAILED: $total_fail failed requests or errors in total (see the table)" >&2
  exit 1
fi
