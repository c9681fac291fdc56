#!/usr/bin/env bash
# Deterministic per-request cost of petrel-server beside nginx (h1, h2 over TLS, h2c) and
# gtlsserver (h3), on the same 12-byte file under the same load tools (h2load, gtlsclient);
# and (--mode bulk) the cost per GB of one large HTTP/3 download beside gtlsserver.
#
# For each protocol and server it runs the server twice under callgrind (instructions per
# library, allocation calls) and twice under strace -c (syscalls), once at load N1 and once at
# load N2 over the same connections, and divides the difference by N2 - N1: start-up, handshakes
# and shutdown cancel. Then one latency run without any tracer. See bench/cost/README.md.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/cost/run.sh [options]

  --build DIR        Petrel build with petrel-server (and petrel-bench for h3 latency) built
                     (default: $PETREL_BUILD_DIR, else ./build); this script builds nothing:
                     cmake --build DIR --target petrel-server petrel-bench
  --mode MODE        request (default): cost per request on kept-alive connections;
                     handshake: cost per connection that does one request (TLS/QUIC handshake
                     + request + close);
                     bulk: cost per GB of one HTTP/3 download of a large random file on one
                     connection (the difference of two file sizes), checked byte for byte
  --protocols LIST   comma-separated subset of h1,h2,h2c,h3 (default: all four; handshake mode
                     takes h1,h2,h3 and runs h1 over TLS there; bulk mode takes h3 (gtlsclient
                     downloads) and h3-bench (petrel-bench downloads), default both)
  --servers LIST     petrel,peer (default both; peer = nginx for h1/h2/h2c, gtlsserver for h3)
  --n1 N --n2 N      request mode: the two loads in requests (default 2000 and 6000)
  --k1 K --k2 K      handshake mode: the two loads in connections (default 4 and 12)
  --s1 MB --s2 MB    bulk mode: the two file sizes in MB of 10^6 bytes (default 10 and 50)
  --cpu-mb MB        bulk mode: size of the untraced download whose server CPU time (from
                     /proc) and wall time are reported per GB (default 200; 0: no such run)
  --cpu-rounds R     bulk mode: untraced downloads per server and client (default 3)
  --h1-connections C request mode, h1: h2load --h1 -c (default 10)
  --h2-connections C request mode, h2 and h2c: h2load -c (default 1)
  --streams M        request mode, h2 and h2c: h2load -m (default 1). With more streams or
                     connections, how many requests a server finds per read and per TLS
                     record depends on timing, and the h2 counts vary by up to 7 % between
                     runs (-c 10 -m 10: nginx 29.6 k to 31.7 k instructions per request)
  --h3-connections C request mode, h3: gtlsclient processes in parallel (default 4)
  --h3-sequential    request mode, h3: the load is one request at a time on one connection
                     (`petrel-bench -k -c 1 -m 1 -n N`) instead of gtlsclient's parallel
                     streams: each request then arrives in a datagram of its own, so what a
                     server spends per read, per loop turn and per timer shows in full
  --workers N        petrel-server --workers (default 0: one thread reads and serves QUIC;
                     N >= 1 adds the master thread that routes datagrams to N workers)
  --latency-n N      requests of the h2load -c1 -m1 latency run (default 500; h3: --h3-latency-n)
  --h3-latency-n N   requests of the petrel-bench -c 1 -m 1 latency run (default 200)
  --no-strace        skip the syscall runs
  --no-latency       skip the latency runs
  --petrel-args ARGS extra petrel-server flags, one word each (e.g. "--request-id --compress"),
                     to measure what they cost
  --nice N           nice value of servers and load tools (default -20 as root, else 0)
  --out FILE         also write the report (markdown) to FILE
  --log-dir DIR      keep every raw output (callgrind files, strace and load tool outputs,
                     server logs, configs) in DIR
  --help             this text

Needs: valgrind, strace, nginx (nginx-light), h2load (nghttp2-client), gtlsserver and
gtlsclient (ngtcp2-server, ngtcp2-client), openssl, python3, ss, timeout.
Install them with: bash scripts/install-deps.sh --bench
Runs one traced server at a time. Exit status: 0 when every run completed and every response
was right, 1 when a run failed (a load error, a server that did not exit cleanly, an incomplete
callgrind file), 2 for a usage or setup problem.
EOF
}

die() { echo "cost: $*" >&2; exit 2; }
fail() { echo "cost: FAILED: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build_dir=${PETREL_BUILD_DIR:-$repo/build}
mode=request
protocols=
servers=petrel,peer
n1=2000
n2=6000
k1=4
k2=12
s1=10
s2=50
cpu_mb=200
cpu_rounds=3
h1_conns=10
h2_conns=1
h3_conns=4
h3_sequential=0
petrel_workers=0
petrel_args=""
streams=1
lat_n=500
h3_lat_n=200
do_strace=1
do_latency=1
out_file=
log_dir=
if [[ $(id -u) -eq 0 ]]; then nice_value=-20; else nice_value=0; fi

while (($#)); do
  case $1 in
    --build) build_dir=${2:?}; shift 2 ;;
    --mode) mode=${2:?}; shift 2 ;;
    --protocols) protocols=${2:?}; shift 2 ;;
    --servers) servers=${2:?}; shift 2 ;;
    --n1) n1=${2:?}; shift 2 ;;
    --n2) n2=${2:?}; shift 2 ;;
    --k1) k1=${2:?}; shift 2 ;;
    --k2) k2=${2:?}; shift 2 ;;
    --s1) s1=${2:?}; shift 2 ;;
    --s2) s2=${2:?}; shift 2 ;;
    --cpu-mb) cpu_mb=${2:?}; shift 2 ;;
    --cpu-rounds) cpu_rounds=${2:?}; shift 2 ;;
    --h1-connections) h1_conns=${2:?}; shift 2 ;;
    --h2-connections) h2_conns=${2:?}; shift 2 ;;
    --h3-connections) h3_conns=${2:?}; shift 2 ;;
    --h3-sequential) h3_sequential=1; shift ;;
    --workers) petrel_workers=${2:?}; shift 2 ;;
    --streams) streams=${2:?}; shift 2 ;;
    --latency-n) lat_n=${2:?}; shift 2 ;;
    --h3-latency-n) h3_lat_n=${2:?}; shift 2 ;;
    --no-strace) do_strace=0; shift ;;
    --no-latency) do_latency=0; shift ;;
    --nice) nice_value=${2:?}; shift 2 ;;
    --petrel-args) petrel_args=${2:?}; shift 2 ;;
    --out) out_file=${2:?}; shift 2 ;;
    --log-dir) log_dir=${2:?}; shift 2 ;;
    --help | -h) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
done

case $mode in
  request) protocols=${protocols:-h1,h2,h2c,h3} ;;
  handshake) protocols=${protocols:-h1,h2,h3} ;;
  bulk) protocols=${protocols:-h3,h3-bench} ;;
  *) die "unknown mode: $mode (want request, handshake or bulk)" ;;
esac
for n in "$n1" "$n2" "$k1" "$k2" "$s1" "$s2" "$cpu_rounds" "$streams" "$lat_n" "$h3_lat_n" \
  "$h1_conns" "$h2_conns" "$h3_conns"; do
  [[ $n =~ ^[0-9]+$ ]] && ((n > 0)) || die "not a positive integer: $n"
done
[[ $petrel_workers =~ ^[0-9]+$ ]] || die "not a non-negative integer: $petrel_workers"
[[ $cpu_mb =~ ^[0-9]+$ ]] || die "not a non-negative integer: $cpu_mb"
case $mode in
  request) lo=$n1 hi=$n2 ;;
  handshake) lo=$k1 hi=$k2 ;;
  bulk) lo=$s1 hi=$s2 ;;
esac
((hi > lo)) || die "the second load must be larger than the first"
IFS=, read -r -a proto_list <<<"$protocols"
for p in "${proto_list[@]}"; do
  case $mode:$p in
    request:h1 | request:h2 | request:h2c | request:h3 | handshake:h1 | handshake:h2 | handshake:h3) ;;
    bulk:h3 | bulk:h3-bench) ;;
    *) die "protocol $p is not measured in $mode mode" ;;
  esac
done
IFS=, read -r -a server_list <<<"$servers"
for s in "${server_list[@]}"; do
  [[ $s == petrel || $s == peer ]] || die "unknown server: $s (want petrel, peer)"
done
# Every connection of a load must do the same number of requests, so that the per-connection
# cost is the same at both loads and cancels.
if [[ $mode == request ]]; then
  for p in "${proto_list[@]}"; do
    case $p in h1) c=$h1_conns ;; h3) c=$h3_conns ;; *) c=$h2_conns ;; esac
    [[ $p != h3 ]] || ((h3_sequential == 0)) || c=1
    ((n1 % c == 0 && n2 % c == 0)) || die "--n1 and --n2 must be multiples of the $p connections ($c)"
  done
fi

# --- Tools ---------------------------------------------------------------------------------
petrel_bin=$build_dir/src/server/petrel-server
bench_bin=$build_dir/src/tools/petrel-bench
[[ -x $petrel_bin ]] || die "petrel-server not found at $petrel_bin (see --help)"
# Server command lines travel as words (server_cmd), so paths must not contain blanks.
[[ $petrel_bin != *[[:space:]]* ]] || die "the build directory must not contain blanks: $build_dir"
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
gtls_server=$(command -v gtlsserver || echo /usr/sbin/gtlsserver)
gtls_client=$(command -v gtlsclient || echo /usr/bin/gtlsclient)
for tool in valgrind openssl python3 ss timeout; do
  command -v "$tool" >/dev/null || die "$tool not found; run: bash scripts/install-deps.sh --bench"
done
((do_strace == 0)) || command -v strace >/dev/null || die "strace not found; run: bash scripts/install-deps.sh --bench"
for p in "${proto_list[@]}"; do
  if [[ $p == h3-bench ]]; then
    [[ -x $gtls_server ]] || die "gtlsserver not found (apt-get install ngtcp2-server)"
    [[ -x $bench_bin ]] || die "petrel-bench not found at $bench_bin"
  elif [[ $p == h3 ]]; then
    [[ -x $gtls_client ]] || die "gtlsclient not found (apt-get install ngtcp2-client)"
    ((h3_sequential == 0)) || [[ -x $bench_bin ]] || die "petrel-bench not found at $bench_bin"
    [[ -x $gtls_server ]] || die "gtlsserver not found (apt-get install ngtcp2-server)"
    ((do_latency == 0)) || [[ $mode != request ]] || [[ -x $bench_bin ]] ||
      die "petrel-bench not found at $bench_bin (or use --no-latency)"
  else
    command -v h2load >/dev/null || die "h2load not found (apt-get install nghttp2-client)"
    [[ -x $nginx_bin ]] || die "nginx not found; run: bash scripts/install-deps.sh --bench"
  fi
done
# Pin the server and the load tool to different CPUs when there are two, both at a high
# priority: how many requests a server finds per read (and per TLS record) depends on how
# promptly the load tool answers each response, so other work on the machine must not delay it.
[[ $nice_value =~ ^-?[0-9]+$ ]] || die "not an integer: $nice_value"
nice -n "$nice_value" true 2>/dev/null || die "cannot run at nice $nice_value (use --nice 0)"
on_server=(nice -n "$nice_value") on_client=(nice -n "$nice_value")
if taskset -c 0,1 true 2>/dev/null; then
  on_server+=(taskset -c 0) on_client+=(taskset -c 1)
fi

# --- Temp dir and cleanup ------------------------------------------------------------------
work=$(mktemp -d /tmp/petrel-cost.XXXXXX)
chmod 755 "$work"
server_pid=   # the process that gets the stop signal
wrapper_pid=  # strace, when the server runs under it
client_pids=()
cleanup() {
  local pid
  for pid in "${client_pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in $server_pid $wrapper_pid; do
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [[ -n $log_dir ]]; then
    mkdir -p "$log_dir"
    cp -r "$work/." "$log_dir/" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work/www" "$work/logs" "$work/nginx-tmp" "$work/data" "$work/download"
printf 'hello-petrel' >"$work/www/12b"
[[ $(wc -c <"$work/www/12b") -eq 12 ]] || die "test file is not 12 bytes"
chmod 755 "$work/www"
chmod 644 "$work/www/12b"
if [[ $mode == bulk ]]; then
  # Random bytes: nothing on the path can shortcut them, and a wrong byte shows in the cmp.
  for mb in "$s1" "$s2" $( ((cpu_mb > 0)) && echo "$cpu_mb"); do
    [[ -e $work/www/bulk.$mb ]] && continue
    head -c $((mb * 1000000)) /dev/urandom >"$work/www/bulk.$mb" || die "cannot write $mb MB"
    chmod 644 "$work/www/bulk.$mb"
  done
fi
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$work/key.pem" -out "$work/cert.pem" >/dev/null 2>&1 || die "openssl failed"
chmod 644 "$work/key.pem" "$work/cert.pem"

# Ports free for both TCP and UDP, held until all are chosen so that they differ.
read -r port_h1 port_tls port_h2c port_quic < <(python3 -c '
import socket
held = []
for _ in range(4):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
    t = socket.socket(); t.bind(("127.0.0.1", u.getsockname()[1]))
    held += [u, t]
print(*[s.getsockname()[1] for s in held[::2]])') || die "no free ports"

# nginx in one process (no master, no daemon) so that callgrind and strace see the process
# that serves; access log off as petrel-server's default.
cat >"$work/nginx.conf" <<EOF
worker_processes 1;
master_process off;
daemon off;
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
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_certificate $work/cert.pem;
  ssl_certificate_key $work/key.pem;
  server {
    listen 127.0.0.1:$port_h1;
    listen 127.0.0.1:$port_tls ssl http2;
    root $work/www;
  }
  # With sendfile, nginx's h2c sends each DATA frame with Nagle on after its HEADERS frame, and
  # one request at a time then waits ~40 ms per request for the client's delayed ACK. h2 over
  # TLS never uses sendfile, so this makes h2c take the same path.
  server {
    listen 127.0.0.1:$port_h2c http2;
    sendfile off;
    root $work/www;
  }
}
EOF
"$nginx_bin" -t -p "$work/nginx-tmp" -e "$work/logs/nginx-error.log" -c "$work/nginx.conf" \
  >"$work/logs/nginx-t.log" 2>&1 || { cat "$work/logs/nginx-t.log" >&2; die "nginx -t failed"; }

# --- Servers -------------------------------------------------------------------------------
peer_of() { [[ $1 == h3* ]] && echo gtlsserver || echo nginx; }

# The command line of a server for a protocol.
server_cmd() { # server protocol
  case $1:$2 in
    nginx:*) echo "$nginx_bin" -p "$work/nginx-tmp" -e "$work/logs/nginx-error.log" -c "$work/nginx.conf" ;;
    gtlsserver:*) echo "$gtls_server" -q -d "$work/www" 127.0.0.1 "$port_quic" "$work/key.pem" "$work/cert.pem" ;;
    # One thread serves TCP (--workers 0: one TCP loop); h3 has the QUIC thread, whose TCP
    # TLS listener on the same port idles.
    petrel:h3*) echo "$petrel_bin" --listen 127.0.0.1 --http-port 0 --https-port "$port_quic" \
      --workers "$petrel_workers" --grace 1 --root "$work/www" --cert "$work/cert.pem" --key "$work/key.pem" \
      $petrel_args ;;
    petrel:*) echo "$petrel_bin" --listen 127.0.0.1 --http-port "$port_h1" --https-port "$port_tls" \
      --no-h3 --workers "$petrel_workers" --grace 1 --root "$work/www" --cert "$work/cert.pem" --key "$work/key.pem" \
      $petrel_args ;;
  esac
}

stop_signal_of() { case $1 in nginx) echo QUIT ;; gtlsserver) echo INT ;; *) echo TERM ;; esac; }

# In handshake mode h1 runs over TLS, on the TLS port.
port_of() { # server protocol
  case $mode:$1:$2 in
    *:*:h3*) echo "$port_quic" ;;
    *:*:h2 | handshake:*:h1) echo "$port_tls" ;;
    *:*:h1 | *:petrel:h2c) echo "$port_h1" ;;
    *:nginx:h2c) echo "$port_h2c" ;;
  esac
}

# Ready when the socket listens: no probe request, whose cost would land in the counts (and a
# probe that raced the start-up would make them differ between runs).
wait_listening() { # server protocol log
  local port ss_opt
  port=$(port_of "$1" "$2")
  [[ $2 == h3* ]] && ss_opt=-Hlun || ss_opt=-Hltn
  for _ in $(seq 1 600); do
    if ss "$ss_opt" "sport = :$port" | grep -q .; then
      # petrel-server binds before its loops run; the line says they do.
      [[ $1 != petrel ]] || grep -q 'listening on' "$3" && return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || { cat "$3" >&2; fail "$1 (pid $server_pid) exited at start-up"; }
    sleep 0.1
  done
  cat "$3" >&2
  fail "$1 did not listen on port $port within 60 s"
}

# Starts a server, optionally under a tool: none, callgrind OUT, strace OUT.
start_server() { # server protocol tag tool [tool_out]
  local srv=$1 proto=$2 tag=$3 tool=$4 tool_out=${5:-}
  local log=$work/logs/$tag.server.log
  local cmd
  read -r -a cmd <<<"$(server_cmd "$srv" "$proto")"
  wrapper_pid=
  case $tool in
    none)
      "${on_server[@]}" "${cmd[@]}" >"$log" 2>&1 &
      server_pid=$!
      ;;
    callgrind)
      # valgrind runs the server in its own process: the pid is the server's.
      "${on_server[@]}" valgrind --tool=callgrind --trace-children=no --collect-atstart=yes \
        --callgrind-out-file="$tool_out" --log-file="$work/logs/$tag.valgrind.log" \
        "${cmd[@]}" >"$log" 2>&1 &
      server_pid=$!
      ;;
    strace)
      # The traced shell writes its own pid, then becomes the server: that pid gets the stop
      # signal. Its few syscalls before the exec are the same in every run and cancel.
      rm -f "$work/server.pid"
      "${on_server[@]}" strace -f -c -o "$tool_out" \
        bash -c 'echo $$ >"$0"; exec "$@"' "$work/server.pid" "${cmd[@]}" >"$log" 2>&1 &
      wrapper_pid=$!
      server_pid=
      for _ in $(seq 1 100); do
        [[ -s $work/server.pid ]] && server_pid=$(<"$work/server.pid") && break
        sleep 0.05
      done
      [[ -n $server_pid ]] || fail "no server process under strace"
      ;;
  esac
  wait_listening "$srv" "$proto" "$log"
}

# Stops the server with its clean-exit signal and waits until it (and its tracer) exited:
# callgrind writes its file and strace its table only then.
stop_server() { # server
  local sig pid
  sig=$(stop_signal_of "$1")
  kill -"$sig" "$server_pid" 2>/dev/null || true
  for pid in $server_pid $wrapper_pid; do
    for _ in $(seq 1 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      fail "$1 (pid $pid) did not exit within 120 s of SIG$sig"
    fi
    wait "$pid" 2>/dev/null || true
  done
  server_pid=
  wrapper_pid=
}

# --- Loads ---------------------------------------------------------------------------------
url_of() { # server protocol [bulk MB]
  local port
  port=$(port_of "$1" "$2")
  case $mode:$2 in
    bulk:*) echo "https://127.0.0.1:$port/bulk.$3" ;;
    request:h1 | request:h2c) echo "http://127.0.0.1:$port/12b" ;;
    *) echo "https://127.0.0.1:$port/12b" ;;
  esac
}

# Checks an h2load output: every request succeeded with a 2xx over the wanted protocol.
check_h2load() { # out requests protocol_name
  python3 - "$@" <<'EOF' || fail "h2load: unexpected result in $1 (see above)"
import re, sys
path, want, proto = sys.argv[1], int(sys.argv[2]), sys.argv[3]
text = open(path).read()
m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
s = re.search(r"status codes: (\d+) 2xx", text)
a = re.search(r"Application protocol: (\S+)", text)
ok = m and s and a and int(m.group(4)) == want and int(s.group(1)) == want and a.group(1) == proto
if not ok:
    sys.stderr.write(text[-2000:])
    sys.exit(1)
EOF
}

# Runs gtlsclient processes in parallel, each doing `each` requests on one connection, and
# checks that every response was a 200.
run_gtlsclient() { # tag clients each url
  local tag=$1 clients=$2 each=$3 url=$4 port i rc=0 got
  port=${url#https://127.0.0.1:}
  port=${port%%/*}
  client_pids=()
  for i in $(seq 1 "$clients"); do
    timeout 300 "${on_client[@]}" "$gtls_client" --no-quic-dump --no-http-dump -n "$each" \
      --exit-on-all-streams-close 127.0.0.1 "$port" "$url" >"$work/logs/$tag.client$i.out" 2>&1 &
    client_pids+=($!)
  done
  for i in "${client_pids[@]}"; do wait "$i" || rc=$?; done
  client_pids=()
  got=$(cat "$work/logs/$tag".client*.out | grep -c '\[:status: 200\]' || true)
  ((rc == 0 && got == clients * each)) ||
    fail "gtlsclient ($tag): exit $rc, $got responses with status 200 of $((clients * each))"
  rm -f "$work/logs/$tag".client*.out
}

# One download of bulk.MB on one connection: gtlsclient saves it and it is compared byte for
# byte; petrel-bench counts the body bytes (it does not keep them).
run_bulk() { # server protocol MB tag
  local srv=$1 proto=$2 mb=$3 tag=$4 url out bytes
  url=$(url_of "$srv" "$proto" "$mb")
  out=$work/logs/$tag.load.out
  case $proto in
    h3)
      rm -rf "$work/download"
      mkdir -p "$work/download"
      timeout 600 "${on_client[@]}" "$gtls_client" --no-quic-dump --no-http-dump \
        --download "$work/download" --exit-on-all-streams-close \
        127.0.0.1 "$(port_of "$srv" "$proto")" "$url" >"$out" 2>&1 ||
        { tail -20 "$out" >&2; fail "gtlsclient ($tag) failed"; }
      cmp -s "$work/download/bulk.$mb" "$work/www/bulk.$mb" ||
        fail "gtlsclient ($tag): the download differs from the file"
      rm -rf "$work/download"
      ;;
    h3-bench)
      timeout 600 "${on_client[@]}" "$bench_bin" -k -c 1 -m 1 -n 1 "$url" >"$out" 2>&1 ||
        { tail -20 "$out" >&2; fail "petrel-bench ($tag) failed"; }
      bytes=$(sed -n 's/^summary: .* body_bytes=\([0-9]*\) .*/\1/p' "$out")
      [[ $bytes == $((mb * 1000000)) ]] ||
        fail "petrel-bench ($tag): received ${bytes:-?} body bytes, want $((mb * 1000000))"
      ;;
  esac
}

# CPU seconds (user + system) a process has used so far, from /proc.
cpu_seconds_of() { # pid
  awk -v tck="$(getconf CLK_TCK)" '{ print ($14 + $15) / tck }' "/proc/$1/stat"
}

# Untraced downloads of the --cpu-mb file: the server's CPU time and the wall time per GB.
run_cpu() { # server protocol tag
  local srv=$1 proto=$2 tag=$3 r c0 c1 t0 t1
  local out=$work/data/$tag.cpu.out
  : >"$out"
  start_server "$srv" "$proto" "$tag.cpu" none
  for r in $(seq 1 "$cpu_rounds"); do
    c0=$(cpu_seconds_of "$server_pid")
    t0=$(date +%s.%N)
    run_bulk "$srv" "$proto" "$cpu_mb" "$tag.cpu.$r"
    t1=$(date +%s.%N)
    c1=$(cpu_seconds_of "$server_pid")
    echo "round=$r mb=$cpu_mb server_cpu_s=$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }') wall_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" >>"$out"
  done
  stop_server "$srv"
}

# One measured load: `amount` requests (request mode), connections (handshake mode) or MB
# (bulk mode).
run_load() { # server protocol amount tag
  local srv=$1 proto=$2 amount=$3 tag=$4 url i
  if [[ $mode == bulk ]]; then
    run_bulk "$srv" "$proto" "$amount" "$tag"
    return
  fi
  url=$(url_of "$srv" "$proto")
  if [[ $mode == request ]]; then
    case $proto in
      h1) timeout 600 "${on_client[@]}" h2load --h1 -c "$h1_conns" -n "$amount" "$url" >"$work/logs/$tag.load.out" 2>&1 || true
          check_h2load "$work/logs/$tag.load.out" "$amount" http/1.1 ;;
      h2 | h2c)
          timeout 600 "${on_client[@]}" h2load -c "$h2_conns" -m "$streams" -n "$amount" "$url" >"$work/logs/$tag.load.out" 2>&1 || true
          if [[ $proto == h2 ]]; then want=h2; else want=h2c; fi
          check_h2load "$work/logs/$tag.load.out" "$amount" "$want" ;;
      h3)
          if ((h3_sequential)); then
            timeout 600 "${on_client[@]}" "$bench_bin" -k -c 1 -m 1 -n "$amount" "$url" \
              >"$work/logs/$tag.load.out" 2>&1 || true
            grep -q "summary: requests=$amount succeeded=$amount " "$work/logs/$tag.load.out" ||
              fail "petrel-bench ($tag): not every one of $amount requests succeeded"
          else
            run_gtlsclient "$tag" "$h3_conns" $((amount / h3_conns)) "$url"
          fi ;;
    esac
  else
    # One connection after the other, one request each: nothing overlaps, so each handshake
    # costs the same.
    for i in $(seq 1 "$amount"); do
      case $proto in
        h1) timeout 60 "${on_client[@]}" h2load --h1 -c 1 -n 1 "$url" >"$work/logs/$tag.load.out" 2>&1 || true
            check_h2load "$work/logs/$tag.load.out" 1 http/1.1 ;;
        h2) timeout 60 "${on_client[@]}" h2load -c 1 -n 1 "$url" >"$work/logs/$tag.load.out" 2>&1 || true
            check_h2load "$work/logs/$tag.load.out" 1 h2 ;;
        h3) run_gtlsclient "$tag.$i" 1 1 "$url" ;;
      esac
    done
  fi
}

# The latency of one warm connection, without tracing.
run_latency() { # server protocol tag
  local srv=$1 proto=$2 tag=$3 url out=$work/data/$3.latency.out
  url=$(url_of "$srv" "$proto")
  case $proto in
    h1) timeout 300 "${on_client[@]}" h2load --h1 -c 1 -m 1 -n "$lat_n" "$url" >"$out" 2>&1 || true
        check_h2load "$out" "$lat_n" http/1.1 ;;
    h2 | h2c)
        timeout 300 "${on_client[@]}" h2load -c 1 -m 1 -n "$lat_n" "$url" >"$out" 2>&1 || true
        if [[ $proto == h2 ]]; then want=h2; else want=h2c; fi
        check_h2load "$out" "$lat_n" "$want" ;;
    h3) timeout 300 "${on_client[@]}" "$bench_bin" -k -c 1 -m 1 -n "$h3_lat_n" "$url" >"$out" 2>&1 ||
          { tail -20 "$out" >&2; fail "petrel-bench ($tag) failed"; } ;;
  esac
}

# --- Runs ----------------------------------------------------------------------------------
t_start=$(date +%s)
for proto in "${proto_list[@]}"; do
  for s in "${server_list[@]}"; do
    if [[ $s == petrel ]]; then srv=petrel; else srv=$(peer_of "$proto"); fi
    for amount in "$lo" "$hi"; do
      tag=$proto.$srv.$amount
      echo "cost: $tag callgrind ($(($(date +%s) - t_start)) s)" >&2
      start_server "$srv" "$proto" "$tag.cg" callgrind "$work/data/$tag.callgrind.out"
      run_load "$srv" "$proto" "$amount" "$tag.cg"
      stop_server "$srv"
      python3 "$here/callgrind_cost.py" --own "$(server_cmd "$srv" "$proto" | cut -d' ' -f1)" \
        "$work/data/$tag.callgrind.out" >"$work/data/$tag.callgrind.json"
      python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if d["complete"] and d["total"] == d["totals"] else 1)' "$work/data/$tag.callgrind.json" ||
        fail "$tag: incomplete callgrind file"
      if ((do_strace)); then
        echo "cost: $tag strace ($(($(date +%s) - t_start)) s)" >&2
        start_server "$srv" "$proto" "$tag.st" strace "$work/data/$tag.strace.out"
        run_load "$srv" "$proto" "$amount" "$tag.st"
        stop_server "$srv"
        grep -q 'total$' "$work/data/$tag.strace.out" || fail "$tag: incomplete strace table"
      fi
    done
    if [[ $mode == bulk ]] && ((cpu_mb > 0)); then
      echo "cost: $proto.$srv cpu ($(($(date +%s) - t_start)) s)" >&2
      run_cpu "$srv" "$proto" "$proto.$srv"
    fi
    if ((do_latency)) && [[ $mode == request ]]; then
      tag=$proto.$srv
      echo "cost: $tag latency ($(($(date +%s) - t_start)) s)" >&2
      start_server "$srv" "$proto" "$tag.lat" none
      run_latency "$srv" "$proto" "$tag"
      stop_server "$srv"
    fi
  done
done
elapsed=$(($(date +%s) - t_start))

# --- Report --------------------------------------------------------------------------------
versions="$("$petrel_bin" --version | head -1 | cut -d' ' -f1)"
for proto in "${proto_list[@]}"; do
  if [[ $proto == h3* ]]; then
    versions+="; gtlsserver $(dpkg-query -W -f '${Version}' ngtcp2-server 2>/dev/null || echo '?')"
  else
    versions+="; $("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //'); $(h2load --version)"
  fi
done
versions=$(tr ';' '\n' <<<"$versions" | sed 's/^ //' | awk '!seen[$0]++' | paste -sd';' | sed 's/;/; /g')
[[ -z $petrel_args ]] || versions="petrel-server flags: $petrel_args; $versions"
report=$work/report.md
python3 "$here/report.py" --dir "$work/data" --mode "$mode" --lo "$lo" --hi "$hi" \
  --protocols "$protocols" --servers "$servers" --h1-connections "$h1_conns" \
  --h2-connections "$h2_conns" \
  --h3-connections "$h3_conns" --h3-sequential "$h3_sequential" --workers "$petrel_workers" --streams "$streams" --latency-n "$lat_n" \
  --h3-latency-n "$h3_lat_n" --cpu-mb "$cpu_mb" --versions "$versions" --elapsed "$elapsed" \
  --date "$(date -u +%Y-%m-%dT%H:%MZ)" --machine "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)" \
  >"$report"
cat "$report"
if [[ -n $out_file ]]; then cp "$report" "$out_file"; fi
