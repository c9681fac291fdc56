#!/usr/bin/env bash
# The examples against independent peers. hello_server: GET /hello over h1 and h2c (curl),
# h1 and h2 over TLS (curl -k), h3 (gtlsclient and the h3_client example, which must also refuse
# the self-signed certificate without -k); then SIGTERM stops it cleanly. upload_server: 5 MB of
# random bytes POSTed/PUT over every protocol must come back as the right byte count and SHA-256,
# in more than one piece (streamed, not one buffered body); then SIGINT stops it cleanly.
# Usage: examples_test.sh HELLO_SERVER UPLOAD_SERVER H3_CLIENT
set -euo pipefail
hello_bin=$1
upload_bin=$2
client_bin=$3
gtlsclient=/usr/bin/gtlsclient
work=$(mktemp -d /tmp/petrel-examples-XXXXXX)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then kill -9 "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.log; do
    [[ -f $f ]] && { echo "--- $f" >&2; cat "$f" >&2; }
  done
  exit 1
}
[[ -x $gtlsclient ]] || fail "$gtlsclient missing (scripts/install-deps.sh installs ngtcp2-client)"

# start NAME BINARY: runs BINARY on free ports (0 0), waits (bounded) for its "listening" line,
# sets http_port and https_port from it.
start() {
  local name=$1 bin=$2
  "$bin" 0 0 >"$work/$name.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do
    if grep -q "listening" "$work/$name.log"; then
      read -r http_port https_port < <(sed -n \
        's/.* http \([0-9][0-9]*\) .* https \([0-9][0-9]*\) .*/\1 \2/p' "$work/$name.log")
      [[ -n ${https_port:-} ]] || fail "$name: cannot read the ports"
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || fail "$name exited at start"
    sleep 0.05
  done
  fail "$name did not start within 30 s"
}

# stop NAME SIGNAL: the server must exit 0 within 20 s and say it stopped.
stop() {
  local name=$1 sig=$2 rc=0
  kill "-$sig" "$server_pid"
  timeout 20 tail --pid="$server_pid" -f /dev/null || fail "$name did not stop on SIG$sig"
  wait "$server_pid" || rc=$?
  server_pid=""
  ((rc == 0)) || fail "$name: exit status $rc after SIG$sig"
  grep -q "stopped" "$work/$name.log" || fail "$name: no 'stopped' line"
}

# expect_body WHAT GOT WANT
expect_body() {
  [[ $2 == "$3" ]] || fail "$1: got '$2', want '$3'"
}

# h3_get NAME [gtlsclient options]: gtlsclient requests /NAME over h3 into $work/dl/NAME.
h3_get() {
  local name=$1
  shift
  rm -rf "$work/dl" && mkdir -p "$work/dl"
  timeout 60 "$gtlsclient" -q --exit-on-all-streams-close --download "$work/dl" "$@" 127.0.0.1 \
    "$https_port" "https://127.0.0.1:$https_port/$name" >"$work/gtlsclient.log" 2>&1 ||
    fail "gtlsclient /$name $*"
}

# ---- hello_server ----
start hello "$hello_bin"
base=http://127.0.0.1:$http_port
tls=https://127.0.0.1:$https_port
expect_body "h1" "$(curl -sS --max-time 30 --http1.1 "$base/hello")" "hello over HTTP/1.1"
expect_body "h2c" "$(curl -sS --max-time 30 --http2-prior-knowledge "$base/hello")" \
  "hello over HTTP/2"
expect_body "h1 TLS" "$(curl -sS --max-time 30 -k --http1.1 "$tls/hello")" "hello over HTTP/1.1"
expect_body "h2 TLS" "$(curl -sS --max-time 30 -k --http2 "$tls/hello")" "hello over HTTP/2"
code=$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' "$base/nothing-here")
[[ $code == 404 ]] || fail "unrouted path gave $code"

h3_get hello
expect_body "h3 (gtlsclient)" "$(cat "$work/dl/hello")" "hello over HTTP/3"

timeout 60 "$client_bin" -k 127.0.0.1 "$https_port" /hello >"$work/h3_client.out" \
  2>"$work/h3_client.log" || fail "h3_client -k exit status $?"
[[ $(head -n1 "$work/h3_client.out") == "HTTP/3 200" ]] || fail "h3_client: $(cat "$work/h3_client.out")"
expect_body "h3_client body" "$(tail -n1 "$work/h3_client.out")" "hello over HTTP/3"
grep -qx "content-type: text/plain" "$work/h3_client.out" || fail "h3_client: no content-type"
timeout 60 "$client_bin" -k 127.0.0.1 "$https_port" /nothing-here >"$work/h3_client.out" \
  2>"$work/h3_client.log" || fail "h3_client 404 exit status $?"
[[ $(head -n1 "$work/h3_client.out") == "HTTP/3 404" ]] || fail "h3_client 404: $(cat "$work/h3_client.out")"
# Certificate verification is on by default: the self-signed certificate is refused.
if timeout 60 "$client_bin" 127.0.0.1 "$https_port" /hello >"$work/h3_client.out" \
  2>"$work/h3_client.log"; then
  fail "h3_client accepted a self-signed certificate without -k"
fi
stop hello TERM

# ---- upload_server ----
head -c $((5 << 20)) /dev/urandom >"$work/upload.bin"
want_sha=$(sha256sum "$work/upload.bin" | cut -d' ' -f1)
want_size=$((5 << 20))
# check_upload WHAT RESPONSE
check_upload() {
  local re="^$want_size bytes in ([0-9]+) pieces, sha256 $want_sha\$"
  [[ $2 =~ $re ]] || fail "upload $1: got '$2', want $want_size bytes, sha256 $want_sha"
  ((BASH_REMATCH[1] > 1)) || fail "upload $1: the body came in one piece, not streamed"
}
start upload "$upload_bin"
base=http://127.0.0.1:$http_port
tls=https://127.0.0.1:$https_port
up() { curl -sS --max-time 60 "$@"; }
check_upload "h1" "$(up --http1.1 --data-binary @"$work/upload.bin" "$base/upload")"
check_upload "h1 chunked" "$(up --http1.1 -H 'Transfer-Encoding: chunked' \
  --data-binary @"$work/upload.bin" "$base/upload")"
check_upload "h1 PUT" "$(up --http1.1 -T "$work/upload.bin" "$base/upload")"
check_upload "h2c" "$(up --http2-prior-knowledge --data-binary @"$work/upload.bin" "$base/upload")"
check_upload "h1 TLS" "$(up -k --http1.1 --data-binary @"$work/upload.bin" "$tls/upload")"
check_upload "h2 TLS" "$(up -k --http2 --data-binary @"$work/upload.bin" "$tls/upload")"
h3_get upload -m POST -d "$work/upload.bin"
check_upload "h3 (gtlsclient)" "$(cat "$work/dl/upload")"
stop upload INT
echo "examples: ok"
