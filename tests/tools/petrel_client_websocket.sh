#!/usr/bin/env bash
# petrel-client --websocket against a Petrel server's WebSocket echo routes (ws_echo_server):
# stdin lines go out as text messages and come back on stdout byte for byte; a subprotocol is
# agreed on; a clean close exits 0, a refused opening 22, a server's close with 1001 56.
# Usage: petrel_client_websocket.sh PETREL_CLIENT WS_ECHO_SERVER
set -euo pipefail
client=$1
tmp=$(mktemp -d)
coproc SERVER { exec "$2" 2>"$tmp/server.log"; }
server_pid=$SERVER_PID
trap 'kill "$server_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
read -r -t 30 -u "${SERVER[0]}" word port || { echo "FAIL: the server did not start"; cat "$tmp/server.log"; exit 1; }
[[ $word == port ]] || { echo "FAIL: the server said '$word $port'"; exit 1; }
fail=0
check() {  # NAME WANT-STATUS GOT-STATUS WANT-FILE GOT-FILE
  if [[ $2 != "$3" ]]; then
    echo "FAIL $1: exit status $3, want $2"; cat "$tmp/err"; fail=1
  elif ! cmp -s "$4" "$5"; then
    echo "FAIL $1: stdout differs"; diff <(od -c "$4" | head -20) <(od -c "$5" | head -20) || true; fail=1
  else
    echo "ok $1"
  fi
}
run() {  # STDIN-FILE ARGS...: petrel-client's stdout in $tmp/out, stderr in $tmp/err, status in $rc
  local in=$1; shift
  rc=0
  "$client" -k --timeout 20 --websocket "$@" <"$in" >"$tmp/out" 2>"$tmp/err" || rc=$?
}

# Lines (an empty one, UTF-8, CRLF, a long one, the last without its newline) echo back.
long=$(head -c 120000 /dev/zero | tr '\0' 'x')
printf 'hello\n\nw\xc3\xb6rld\r\n%s\nlast' "$long" >"$tmp/in"
printf 'hello\n\nw\xc3\xb6rld\n%s\nlast\n' "$long" >"$tmp/want"
run "$tmp/in" "wss://127.0.0.1:$port/echo"
check echo 0 "$rc" "$tmp/want" "$tmp/out"

# Nothing on stdin: open, close with 1000, exit 0.
: >"$tmp/empty"
run /dev/null "https://127.0.0.1:$port/echo"
check empty-stdin 0 "$rc" "$tmp/empty" "$tmp/out"

# A subprotocol, chosen from the offer and shown by -v.
printf 'one\n' >"$tmp/in"
run "$tmp/in" -v --ws-protocol nope --ws-protocol chat "wss://127.0.0.1:$port/chat"
check subprotocol 0 "$rc" "$tmp/in" "$tmp/out"
grep -q 'subprotocol chat$' "$tmp/err" || { echo "FAIL subprotocol: -v did not name it"; cat "$tmp/err"; fail=1; }

# A refused opening: 22, and the status in the message.
run "$tmp/in" "wss://127.0.0.1:$port/refuse"
check refused 22 "$rc" "$tmp/empty" "$tmp/out"
grep -q '403' "$tmp/err" || { echo "FAIL refused: no 403 in the message"; cat "$tmp/err"; fail=1; }

# The server closes with 1001 after the first line's echo: 56, with the code and reason.
printf 'first\nbye\n' >"$tmp/in"
printf 'first\n' >"$tmp/want"
run "$tmp/in" "wss://127.0.0.1:$port/echo"
check server-close 56 "$rc" "$tmp/want" "$tmp/out"
grep -q 'closed with 1001: bye' "$tmp/err" || { echo "FAIL server-close: message"; cat "$tmp/err"; fail=1; }

exit $fail
