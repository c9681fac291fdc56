#!/usr/bin/env bash
# petrel-server as an operator meets it: started with no arguments (demo site, 8443 TLS + UDP,
# 8080 cleartext, a self-signed certificate made once in the state directory and then reused),
# checked with curl (h1, h2, h2c with the certificate trusted), gtlsclient (h3), Alt-Svc and
# /echo; every bad configuration refused with a message naming its key; a config file; --retry
# always (a Retry on the wire) and never; metrics and the access log through the binary; and
# SIGTERM during 100 MB h2 and h3 downloads: each download either completes byte-exact or
# fails visibly (never a truncated success), and the server exits 0.
# Usage: petrel_server_product.sh PETREL-SERVER PETREL-CLIENT
set -euo pipefail
# The no-argument start takes the embedded default ports (8443, 8080), which any other
# petrel-server on the machine may hold (another checkout's test run, a developer's
# run-server.sh): that collision failed this test once. It runs in a private network namespace
# with its own loopback when the kernel allows one.
# shellcheck source=private_netns.sh
source "$(dirname "$0")/private_netns.sh" "$0" "$@"
bin="$1"
client="$2"
work="$(mktemp -d /tmp/petrel-product-XXXXXX)"
export PETREL_STATE_DIR="$work/state"
# shellcheck source=server_test_lib.sh
source "$(dirname "$0")/server_test_lib.sh"
# ---- Bad configurations: refused at start, exit 2, the message names the key ----
refuse() {  # refuse EXPECTED-TEXT ARGS...
  local want=$1
  shift
  local rc=0 out
  out="$("$bin" "$@" 2>&1)" || rc=$?
  [[ $rc -eq 2 ]] || fail "'$*' gave exit $rc, want 2"
  [[ "$out" == *"$want"* ]] || fail "'$*': message '$out' lacks '$want'"
}
refuse "--https-port" --https-port 70000
refuse "--http-port" --http-port -1
refuse "--workers" --workers many
refuse "--handshake-timeout" --handshake-timeout -1
refuse "--cc" --cc fastest
refuse "--retry" --retry sometimes
refuse "--log-level" --log-level loud
refuse "--access-log" --access-log xml
refuse "--metrics-listen" --metrics-listen nowhere
refuse "--listen" --listen not-an-address
refuse "--key" --cert "$work/cert.pem"
refuse "--max-header-bytes" --max-header-bytes 10
refuse "--bogus" --bogus
refuse "nothing to serve" --https-port 0 --http-port 0
printf '# comment\nhttps-port = 8443\ncongestion = fast\n' >"$work/bad.conf"
refuse "bad.conf:3: congestion: unknown key" --config "$work/bad.conf"
printf 'cc = fastest\n' >"$work/bad2.conf"
refuse "--cc" --config "$work/bad2.conf"
grep -q -- "--metrics-listen" <<<"$("$bin" --help)" || fail "--help lacks --metrics-listen"

# ---- No arguments: the embedded defaults ----
start
grep -q "created self-signed certificate $PETREL_STATE_DIR/cert.pem" "$work/log" ||
  fail "no certificate line"
ca="--cacert $PETREL_STATE_DIR/cert.pem"
fingerprint="$(sha256sum "$PETREL_STATE_DIR/cert.pem")"
check() {  # check CURL-FLAGS URL EXPECTED
  local out
  out="$(curl -sS --max-time 20 $1 "$2")" || fail "curl $1 $2"
  [[ "$out" == *"$3"* ]] || fail "curl $1 $2: got '$out'"
}
check "$ca --http1.1" "https://localhost:8443/hello" "hello from petrel"
check "$ca --http2" "https://localhost:8443/" "came over <strong id=\"protocol\">HTTP/2</strong>"
check "$ca --http1.1" "https://localhost:8443/" "HTTP/1.1"
check "--http2-prior-knowledge" "http://127.0.0.1:8080/" "HTTP/2"
check "--http1.1" "http://127.0.0.1:8080/hello" "hello from petrel"
check "$ca --http2 -o /dev/null -D -" "https://localhost:8443/hello" 'alt-svc: h3=":8443"; ma=86400'
check "$ca --http1.1 -o /dev/null -D -" "https://localhost:8443/hello" 'alt-svc: h3=":8443"; ma=86400'
# An http origin cannot use h3 (RFC 9114, 3.1.2): cleartext responses advertise nothing.
head="$(curl -sS --max-time 20 --http1.1 -o /dev/null -D - http://127.0.0.1:8080/hello)" ||
  fail "curl http://127.0.0.1:8080/hello"
[[ "${head,,}" != *alt-svc* ]] || fail "a cleartext response advertises h3: $head"
check "$ca --http2 -d petrel-echo" "https://localhost:8443/echo" "petrel-echo"
[[ "$(curl -sS $ca https://localhost:8443/files/1m.bin | sha256sum | cut -d' ' -f1)" == \
   "$(demo_sha 1048576)" ]] || fail "/files/1m.bin over h2"
if [[ -x /usr/bin/gtlsclient ]]; then
  mkdir -p "$work/dl"
  timeout 30 gtlsclient -q --exit-on-all-streams-close --download "$work/dl" 127.0.0.1 8443 \
    https://localhost:8443/ https://localhost:8443/files/1m.bin >/dev/null 2>&1 || fail "gtlsclient"
  grep -q 'protocol">HTTP/3' "$work/dl/index.html" 2>/dev/null ||
    grep -q 'protocol">HTTP/3' "$work/dl/"* || fail "h3 index page"
  [[ "$(sha256sum <"$work/dl/1m.bin" | cut -d' ' -f1)" == "$(demo_sha 1048576)" ]] ||
    fail "h3 1m.bin"
fi
stop
# A second start reuses the certificate.
start
grep -q "using the self-signed certificate" "$work/log" || fail "certificate not reused"
[[ "$(sha256sum "$PETREL_STATE_DIR/cert.pem")" == "$fingerprint" ]] || fail "certificate changed"
stop
# A listener turned off is named as off, not as port 0.
start --http-port 0
grep -q "listening on 127.0.0.1, \[::1\]: http off, https 8443 (h1, h2, h3 on UDP), demo site" \
  "$work/log" || fail "start line with --http-port 0: $(grep 'listening on' "$work/log")"
stop

# ---- Threads: one worker per core the process may run on, less one ----
# nproc counts the cores of this shell's CPU affinity, as the server is to.
cores="$(nproc)"
if [[ "$cores" -ge 2 ]]; then
  quic="QUIC master \\+ $((cores - 1)) workers?"
  loops="$((cores - 1)) TCP loops?"
else
  quic="QUIC on one loop"
  loops="1 TCP loop"
fi
start
grep -qE "petrel-server: threads: $loops, $quic \\($cores usable cores?\\)\$" "$work/log" ||
  fail "threads on $cores cores: $(grep 'threads:' "$work/log")"
stop
# Without HTTP/3 the line says nothing of QUIC: no QUIC thread runs.
start --no-h3
grep -qE "petrel-server: threads: $loops \\($cores usable cores?\\)\$" "$work/log" ||
  fail "threads without h3: $(grep 'threads:' "$work/log")"
stop
if [[ "$cores" -ge 2 ]] && command -v taskset >/dev/null; then
  # Started on one core (taskset, a container's cpuset), it runs a single loop: a master and a
  # worker squeezed onto one core would trade every datagram through a context switch.
  mask="$(taskset -p $$ | awk '{print $NF}')"
  taskset -p -c 0 $$ >/dev/null
  start
  taskset -p "$mask" $$ >/dev/null
  grep -qx "petrel-server: threads: 1 TCP loop, QUIC on one loop (1 usable core)" "$work/log" ||
    fail "threads on one core: $(grep 'threads:' "$work/log")"
  check_one_core="$(curl -sS --max-time 20 --cacert "$PETREL_STATE_DIR/cert.pem" \
    https://localhost:8443/hello)" || fail "curl on one core"
  [[ "$check_one_core" == *"hello from petrel"* ]] || fail "one core: $check_one_core"
  stop
fi

# ---- Listen addresses ----
# The default is loopback on both families: localhost works whichever one it resolves to.
start
check "$ca -6" "https://localhost:8443/hello" "hello from petrel"
check "$ca -4" "https://localhost:8443/hello" "hello from petrel"
check "-g --http1.1" "http://[::1]:8080/hello" "hello from petrel"
h3_hello() {  # h3_hello IP: /hello over HTTP/3 from gtlsclient to IP:8443
  [[ -x /usr/bin/gtlsclient ]] || return 0
  rm -rf "$work/dl3" && mkdir -p "$work/dl3"
  timeout 30 gtlsclient -q --exit-on-all-streams-close --download "$work/dl3" "$1" 8443 \
    https://localhost:8443/hello >/dev/null 2>&1 || fail "gtlsclient to $1"
  grep -q "hello from petrel" "$work/dl3/hello" || fail "h3 /hello from $1"
}
h3_hello ::1
h3_hello 127.0.0.1
stop
# Repeated and comma-separated; ADDR:PORT serves that port only.
start --listen 127.0.0.1:8443 --listen '[::1]:8443,[::1]:8080'
check "$ca --http2" "https://localhost:8443/hello" "hello from petrel"
check "-g --http1.1" "http://[::1]:8080/hello" "hello from petrel"
curl -sS --max-time 5 http://127.0.0.1:8080/hello >/dev/null 2>&1 &&
  fail "127.0.0.1:8080 answered, but only [::1]:8080 was asked for"
h3_hello ::1
stop
# In a config file, listen repeats too; the command line's replace the file's.
read -r p4 p5 < <(python3 "$(dirname "$0")/../support/server_ports.py" 2)
printf 'listen = 127.0.0.1\nlisten = [::1]:%s\nhttps-port = %s\nhttp-port = %s\n' "$p4" "$p4" "$p5" \
  >"$work/listen.conf"
start --config "$work/listen.conf"
check "-g -k --http2" "https://[::1]:$p4/hello" "hello from petrel"
check "--http1.1" "http://127.0.0.1:$p5/hello" "hello from petrel"
curl -sS -g --max-time 5 "http://[::1]:$p5/hello" >/dev/null 2>&1 &&
  fail "[::1]:$p5 answered, but the config file gave ::1 the https port only"
stop
start --config "$work/listen.conf" --listen 127.0.0.1
curl -sS -g -k --max-time 5 "https://[::1]:$p4/hello" >/dev/null 2>&1 &&
  fail "[::1]:$p4 answered, but --listen 127.0.0.1 replaces the config file's addresses"
stop
refuse "--listen: 'localhost'" --listen localhost
refuse "port 9999 is neither" --listen 127.0.0.1:9999
# '::' with --no-ipv6-only takes IPv4 too: TCP and QUIC (IPv4-mapped, replies from the right
# source through IPV6_PKTINFO). Only inside the private namespace: '::' is every interface.
if [[ "$PETREL_TEST_NETNS" == active ]]; then
  start --listen '::' --no-ipv6-only
  check "$ca -4" "https://localhost:8443/hello" "hello from petrel"
  check "--http1.1" "http://127.0.0.1:8080/hello" "hello from petrel"
  check "-g --http1.1" "http://[::1]:8080/hello" "hello from petrel"
  h3_hello 127.0.0.1
  h3_hello ::1
  stop
  echo "ok: '::' with --no-ipv6-only serves IPv4 and IPv6 over TCP and QUIC"
else
  echo "note: the '::' check needs a private network namespace; skipped" >&2
fi

# ---- A config file with the same keys; the command line overrides it ----
read -r p1 p2 < <(python3 "$(dirname "$0")/../support/server_ports.py" 2)
printf 'https_port = 1\nhttp-port = %s\nworkers = 2\ngrace = 30\n' "$p2" >"$work/good.conf"
start --config "$work/good.conf" --https-port "$p1"
check "$ca --http2" "https://localhost:$p1/hello" "hello from petrel"
check "--http1.1" "http://127.0.0.1:$p2/hello" "hello from petrel"

# ---- --retry always: every new client is sent a Retry first (gtlsclient's log shows it) ----
if [[ -x /usr/bin/gtlsclient ]]; then
  for policy in never always; do
    stop
    start --config "$work/good.conf" --https-port "$p1" --retry "$policy"
    timeout 30 gtlsclient --exit-on-all-streams-close 127.0.0.1 "$p1" \
      "https://localhost:$p1/hello" >"$work/retry.log" 2>&1 || fail "gtlsclient --retry $policy"
    if [[ $policy == always ]]; then
      grep -q "type=Retry" "$work/retry.log" || fail "--retry always sent no Retry"
    else
      if grep -q "type=Retry" "$work/retry.log"; then fail "--retry never sent a Retry"; fi
    fi
  done
fi

# ---- Metrics on the admin address and the access log ----
read -r p3 < <(python3 "$(dirname "$0")/../support/server_ports.py")
stop
start --config "$work/good.conf" --https-port "$p1" --metrics-listen "127.0.0.1:$p3" \
  --access-log json --access-log-file "$work/access.log"
metric() {  # metric NAME-AND-LABELS: the value on the admin address, 0 if absent
  curl -sS "http://127.0.0.1:$p3/metrics" | awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }'
}
before="$(metric 'petrel_http_requests_total{protocol="h2"}')"
for _ in 1 2 3; do check "$ca --http2" "https://localhost:$p1/hello" "hello from petrel"; done
after="$(metric 'petrel_http_requests_total{protocol="h2"}')"
python3 -c "import sys; sys.exit(0 if float('$after') - float('$before') == 3 else 1)" ||
  fail "h2 request counter went $before -> $after, want +3"
[[ "$(curl -s -o /dev/null -w '%{http_code}' $ca "https://localhost:$p1/metrics")" == 404 ]] ||
  fail "/metrics must not be served on the public port"
python3 - "$work/access.log" <<'PY' || fail "access log"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
hello = [l for l in lines if "/hello" in json.dumps(l)]
assert len(hello) >= 3, lines
assert all("HTTP/2" in json.dumps(l) and "200" in json.dumps(l) for l in hello), hello
PY

# ---- SIGTERM during 100 MB downloads ----
want100="$(demo_sha 104857600)"
# (a) grace 30 s: both downloads (h2 rate-limited to take ~4 s, h3) finish byte-exact.
curl -sS $ca --http2 --limit-rate 25M -o "$work/h2.bin" "https://localhost:$p1/files/100m.bin" \
  2>"$work/h2.err" &
h2_pid=$!
"$client" --cacert "$PETREL_STATE_DIR/cert.pem" --timeout 60 -o "$work/h3.bin" \
  "https://localhost:$p1/files/100m.bin" 2>"$work/h3.err" &
h3_pid=$!
for _ in $(seq 1 400); do  # until both have bytes
  [[ -s "$work/h2.bin" && -s "$work/h3.bin" ]] && break
  sleep 0.025
done
[[ -s "$work/h2.bin" ]] || fail "h2 download did not start"
kill -TERM "$server_pid"
h2_rc=0; wait "$h2_pid" || h2_rc=$?
h3_rc=0; wait "$h3_pid" || h3_rc=$?
[[ $h2_rc -eq 0 ]] || fail "h2 download during graceful stop: curl exit $h2_rc $(cat "$work/h2.err")"
[[ "$(sha256sum <"$work/h2.bin" | cut -d' ' -f1)" == "$want100" ]] || fail "h2 download differs"
if [[ $h3_rc -eq 0 ]]; then
  [[ "$(sha256sum <"$work/h3.bin" | cut -d' ' -f1)" == "$want100" ]] || fail "h3 download differs"
elif ! grep -q "GOAWAY\|refused\|H3_REQUEST_REJECTED" "$work/h3.err"; then
  # Refused before it started (GOAWAY) is clean; anything else is not.
  fail "h3 download during graceful stop: exit $h3_rc $(cat "$work/h3.err")"
fi
rc=0
timeout 40 tail --pid="$server_pid" -f /dev/null || fail "server did not stop"
wait "$server_pid" || rc=$?
server_pid=""
[[ $rc -eq 0 ]] || fail "server exit status $rc after graceful stop"

# (b) grace 1 s against a download that needs ~10 s: cut, and visibly so — curl must fail
# (never a complete-looking transfer of fewer bytes).
start --config "$work/good.conf" --https-port "$p1" --grace 1
curl -sS $ca --http2 --limit-rate 10M -o "$work/h2cut.bin" \
  "https://localhost:$p1/files/100m.bin" 2>"$work/h2cut.err" &
h2_pid=$!
wait_nonempty "$work/h2cut.bin"
kill -TERM "$server_pid"
h2_rc=0; wait "$h2_pid" || h2_rc=$?
size=$(stat -c %s "$work/h2cut.bin")
if [[ $h2_rc -eq 0 ]]; then
  [[ "$(sha256sum <"$work/h2cut.bin" | cut -d' ' -f1)" == "$want100" ]] ||
    fail "a cut h2 download looked complete to curl ($size bytes)"
fi
rc=0
timeout 40 tail --pid="$server_pid" -f /dev/null || fail "server did not stop"
wait "$server_pid" || rc=$?
server_pid=""
[[ $rc -eq 0 ]] || fail "server exit status $rc after the deadline"

# (c) a second signal exits at once.
start --config "$work/good.conf" --https-port "$p1" --grace 30
curl -sS $ca --http2 --limit-rate 5M -o "$work/slow.bin" "https://localhost:$p1/files/100m.bin" \
  2>/dev/null &
slow_pid=$!
wait_nonempty "$work/slow.bin"
kill -TERM "$server_pid"
for _ in $(seq 1 200); do grep -q "stopping" "$work/log" && break; sleep 0.025; done
kill -TERM "$server_pid"
rc=0
timeout 5 tail --pid="$server_pid" -f /dev/null || fail "a second signal did not stop the server"
wait "$server_pid" || rc=$?
server_pid=""
[[ $rc -ne 0 ]] || fail "forced exit reported success"
grep -q "again, exiting now" "$work/log" || fail "no forced-exit message"
wait "$slow_pid" 2>/dev/null || true
# (d) a stop that comes while the server is still starting stops it gracefully (exit 0), not
# half-started (143). The config file is a FIFO, so start-up waits in its open until the test
# writes it; the signal is sent once that process (petrel-server itself, not the shell's fork)
# has SIGTERM blocked (bit 15 of SigBlk).
mkfifo "$work/slow.conf"
: >"$work/log"
"$bin" --config "$work/slow.conf" --https-port "$p1" --grace 1 >"$work/log" 2>&1 &
server_pid=$!
blocked=""
for _ in $(seq 1 400); do
  if [[ "$(readlink -f "/proc/$server_pid/exe" 2>/dev/null)" == "$(readlink -f "$bin")" ]]; then
    mask=$(awk '/^SigBlk:/ {print $2}' "/proc/$server_pid/status" 2>/dev/null || true)
    if [[ -n "$mask" ]] && (((16#$mask >> 14) & 1)); then blocked=1; break; fi
  fi
  sleep 0.025
done
[[ -n "$blocked" ]] || fail "SIGTERM is not blocked while the server reads its config file"
kill -TERM "$server_pid"
cat "$work/good.conf" >"$work/slow.conf"
rc=0
timeout 40 tail --pid="$server_pid" -f /dev/null || fail "a stop during start-up did not stop it"
wait "$server_pid" || rc=$?
server_pid=""
[[ $rc -eq 0 ]] || fail "a stop during start-up: exit status $rc"
grep -q "Terminated, stopping" "$work/log" || fail "a stop during start-up was not graceful"
echo "petrel-server product checks: ok"
