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

# --compress, --precompressed, --request-id: a text file compressed on the fly (decoded by curl
# and by Python's gzip), one served from its .br sibling as it is, X-Request-Id kept or made.
head -c 20000 /dev/zero | tr '\0' 'a' >"$work/root/page.txt"
printf 'precompressed sibling bytes' >"$work/root/sub/file.bin.br"
serve --root "$work/root" --compress --precompressed --request-id
curl -sS --max-time 20 -D "$work/h" --compressed -o "$work/got.txt" "http://127.0.0.1:$http/page.txt" ||
  fail "compressed download"
grep -qi '^content-encoding: br' "$work/h" || fail "--compress: no br: $(cat "$work/h")"
cmp -s "$work/got.txt" "$work/root/page.txt" || fail "--compress: decoded body differs"
curl -sS --max-time 20 -H 'accept-encoding: gzip' -o "$work/got.gz" "http://127.0.0.1:$http/page.txt" ||
  fail "gzip download"
/usr/bin/python3 -c 'import gzip, sys; sys.stdout.buffer.write(gzip.decompress(open(sys.argv[1], "rb").read()))' \
  "$work/got.gz" | cmp -s - "$work/root/page.txt" || fail "--compress: gzip body differs"
curl -sS --max-time 20 -k --http2 -D "$work/h" -H 'accept-encoding: br' -o "$work/got.br" \
  "https://127.0.0.1:$https/sub/file.bin" || fail "precompressed download"
grep -qi '^content-encoding: br' "$work/h" || fail "--precompressed: no br: $(cat "$work/h")"
cmp -s "$work/got.br" "$work/root/sub/file.bin.br" || fail "--precompressed: not the sibling"
curl -sS --max-time 20 -D "$work/h" -o /dev/null -H 'x-request-id: smoke-1' "http://127.0.0.1:$http/missing"
grep -qi '^x-request-id: smoke-1' "$work/h" || fail "--request-id: not kept: $(cat "$work/h")"
curl -sS --max-time 20 -D "$work/h" -o /dev/null "http://127.0.0.1:$http/page.txt"
grep -qiE '^x-request-id: [0-9a-f]{32}' "$work/h" || fail "--request-id: none made"
stopped
echo "petrel-server smoke: ok"
