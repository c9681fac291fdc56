#!/usr/bin/env bash
# Smoke test of the petrel-server binary: starts it with the built-in demo site and with
# --root, fetches over h1, h2c, h1+TLS, h2+TLS (curl) and h3 (gtlsclient), then stops it with
# SIGTERM and expects a clean exit. Usage: petrel_server_smoke.sh PATH-TO-petrel-server
set -euo pipefail
bin="$1"
work="$(mktemp -d /tmp/petrel-smoke-XXXXXX)"
# The self-signed certificate goes here, not into the home directory.
export PETREL_STATE_DIR="$work/state"
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill -9 "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; [[ -f "$work/log" ]] && cat "$work/log" >&2; exit 1; }

# Two ports free for TCP and UDP, below the ephemeral range (see tests/support/server_ports.py).
read -r http https < <(python3 "$(dirname "$0")/../support/server_ports.py" 2)

# Starts the server with the given extra arguments; waits (bounded) for its "listening" line.
start() {
  "$bin" --listen 127.0.0.1 --http-port "$http" --https-port "$https" "$@" >"$work/log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 200); do
    grep -q "listening" "$work/log" && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "server exited at start"
    sleep 0.05
  done
  fail "server did not start"
}
stop() {
  kill -TERM "$server_pid"
  local rc=0
  timeout 20 tail --pid="$server_pid" -f /dev/null || fail "server did not stop on SIGTERM"
  wait "$server_pid" || rc=$?
  server_pid=""
  [[ $rc -eq 0 ]] || fail "server exit status $rc"
  grep -q "stopped" "$work/log" || fail "no 'stopped' line"
}
fetch() {  # fetch FLAGS URL EXPECTED-SUBSTRING
  local out
  out="$(curl -sS --max-time 20 $1 "$2")" || fail "curl $1 $2"
  [[ "$out" == *"$3"* ]] || fail "curl $1 $2: got '$out'"
}

grep -q -- "--https-port" <<<"$("$bin" --help)" || fail "--help"
grep -qi "ngtcp2" <<<"$("$bin" --version)" || fail "--version"
if "$bin" --bogus >/dev/null 2>&1; then fail "an unknown option was accepted"; fi

start
fetch "--http1.1" "http://127.0.0.1:$http/hello" "hello from petrel"
fetch "--http2-prior-knowledge" "http://127.0.0.1:$http/" "Petrel"
fetch "-k --http1.1" "https://127.0.0.1:$https/hello" "hello from petrel"
fetch "-k --http2" "https://127.0.0.1:$https/hello" "hello from petrel"
head -c 3000000 /dev/urandom >"$work/up.bin"
echo_check() {  # echo_check FLAGS BASE-URL: POST 3 MB to /echo, expect it back byte for byte
  curl -sS --max-time 20 $1 --data-binary @"$work/up.bin" -o "$work/echo.bin" "$2/echo" ||
    fail "echo $1"
  cmp -s "$work/up.bin" "$work/echo.bin" || fail "echo $1: body differs"
}
echo_check "--http1.1" "http://127.0.0.1:$http"
echo_check "--http2-prior-knowledge" "http://127.0.0.1:$http"
echo_check "-k --http2" "https://127.0.0.1:$https"
if [[ -x /usr/bin/gtlsclient ]]; then
  mkdir -p "$work/dl"
  timeout 30 gtlsclient -q --exit-on-all-streams-close --download "$work/dl" 127.0.0.1 "$https" \
    "https://127.0.0.1:$https/hello" >/dev/null 2>&1 || fail "gtlsclient"
  grep -q "hello from petrel" "$work/dl/hello" || fail "h3 body"
  timeout 30 gtlsclient -q --exit-on-all-streams-close --download "$work/dl" -m POST \
    -d "$work/up.bin" 127.0.0.1 "$https" "https://127.0.0.1:$https/echo" >/dev/null 2>&1 ||
    fail "gtlsclient POST /echo"
  cmp -s "$work/up.bin" "$work/dl/echo" || fail "h3 echo differs"
fi
stop

mkdir -p "$work/root/sub"
head -c 1000000 /dev/urandom >"$work/root/sub/file.bin"
start --root "$work/root" --workers 2
curl -sS --max-time 20 -o "$work/got.bin" "http://127.0.0.1:$http/sub/file.bin" || fail "root download"
cmp -s "$work/got.bin" "$work/root/sub/file.bin" || fail "root download differs"
code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http/missing")"
[[ "$code" == 404 ]] || fail "missing file gave $code"
stop
echo "petrel-server smoke: ok"
