#!/usr/bin/env bash
# Smoke test of the petrel-server binary: starts it with the built-in demo site and with
# --root, fetches over h1, h2c, h1+TLS, h2+TLS (curl) and h3 (gtlsclient), then stops it with
# SIGTERM and expects a clean exit. Usage: petrel_server_smoke.sh PATH-TO-petrel-server
set -euo pipefail
bin="$1"
work="$(mktemp -d /tmp/petrel-smoke-XXXXXX)"
# The self-signed certificate goes here, not into the home directory.
export PETREL_STATE_DIR="$work/state"
# shellcheck source=server_test_lib.sh
source "$(dirname "$0")/server_test_lib.sh"

# Two ports free for TCP and UDP, below the ephemeral range (see tests/support/server_ports.py).
read -r http https < <(python3 "$(dirname "$0")/../support/server_ports.py" 2)

serve() {  # serve [ARGS...]: the server on this test's ports
  start --listen 127.0.0.1 --http-port "$http" --https-port "$https" "$@"
}
stopped() {  # SIGTERM, exit status 0 and the closing line
  stop
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

serve
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
stopped

mkdir -p "$work/root/sub"
head -c 1000000 /dev/urandom >"$work/root/sub/file.bin"
serve --root "$work/root" --workers 2
curl -sS --max-time 20 -o "$work/got.bin" "http://127.0.0.1:$http/sub/file.bin" || fail "root download"
cmp -s "$work/got.bin" "$work/root/sub/file.bin" || fail "root download differs"
code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http/missing")"
[[ "$code" == 404 ]] || fail "missing file gave $code"
stopped
echo "petrel-server smoke: ok"
