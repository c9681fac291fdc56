#!/bin/bash
# Local QUIC interop runner: the interop runner's test cases without Docker.
#
#   interop/local/run.sh [--quick] [--cases LIST] [--pairings LIST] [--build DIR] [--out DIR]
#                        [--keep] [--negative] [--xfail LIST] [--timeout-scale F] [--seed N]
#
# Pairings (server-client): petrel-petrel, petrel-ngtcp2 (Petrel server x gtlsclient),
# ngtcp2-petrel (gtlsserver x Petrel client), petrel-quicgo (Petrel server x quic-go's interop
# client), quicgo-petrel (quic-go's interop server x Petrel client; it listens on port 443). Per case: fresh www/downloads/log dirs, random
# files of the runner's sizes, the server, petrel-netsim with the runner's scenario for the case,
# one tshark capture on lo for both legs, the client with a deadline, then a byte-for-byte
# compare and the runner's trace checks (checks.py). Prints a matrix; exits 1 when a case that is
# expected to pass (not unsupported, not skipped, not in --xfail) fails.
#
# --quick     the ctest subset: handshake transfer retry resumption zerortt http3 chacha20
#             keyupdate v2 rebind-port connectionmigration for petrel-petrel (v2 with the
#             provisional code point, PETREL_V2_DRAFT=1) and http3 for petrel-ngtcp2 and
#             ngtcp2-petrel, handshake transfer resumption http3 for petrel-quicgo and
#             quicgo-petrel, over a 5 ms / 1 % loss link without rate limit (rebind-port: no
#             loss, 10 Mbit/s, a 2 MB file, rebinding at 0.3 s and every 0.6 s; simulator seed
#             7, 20 s per client).
# --negative  negative controls that must come out ✕ *from the checks* (client succeeded, files
#             identical, trace check failed): retry against a server that never sends Retry
#             (SERVER_PARAMS="--retry never"), and handshake against a server that always does
#             (SERVER_PARAMS="--retry always"). Exit 0 only if every control failed as intended.
# --build DIR the one build dir everything comes from: DIR/src/quic/hq/petrel-hq-*,
#             DIR/src/server/petrel-server, DIR/src/tools/petrel-client,
#             DIR/interop/sim/petrel-netsim.
# --keep      keep pcaps / www / downloads of passing cases too (failing ones are always kept).
# --xfail L   comma list of pairing:case known to fail: reported ✕(xfail), not counted.
# --sim PATH  petrel-netsim from elsewhere (development only; default from --build).
# --workers N Petrel servers run with N worker threads (SERVER_PARAMS "--workers N"; the
#             default is each server's own: 0 for petrel-hq-server, one per core less one for
#             petrel-server).
# --timeout-scale F  multiplies the per-case client deadlines (slow / sanitizer builds).
# --seed N    simulator seed (default: random, fixed 7 with --quick); in each case's sim.log.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)

build=""
out=""
quick=0
keep=0
negative=0
cases_arg=""
pairings_arg=""
xfail=""
tscale=1
seed_arg=""
sim_arg=""
workers_arg=""

usage() { sed -n '2,/^set -uo/p' "$0" | sed 's/^# \{0,1\}//;/^set -uo/d' >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1 ;;
    --keep) keep=1 ;;
    --negative) negative=1 ;;
    --cases) cases_arg=$2; shift ;;
    --pairings) pairings_arg=$2; shift ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --xfail) xfail=$2; shift ;;
    --timeout-scale) tscale=$2; shift ;;
    --seed) seed_arg=$2; shift ;;
    --sim) sim_arg=$2; shift ;;
    --workers) workers_arg=$2; shift ;;
    -h|--help) usage ;;
    *) echo "run.sh: unknown argument $1" >&2; usage ;;
  esac
  shift
done

[[ -z $workers_arg || $workers_arg =~ ^[0-9]+$ ]] || { echo "run.sh: --workers wants a number" >&2; exit 2; }
[[ -n $build ]] || build="$src/build"
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run.sh: no build dir $build" >&2; exit 2; }
sim=${sim_arg:-$build/interop/sim/petrel-netsim}
endpoint="$src/interop/run_endpoint.sh"
ngtcp2_endpoint="$src/interop/local/peers/ngtcp2_endpoint.sh"
quicgo_endpoint="$src/interop/local/peers/quicgo_endpoint.sh"
quicgo_bin="$build/interop/local/peers"  # the quicgo-peers target's output
checks="$here/checks.py"
tshark=$(command -v tshark || echo /usr/bin/tshark)

if [[ -z $out ]]; then
  out=$(mktemp -d /tmp/petrel-interop.XXXXXX)
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin_dir="$out/bin"  # PETREL_BIN_DIR: links to the four Petrel binaries of --build
log() { printf '%s\n' "$*" | tee -a "$out/run.log" >&2; }

# ---------------------------------------------------------------------------------------------
# Test cases: the runner's list, with its file sizes, scenarios and per-role TESTCASE names.

all_cases="handshake transfer longrtt chacha20 multiplexing retry resumption zerortt http3
 blackhole keyupdate ecn amplificationlimit handshakeloss transferloss handshakecorruption
 transfercorruption ipv6 v2 rebind-port rebind-addr connectionmigration versionnegotiation"
quick_cases="handshake transfer retry resumption zerortt http3 chacha20 keyupdate v2 rebind-port
 connectionmigration"

KB=1024
MB=$((1024 * 1024))

# files CASE -> "COUNT:SIZE:NAMELEN ..." (the runner's generated files)
case_files() {
  if ((quick)) && [[ $1 == rebind-port ]]; then
    echo "1:$((2 * MB)):10"  # lasts about 2 s at the quick scenario's rate: three rebindings
    return
  fi
  case $1 in
    handshake|longrtt|v2|versionnegotiation) echo "1:$KB:10" ;;
    transfer) echo "1:$((2 * MB)):10 1:$((3 * MB)):10 1:$((5 * MB)):10" ;;
    chacha20|keyupdate) echo "1:$((3 * MB)):10" ;;
    multiplexing) echo "1999:32:10" ;;
    retry) echo "1:$((10 * KB)):10" ;;
    resumption|ipv6) echo "1:$((5 * KB)):10 1:$((10 * KB)):10" ;;
    zerortt) echo "40:32:250" ;;
    http3) echo "1:$((5 * KB)):10 1:$((10 * KB)):10 1:$((500 * KB)):10" ;;
    amplificationlimit) echo "1:$((5 * KB)):10" ;;
    blackhole|rebind-port|rebind-addr) echo "1:$((10 * MB)):10" ;;
    handshakeloss|handshakecorruption) echo "50:$KB:10" ;;
    transferloss|transfercorruption|connectionmigration) echo "1:$((2 * MB)):10" ;;
    ecn) echo "1:$((100 * KB)):10" ;;
  esac
}

# The runner's ns-3 scenario, as petrel-netsim flags (bursts of at most 3 drops or corruptions
# in a row, like the runner's --burst_to_*=3).
case_scenario() {
  local base="--delay-ms 15 --bandwidth-mbps 10 --queue 25"
  local bursts="--burst-to-server 3 --burst-to-client 3"
  if ((quick)); then
    # The quick subset checks behaviour, not performance: short delay, light loss, no rate cap.
    # rebind-port's transfer must last across several rebindings, and like the runner's rebind
    # scenarios it has no loss (a lost PATH_CHALLENGE stays unanswered and fails the check);
    # its queue is deep, so that no drop can take a challenge either.
    local q="--delay-ms 5 --loss-to-server 1 --loss-to-client 1"
    case $1 in
      rebind-port)
        echo "--delay-ms 5 --bandwidth-mbps 10 --queue 1000 --rebind port --first-rebind-ms 300" \
          "--rebind-every-ms 600"
        ;;
      *) echo "$q" ;;
    esac
    return
  fi
  case $1 in
    longrtt) echo "--delay-ms 750 --bandwidth-mbps 10 --queue 25" ;;
    amplificationlimit) echo "$base --drop-to-server-packets 2,3,4,5,6,7" ;;
    blackhole) echo "$base --blackhole-on-ms 5000 --blackhole-off-ms 2000" ;;
    handshakeloss) echo "$base --loss-to-server 30 --loss-to-client 30 $bursts" ;;
    transferloss) echo "$base --loss-to-server 2 --loss-to-client 2 $bursts" ;;
    handshakecorruption) echo "$base --corrupt-to-server 30 --corrupt-to-client 30 $bursts" ;;
    transfercorruption) echo "$base --corrupt-to-server 2 --corrupt-to-client 2 $bursts" ;;
    rebind-port) echo "$base --rebind port --first-rebind-ms 1000 --rebind-every-ms 5000" ;;
    rebind-addr) echo "$base --rebind addr --first-rebind-ms 1000 --rebind-every-ms 5000" ;;
    *) echo "$base" ;;
  esac
}

# TESTCASE as the runner hands it to each role.
testname() {  # CASE ROLE
  local c=$1 role=$2
  case $c in
    multiplexing|amplificationlimit|blackhole|transferloss|transfercorruption|rebind-port|\
    rebind-addr|ipv6) echo transfer ;;
    longrtt) echo handshake ;;
    handshakeloss|handshakecorruption) echo multiconnect ;;
    keyupdate) [[ $role == client ]] && echo keyupdate || echo transfer ;;
    connectionmigration) [[ $role == server ]] && echo connectionmigration || echo transfer ;;
    *) echo "$c" ;;
  esac
}

case_timeout() {
  local t=60
  case $1 in
    handshakeloss|handshakecorruption) t=300 ;;
  esac
  ((quick)) && t=20
  awk -v t="$t" -v s="$tscale" 'BEGIN { printf "%d", t * s }'
}

# ---------------------------------------------------------------------------------------------
# Helpers.

now_ms() { date +%s%3N; }

# wait_until DEADLINE_MS CMD...: polls CMD every 50 ms until it succeeds or the deadline passes.
wait_until() {
  local deadline=$1
  shift
  while (($(now_ms) < deadline)); do
    "$@" && return 0
    sleep 0.05
  done
  "$@"
}

alive() { kill -0 "$1" 2>/dev/null; }
dead() { ! kill -0 "$1" 2>/dev/null; }

# stop PID SIGNAL SECONDS: signals the process group PID leads, waits up to SECONDS, then
# SIGKILLs it. Returns the exit status (or 128+signal).
stop_group() {
  local pid=$1 sig=$2 secs=$3
  if alive "$pid"; then
    kill "-$sig" -- "-$pid" 2>/dev/null || kill "-$sig" "$pid" 2>/dev/null
    if ! wait_until $(($(now_ms) + secs * 1000)) dead "$pid"; then
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    fi
  fi
  wait "$pid" 2>/dev/null
}

udp_bound() {  # HOST PORT: a UDP socket is bound to the port
  ss -Hulnp "sport = :$2" 2>/dev/null | grep -q .
}

free_udp_port() {  # HOST
  python3 - "$1" <<'PY'
import socket, sys
host = sys.argv[1]
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
for _ in range(50):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    # Keep clear of the ports helpers and docker setups use and of 443/4433.
    if port not in (443, 4433):
        print(port)
        break
PY
}

gen_files() {  # CASE DIR: writes the case's random files; prints the relative names
  # shellcheck disable=SC2046  # one argument per file spec, on purpose
  python3 - "$2" $(case_files "$1") <<'PY'
import os, random, string, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rnd = random.SystemRandom()
names = set()
for spec in sys.argv[2:]:
    count, size, namelen = (int(x) for x in spec.split(":"))
    for _ in range(count):
        while True:
            n = "".join(rnd.choice(string.ascii_lowercase) for _ in range(namelen))
            if n not in names:
                break
        names.add(n)
        with open(os.path.join(d, n), "wb") as f:
            left = size
            while left:
                chunk = os.urandom(min(left, 1 << 20))
                f.write(chunk)
                left -= len(chunk)
        print(n)
PY
}

# ---------------------------------------------------------------------------------------------
# Preconditions.

prepare_bins() {
  mkdir -p "$bin_dir"
  local b
  for b in src/quic/hq/petrel-hq-server src/quic/hq/petrel-hq-client src/server/petrel-server \
    src/tools/petrel-client; do
    if [[ -x $build/$b ]]; then
      ln -sf "$build/$b" "$bin_dir/$(basename "$b")"
    fi
  done
}

precheck() {  # -> sets global skip reasons
  global_skip=""
  [[ -x $tshark ]] || global_skip="tshark not installed"
  [[ -x $sim ]] || global_skip="${global_skip:+$global_skip; }no petrel-netsim at $sim (build target petrel-netsim)"
  [[ -f $endpoint ]] || global_skip="${global_skip:+$global_skip; }no endpoint script $endpoint"
  [[ -x $build/src/quic/hq/petrel-hq-server ]] ||
    global_skip="${global_skip:+$global_skip; }no petrel-hq-server in $build"
  if [[ $(id -u) != 0 ]] && ! dumpcap -D >/dev/null 2>&1; then
    global_skip="${global_skip:+$global_skip; }cannot capture on lo (not root / no capture rights)"
  fi
}

pairing_skip() {  # PAIRING -> reason or empty
  case $1 in
    petrel-petrel) ;;
    petrel-ngtcp2)
      [[ -x /usr/bin/gtlsclient ]] || { echo "gtlsclient not installed"; return; }
      [[ -f $ngtcp2_endpoint ]] || { echo "no $ngtcp2_endpoint"; return; } ;;
    ngtcp2-petrel)
      [[ -x /usr/sbin/gtlsserver ]] || { echo "gtlsserver not installed"; return; }
      [[ -f $ngtcp2_endpoint ]] || { echo "no $ngtcp2_endpoint"; return; } ;;
    petrel-quicgo | quicgo-petrel)
      local b=quicgo-client
      [[ $1 == quicgo-petrel ]] && b=quicgo-server
      [[ -x $quicgo_bin/$b ]] ||
        { echo "no $quicgo_bin/$b (golang-go + golang-github-lucas-clemente-quic-go-dev, target quicgo-peers)"; return; }
      # The endpoint chroots into a private mount namespace.
      [[ $(id -u) == 0 ]] || { echo "quic-go's endpoints need root (mount namespace, chroot)"; return; }
      if [[ $1 == quicgo-petrel ]] && udp_bound 127.0.0.1 443; then
        echo "UDP port 443 is taken (quic-go's server listens there)"; return
      fi ;;
    *) echo "unknown pairing" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# One test case.

declare -A result  # "pairing case" -> symbol
declare -A reason

# run_case PAIRING CASE [SERVER_PARAMS] -> sets result/reason; returns 0
run_case() {
  local pairing=$1 case=$2 sparams=${3:-} tag=${4:-}
  [[ -n $workers_arg && ${pairing%%-*} == petrel ]] && sparams+="${sparams:+ }--workers $workers_arg"
  local key="$pairing $case$tag"
  local dir="$out/$pairing/$case$tag"
  rm -rf "$dir"
  mkdir -p "$dir/www" "$dir/downloads" "$dir/qlog-server" "$dir/qlog-client"
  local srv_impl=${pairing%%-*} cli_impl=${pairing##*-}
  local srv_script=$endpoint cli_script=$endpoint
  [[ $srv_impl == ngtcp2 ]] && srv_script=$ngtcp2_endpoint
  [[ $cli_impl == ngtcp2 ]] && cli_script=$ngtcp2_endpoint
  [[ $srv_impl == quicgo ]] && srv_script=$quicgo_endpoint
  [[ $cli_impl == quicgo ]] && cli_script=$quicgo_endpoint

  local certs="$out/certs1"
  [[ $case == amplificationlimit ]] && certs="$out/certs9"

  local host=127.0.0.1 url_host=127.0.0.1
  if [[ $case == ipv6 ]]; then host=::1; url_host="[::1]"; fi
  local hostport_fmt="$host:%s"
  [[ $case == ipv6 ]] && hostport_fmt="[::1]:%s"

  local sport pport=""
  sport=$(free_udp_port "$host")
  [[ $srv_impl == quicgo ]] && sport=443  # quic-go's interop server listens on :443 only
  if [[ $case == connectionmigration ]]; then
    pport=$(free_udp_port "$host")
    while [[ $pport == "$sport" ]]; do pport=$(free_udp_port "$host"); done
  fi

  gen_files "$case" "$dir/www" >"$dir/files.txt"

  # Environment shared by both roles (the endpoint contract).
  local -a common=(PETREL_BIN_DIR="$bin_dir" PETREL_NO_WAIT=1 CERTS="$certs"
    QUICGO_BIN_DIR="$quicgo_bin")
  # gtlsserver / gtlsclient speak HTTP/3 only; quic-go, like Petrel, hq-interop but for http3.
  [[ $pairing == *ngtcp2* ]] && common+=(PETREL_ALPN=h3)
  # ngtcp2 0.12.1 (under Petrel and the gtls peers) only speaks the provisional v2 code point.
  [[ $case == v2 ]] && common+=(PETREL_V2_DRAFT=1)

  local slisten
  # shellcheck disable=SC2059
  slisten=$(printf "$hostport_fmt" "$sport")
  local -a senv=(ROLE=server TESTCASE="$(testname "$case" server)" WWW="$dir/www"
    SSLKEYLOGFILE="$dir/server.keys" QLOGDIR="$dir/qlog-server" SERVER_LISTEN="$slisten"
    SERVER_PARAMS="$sparams")
  # shellcheck disable=SC2059
  [[ -n $pport ]] && senv+=(PREFERRED_ADDRESS="$(printf "$hostport_fmt" "$pport")")

  setsid env "${common[@]}" "${senv[@]}" bash "$srv_script" >"$dir/server.log" 2>&1 &
  local spid=$!
  # Ready = the server's UDP port is bound (or it exited: 127 = unsupported).
  wait_until $(($(now_ms) + 15000)) bash -c "! kill -0 $spid 2>/dev/null || ss -Huln 'sport = :$sport' | grep -q ." 
  if dead "$spid"; then
    wait "$spid"
    local rc=$?
    if ((rc == 127)); then
      result[$key]=unsupported
      reason[$key]="server: TESTCASE $(testname "$case" server) unsupported (127)"
    else
      result[$key]="✕"
      reason[$key]="server exited $rc at start: $(tail -n 2 "$dir/server.log" | tr '\n' ' ')"
    fi
    return 0
  fi
  if ! udp_bound "$host" "$sport"; then
    stop_group "$spid" TERM 5
    result[$key]="✕"
    reason[$key]="server did not bind UDP port $sport within 15 s"
    return 0
  fi

  # The simulator in front of the server.
  local tmo
  tmo=$(case_timeout "$case")
  local seed=${seed_arg:-$RANDOM$RANDOM}
  ((quick)) && [[ -z $seed_arg ]] && seed=7
  local -a simargs
  read -r -a simargs <<<"$(case_scenario "$case")"
  # shellcheck disable=SC2059
  setsid "$sim" --listen "$(printf "$hostport_fmt" 0)" --server "$slisten" "${simargs[@]}" \
    --seed "$seed" --ready-file "$dir/sim.ready" --stats-file "$dir/sim.stats.json" \
    --max-seconds $((tmo + 60)) >"$dir/sim.log" 2>&1 &
  local simpid=$!
  wait_until $(($(now_ms) + 10000)) bash -c "! kill -0 $simpid 2>/dev/null || [[ -s '$dir/sim.ready' ]]"
  local lport=""
  [[ -s $dir/sim.ready ]] && lport=$(grep -o '[0-9]\+' "$dir/sim.ready" | tail -n 1)
  if [[ -z $lport ]] || dead "$simpid"; then
    stop_group "$spid" TERM 5
    stop_group "$simpid" TERM 2
    result[$key]="✕"
    reason[$key]="petrel-netsim did not become ready: $(tail -n 2 "$dir/sim.log" | tr '\n' ' ')"
    return 0
  fi

  # One capture on lo for both legs. tshark's "Capturing on" line comes before the capture is
  # really live, so readiness = a probe datagram (to a port nobody listens on, also in the
  # filter) has reached the file.
  local qport
  qport=$(free_udp_port "$host")
  local filter="udp port $lport or udp port $sport or udp port $qport"
  [[ -n $pport ]] && filter+=" or udp port $pport"
  setsid "$tshark" -i lo -f "$filter" -B 64 -F pcap -w "$dir/trace.pcap" -q \
    >"$dir/tshark.log" 2>&1 &
  local tpid=$!
  local probe_deadline=$(($(now_ms) + 20000))
  while (($(now_ms) < probe_deadline)) && alive "$tpid"; do
    echo probe 2>/dev/null >"/dev/udp/$host/$qport"
    (($(stat -c %s "$dir/trace.pcap" 2>/dev/null || echo 0) > 24)) && break
    sleep 0.05
  done
  if (($(stat -c %s "$dir/trace.pcap" 2>/dev/null || echo 0) <= 24)); then
    stop_group "$spid" TERM 5
    stop_group "$simpid" TERM 2
    stop_group "$tpid" INT 5
    result[$key]="✕"
    reason[$key]="tshark capture not live within 20 s: $(tail -n 2 "$dir/tshark.log" | tr '\n' ' ')"
    return 0
  fi

  # The client, bounded by the case's timeout.
  local reqs="" f
  while read -r f; do reqs+="https://$url_host:$lport/$f "; done <"$dir/files.txt"
  local -a cenv=(ROLE=client TESTCASE="$(testname "$case" client)" REQUESTS="${reqs% }"
    DOWNLOADS="$dir/downloads" SSLKEYLOGFILE="$dir/client.keys" QLOGDIR="$dir/qlog-client")
  local c0
  c0=$(now_ms)
  setsid env "${common[@]}" "${cenv[@]}" bash "$cli_script" >"$dir/client.log" 2>&1 &
  local cpid=$!
  local crc
  if wait_until $((c0 + tmo * 1000)) dead "$cpid"; then
    wait "$cpid"
    crc=$?
  else
    stop_group "$cpid" KILL 2
    crc=124
  fi
  local c1
  c1=$(now_ms)

  # Stop everything; the capture last so the closing packets are in it.
  local src_alive=0
  alive "$spid" && src_alive=1
  stop_group "$spid" TERM 5
  local srv_rc=$?
  stop_group "$simpid" TERM 3
  sleep 0.2  # lets tshark's ring drain the last datagrams before SIGINT
  stop_group "$tpid" INT 10
  local secs
  secs=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
  grep -i "dropped" "$dir/tshark.log" | grep -v " 0 packets dropped\|dropped 0" >"$dir/tshark.drops" || true

  if ((crc == 127)); then
    result[$key]=unsupported
    reason[$key]="client: TESTCASE $(testname "$case" client) unsupported (127)"
    return 0
  fi
  if ((crc != 0)); then
    result[$key]="✕"
    if ((crc == 124)); then
      reason[$key]="client timed out after ${tmo}s"
    else
      reason[$key]="client exited $crc: $(grep -v '^$' "$dir/client.log" | tail -n 2 | tr '\n' ' ' | cut -c1-200)"
    fi
    ((src_alive)) || reason[$key]+=" (server had exited: $srv_rc)"
    return 0
  fi
  if ((!src_alive)); then
    result[$key]="✕"
    reason[$key]="server exited ($srv_rc) before the client finished: $(tail -n 1 "$dir/server.log")"
    return 0
  fi

  local -a cargs=(--case "$case" --pcap "$dir/trace.pcap" --keylog "$dir/client.keys"
    --keylog "$dir/server.keys" --www "$dir/www" --downloads "$dir/downloads"
    --client-ports "$lport${pport:+,$pport}" --server-ports "$sport${pport:+,$pport}"
    --tshark "$tshark" --work "$dir/checks" --json-out "$dir/checks.json")
  [[ -n $pport ]] && cargs+=(--preferred-ports "$pport")
  [[ $case == v2 ]] && cargs+=(--v2-draft)
  python3 "$checks" "${cargs[@]}" >"$dir/checks.log" 2>&1
  local chrc=$?
  local last
  last=$(tail -n 1 "$dir/checks.log")
  case $chrc in
    0) result[$key]="✓"; reason[$key]="${secs}s; ${last#PASS "$case": }" ;;
    3) result[$key]=unsupported; reason[$key]="${last#UNSUPPORTED "$case": }" ;;
    *) result[$key]="✕"; reason[$key]="${last#* "$case": }"
      [[ -s $dir/tshark.drops ]] && reason[$key]+=" [capture: $(head -n 1 "$dir/tshark.drops")]" ;;
  esac
  if [[ ${result[$key]} == "✓" ]] && ((!keep)); then
    rm -rf "$dir/www" "$dir/downloads" "$dir/checks" "$dir/trace.pcap"
  fi
  return 0
}

# ---------------------------------------------------------------------------------------------
# Main.

precheck
prepare_bins

if ((negative)); then
  pairings="petrel-petrel"
  if [[ -n $global_skip ]]; then
    log "SKIPPED negative controls: $global_skip"
    exit 77
  fi
  quick=1
  "$here/certs.sh" "$out/certs1" 1 >/dev/null || { log "certs.sh failed"; exit 2; }
  ok=1
  run_case petrel-petrel retry "--retry never" "-negative"
  run_case petrel-petrel handshake "--retry always" "-negative"
  for k in "petrel-petrel retry-negative" "petrel-petrel handshake-negative"; do
    r=${result[$k]} why=${reason[$k]}
    d="$out/${k// //}"
    # Intended: the client succeeded and the *trace check* failed.
    if [[ $r == "✕" && -s $d/checks.log ]] && grep -q "^FAIL " "$d/checks.log"; then
      log "negative control $k: ✕ as intended — $why"
    else
      log "negative control $k: NOT rejected by the checks ($r: $why)"
      ok=0
    fi
  done
  log "output in $out"
  ((ok)) && exit 0
  exit 1
fi

# A word list (spaces and newlines) as a comma list.
csv() { printf '%s' "$1" | tr -s ' \n' ','; }
if ((quick)); then
  : "${cases_arg:=$(csv "$quick_cases")}"
fi
cases=${cases_arg:-$(csv "$all_cases")}
pairings=${pairings_arg:-petrel-petrel,petrel-ngtcp2,ngtcp2-petrel,petrel-quicgo,quicgo-petrel}
IFS=, read -r -a case_list <<<"$cases"
IFS=, read -r -a pairing_list <<<"$pairings"

for c in "${case_list[@]}"; do
  if [[ -z $(case_files "$c") ]]; then echo "run.sh: unknown case $c" >&2; exit 2; fi
done

log "Petrel local interop run $(date -u +%FT%TZ): build=$build out=$out quick=$quick workers=${workers_arg:-default}"
log "cases: ${case_list[*]}"
log "pairings: ${pairing_list[*]}"

if [[ -z $global_skip ]]; then
  "$here/certs.sh" "$out/certs1" 1 >/dev/null || global_skip="certs.sh failed"
  if [[ " ${case_list[*]} " == *" amplificationlimit "* ]]; then
    "$here/certs.sh" "$out/certs9" 9 >/dev/null || global_skip="certs.sh (chain 9) failed"
  fi
fi

failures=0
for p in "${pairing_list[@]}"; do
  pskip=$(pairing_skip "$p")
  for c in "${case_list[@]}"; do
    key="$p $c"
    if [[ -n $global_skip ]]; then
      result[$key]="skipped"; reason[$key]=$global_skip
    elif [[ -n $pskip ]]; then
      result[$key]="skipped"; reason[$key]=$pskip
    elif ((quick)) && [[ $p == *ngtcp2* && $c != http3 ]]; then
      result[$key]="skipped"; reason[$key]="quick subset: only http3 with the ngtcp2 peers"
    elif ((quick)) && [[ $p == *quicgo* && " handshake transfer resumption http3 " != *" $c "* ]]; then
      result[$key]="skipped"; reason[$key]="quick subset: handshake transfer resumption http3 with quic-go"
    else
      run_case "$p" "$c"
    fi
    r=${result[$key]}
    if [[ $r == "✕" && ",$xfail," == *",$p:$c,"* ]]; then
      r="✕(xfail)"; result[$key]=$r
    fi
    [[ $r == "✕" ]] && failures=$((failures + 1))
    log "[$p] $c: $r — ${reason[$key]}"
  done
done

# The matrix: one row per case, one column per pairing; reasons below.
{
  printf '| case |'
  for p in "${pairing_list[@]}"; do printf ' %s |' "$p"; done
  printf '\n|---|'
  for p in "${pairing_list[@]}"; do printf -- '---|'; done
  printf '\n'
  for c in "${case_list[@]}"; do
    printf '| %s |' "$c"
    for p in "${pairing_list[@]}"; do printf ' %s |' "${result[$p $c]}"; done
    printf '\n'
  done
  printf '\n'
  for p in "${pairing_list[@]}"; do
    for c in "${case_list[@]}"; do
      printf -- '- %s / %s: %s — %s\n' "$p" "$c" "${result[$p $c]}" "${reason[$p $c]}"
    done
  done
} >"$out/matrix.md"
cat "$out/matrix.md"
log "output in $out ($failures unexpected failure(s))"
if [[ -n $global_skip ]]; then
  log "SKIPPED: $global_skip"
  exit 77  # ctest SKIP_RETURN_CODE: nothing could run on this machine
fi
((failures == 0))
