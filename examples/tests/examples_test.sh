#!/usr/bin/env bash
# The examples against independent peers. hello_server: GET /hello over h1 and h2c (curl),
# h1 and h2 over TLS (curl -k), h3 (gtlsclient and the h3_client example, which must also refuse
# the self-signed certificate without -k); then SIGTERM stops it cleanly. upload_server: 5 MB of
# random bytes POSTed/PUT over every protocol must come back as the right byte count and SHA-256,
# in more than one piece (streamed, not one buffered body); then SIGINT stops it cleanly.
# json_api: the same exchanges over h1, h2c, h2 over TLS (curl) and h3 (h3_client), checked byte
# for byte: items created with the token (201, Location), read, listed and deleted; 401 with
# WWW-Authenticate without it; CORS preflights for an allowed and a refused origin; JSON 404,
# 405, 400 and 413 pages; X-Request-Id echoed; then, on a second instance with a tiny rate
# limit, 429 with Retry-After on every protocol; bad flags refused.
# websocket_echo: text, binary, 1 MiB and 500 pipelined messages over h1 (Python's websockets)
# and lines over h3 (petrel-client --websocket), byte for byte; SIGTERM closes an open WebSocket
# with 1001. websocket_broadcast: joins, a message to three members, a leave.
# Usage: examples_test.sh HELLO_SERVER UPLOAD_SERVER H3_CLIENT JSON_API WEBSOCKET_ECHO
#                         WEBSOCKET_BROADCAST PETREL_CLIENT
set -euo pipefail
hello_bin=$1
upload_bin=$2
client_bin=$3
json_bin=$4
ws_echo_bin=$5
ws_broadcast_bin=$6
petrel_client=$7
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

# start NAME BINARY [FLAGS...]: runs BINARY FLAGS on free ports (0 0), waits (bounded) for the
# line that names its ports (printed once every listener accepts), sets http_port and https_port.
start() {
  local name=$1 bin=$2
  shift 2
  "$bin" "$@" 0 0 >"$work/$name.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do
    http_port="" https_port=""
    read -r http_port https_port < <(sed -n \
      's/^[a-z_]*: http \([0-9][0-9]*\) .* https \([0-9][0-9]*\) .*/\1 \2/p' "$work/$name.log") ||
      true
    [[ -n $https_port ]] && return 0
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

# ---- json_api ----
# fetch PROTO PATH [-X METHOD] [-H 'NAME: VALUE']... [-d DATA]: one exchange with json_api over
# PROTO: h1, h2c, h2 (TLS) with curl, h3 with h3_client (which takes the same options). Leaves
# the status line in $work/status, the fields (names lowercased) in $work/head and the body,
# byte for byte, in $work/body.
fetch() {
  local proto=$1 path=$2
  shift 2
  local -a curl=(curl -sS --max-time 30 -D "$work/raw" -o "$work/body")
  rm -f "$work/raw" "$work/body"
  case $proto in
    h1) "${curl[@]}" --http1.1 "$@" "$base$path" || fail "h1 $path: curl exit status $?" ;;
    h2c) "${curl[@]}" --http2-prior-knowledge "$@" "$base$path" || fail "h2c $path: curl $?" ;;
    h2) "${curl[@]}" -k --http2 "$@" "$tls$path" || fail "h2 $path: curl exit status $?" ;;
    h3)
      timeout 60 "$client_bin" -k "$@" 127.0.0.1 "$https_port" "$path" >"$work/h3.out" \
        2>"$work/h3_client.log" || fail "h3 $path: h3_client exit status $?"
      # h3_client prints the head like `curl -i`, a blank line, then the body as it came.
      local blank
      blank=$(grep -n -m1 '^$' "$work/h3.out" | cut -d: -f1)
      [[ -n $blank ]] || fail "h3 $path: no head in $(cat "$work/h3.out")"
      head -n $((blank - 1)) "$work/h3.out" >"$work/raw"
      tail -n +$((blank + 1)) "$work/h3.out" >"$work/body"
      ;;
  esac
  [[ -f $work/body ]] || : >"$work/body"
  tr -d '\r' <"$work/raw" | head -n1 >"$work/status"
  tr -d '\r' <"$work/raw" | awk 'NR > 1 && index($0, ": ") {
    i = index($0, ": "); print tolower(substr($0, 1, i - 1)) ": " substr($0, i + 2) }' \
    >"$work/head"
}
# header NAME: the value of NAME (lowercase) in the last fetch, "" if absent.
header() { sed -n "s/^$1: //p" "$work/head" | head -n1; }
# check WHAT STATUS [BODY]: the last fetch's status line is PROTO's version and STATUS, and its
# body is exactly BODY (when given).
check() {
  local what="$proto $1" version
  case $proto in h1) version=HTTP/1.1 ;; h2c | h2) version=HTTP/2 ;; h3) version=HTTP/3 ;; esac
  read -r got_version got_status _ <"$work/status" || true
  [[ ${got_version:-} == "$version" && ${got_status:-} == "$2" ]] ||
    fail "$what: status line '$(cat "$work/status")', want $version $2"
  if (($# > 2)); then
    printf '%s' "$3" | cmp -s - "$work/body" || fail "$what: body '$(cat "$work/body")', want '$3'"
  fi
}
# expect_header WHAT NAME WANT: the last fetch had field NAME with value WANT ("" for absent).
expect_header() {
  [[ $(header "$2") == "$3" ]] || fail "$proto $1: $2 is '$(header "$2")', want '$3'"
}
json=application/json

# Flags: --help, and clear refusals.
"$json_bin" --help >"$work/help.out" || fail "json_api --help exit status $?"
grep -q '^usage: json_api ' "$work/help.out" || fail "json_api --help: $(cat "$work/help.out")"
for bad in "--rate nope" "--burst 0" "--token bad!token" "--origin" "1 2 3" "--nope 1"; do
  rc=0
  # shellcheck disable=SC2086 # $bad is the flags, split into words
  "$json_bin" $bad >/dev/null 2>"$work/bad.out" || rc=$?
  ((rc == 2)) || fail "json_api $bad: exit status $rc, want 2"
  grep -q '^usage: json_api ' "$work/bad.out" || fail "json_api $bad: no usage on stderr"
done
grep -qx "json_api: unknown flag --nope" "$work/bad.out" || fail "--nope: $(cat "$work/bad.out")"

token=t0ken-for-the-test
# The default rate limit (5 a second, bursts of 20, per client address) would answer some of
# the ~60 requests below with 429 whenever they come faster than it refills: the limit is
# checked on its own instance further down, so this one allows them all.
start json_api "$json_bin" --token "$token" --origin https://app.example --rate 100000 \
  --burst 100000
base=http://127.0.0.1:$http_port
tls=https://127.0.0.1:$https_port
auth=(-H "Authorization: Bearer $token")
preflight=(-X OPTIONS -H 'Access-Control-Request-Method: POST'
  -H 'Access-Control-Request-Headers: authorization')
big=$(head -c 2000 /dev/zero | tr '\0' x)
protos=(h1 h2c h2 h3)
proto=h1
fetch h1 /api/items
check "empty list" 200 $'[]\n'
expect_header "empty list" content-type $json
[[ $(header x-request-id) =~ ^[0-9a-f]{32}$ ]] || fail "no request id made: '$(header x-request-id)'"
items=""
id=0
for proto in "${protos[@]}"; do
  ((++id))
  # Quotes, a tab and a backslash go in as they are and come out JSON-escaped; UTF-8 as is.
  item='{"id":'$id',"text":"\"'$proto'\" says héllo\u0009\\"}'
  fetch "$proto" /api/items "${auth[@]}" -H "X-Request-Id: req-$proto.$id" \
    -d "\"$proto\" says héllo"$'\t\\'
  check "create" 201 "$item"$'\n'
  expect_header "create" location "/api/items/$id"
  expect_header "create" content-type $json
  expect_header "create" x-request-id "req-$proto.$id"
  items+="${items:+,}$item"
  fetch "$proto" "/api/items/$id"
  check "read" 200 "$item"$'\n'

  fetch "$proto" /api/items -H 'Origin: https://app.example' -d 'no token'
  check "create without a token" 401 $'{"error":401,"reason":"no Bearer token"}\n'
  expect_header "create without a token" www-authenticate 'Bearer realm="json_api"'
  expect_header "create without a token" content-type $json
  expect_header "create without a token" access-control-allow-origin https://app.example
  [[ -n $(header x-request-id) ]] || fail "$proto 401: no x-request-id"
  fetch "$proto" /api/items -H 'Authorization: Bearer wrong' -d 'wrong token'
  check "create with a wrong token" 401 $'{"error":401,"reason":"invalid Bearer token"}\n'
  expect_header "wrong token" www-authenticate 'Bearer realm="json_api", error="invalid_token"'

  fetch "$proto" /api/items "${preflight[@]}" -H 'Origin: https://app.example'
  check "preflight" 204 ""
  expect_header "preflight" access-control-allow-origin https://app.example
  expect_header "preflight" access-control-allow-methods "GET, HEAD, POST, DELETE"
  expect_header "preflight" access-control-allow-headers "authorization, content-type, x-request-id"
  fetch "$proto" /api/items "${preflight[@]}" -H 'Origin: https://evil.example'
  check "refused preflight" 403 $'{"error":403,"reason":"CORS preflight not allowed"}\n'
  expect_header "refused preflight" access-control-allow-origin ""
  fetch "$proto" /api/items/1 -H 'Origin: https://evil.example'
  check "refused origin" 200
  expect_header "refused origin" access-control-allow-origin ""

  fetch "$proto" /nothing-here
  check "unknown path" 404 $'{"error":404,"reason":"no route for the path"}\n'
  expect_header "unknown path" content-type $json
  fetch "$proto" /api/items/999
  check "unknown item" 404 $'{"error":404,"reason":"no such item"}\n'
  fetch "$proto" /api/items -X PUT "${auth[@]}" -d 'put'
  check "PUT" 405 $'{"error":405,"reason":"no route for the method"}\n'
  expect_header "PUT" allow "GET, HEAD, POST"
  fetch "$proto" /api/items "${auth[@]}" -d "$big"
  check "oversize" 413 $'{"error":413,"reason":"request body too large"}\n'
  expect_header "oversize" content-type $json
  fetch "$proto" /api/items "${auth[@]}" -d $'\xff'
  check "not UTF-8" 400 $'{"error":400,"reason":"an item\'s text is 1 to 1024 bytes of UTF-8"}\n'
done
for proto in "${protos[@]}"; do
  fetch "$proto" /api/items
  check "list" 200 "[$items]"$'\n'
done
id=0
for proto in "${protos[@]}"; do
  ((++id))
  fetch "$proto" "/api/items/$id" -X DELETE
  check "delete without a token" 401
  fetch "$proto" "/api/items/$id" -X DELETE "${auth[@]}"
  check "delete" 204 ""
  fetch "$proto" "/api/items/$id" -X DELETE "${auth[@]}"
  check "delete again" 404 $'{"error":404,"reason":"no such item"}\n'
done
proto=h1
fetch h1 /api/items
check "emptied list" 200 $'[]\n'
stop json_api TERM

# A bucket of 2 that refills once every 100 s: shared by the client's every connection and
# protocol, so the third request, whichever protocol carries it, gets 429.
start json_api_limited "$json_bin" --rate 0.01 --burst 2
base=http://127.0.0.1:$http_port
tls=https://127.0.0.1:$https_port
proto=h1
fetch h1 /api/items
check "within the limit" 200 $'[]\n'
proto=h3
fetch h3 /api/items
check "within the limit" 200 $'[]\n'
for proto in "${protos[@]}"; do
  fetch "$proto" /api/items -H "X-Request-Id: limited-$proto"
  check "over the limit" 429 $'{"error":429,"reason":"rate limit exceeded"}\n'
  retry=$(header retry-after)
  if ! [[ $retry =~ ^[1-9][0-9]*$ ]] || ((retry > 100)); then
    fail "$proto 429: retry-after '$retry', want 1 to 100 (seconds)"
  fi
  expect_header "over the limit" content-type $json
  expect_header "over the limit" x-request-id "limited-$proto"
  # Preflights come before the limiter: a browser's CORS check is never what runs out.
  fetch "$proto" /api/items "${preflight[@]}" -H 'Origin: https://app.example'
  check "preflight over the limit" 204 ""
done
stop json_api_limited INT

# ---- websocket_echo, websocket_broadcast ----
ws_py="/usr/bin/python3 $(dirname "$0")/ws_examples.py"
start websocket_echo "$ws_echo_bin"
out=$(timeout 60 $ws_py echo "$http_port") || fail "websocket_echo over h1: $out"
expect_body "websocket_echo over h1" "$out" "PASS echo"
# Over h3 with petrel-client: stdin lines in, echoes out, then close 1000 (exit status 0).
lines=$'first line\nhéllo wörld\n\n'"$(head -c 30000 /dev/zero | tr '\0' 'z')"
out=$(printf '%s\n' "$lines" |
  timeout 60 "$petrel_client" -k --timeout 20 --websocket "https://127.0.0.1:$https_port/echo") ||
  fail "websocket_echo over h3: exit status $?"
expect_body "websocket_echo over h3" "$out" "$lines"
# SIGTERM with a WebSocket open: the client hears 1001 before the server exits.
timeout 60 $ws_py hold "$http_port" >"$work/hold.out" 2>&1 &
hold_pid=$!
for _ in $(seq 1 600); do
  grep -q '^open$' "$work/hold.out" && break
  kill -0 "$hold_pid" 2>/dev/null || fail "hold: $(cat "$work/hold.out")"
  sleep 0.05
done
stop websocket_echo TERM
wait "$hold_pid" || fail "hold: $(cat "$work/hold.out")"
expect_body "close at SIGTERM" "$(tail -n 1 "$work/hold.out")" "closed 1001 server stopping"

start websocket_broadcast "$ws_broadcast_bin"
out=$(timeout 60 $ws_py broadcast "$http_port") || fail "websocket_broadcast: $out"
expect_body "websocket_broadcast over h1" "$out" "PASS broadcast"
stop websocket_broadcast INT
echo "examples: ok"
