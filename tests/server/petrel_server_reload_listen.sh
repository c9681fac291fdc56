#!/usr/bin/env bash
# petrel-server's listen addresses and limits changed by SIGHUP (config file): the new address
# serves h1, h2c, h2 and h3 at once; the dropped one accepts nothing new (TCP refused, QUIC
# handshakes unanswered) while a download that began on it before the reload finishes
# byte-exact; its listeners are gone (ss) once nothing uses them; the new body limit holds for
# new connections; an address that cannot be bound is refused with the running ones kept.
# Usage: petrel_server_reload_listen.sh PETREL-SERVER PETREL-CLIENT
set -euo pipefail
bin="$1"
client="$2"
work="$(mktemp -d /tmp/petrel-reload-listen-XXXXXX)"
export PETREL_STATE_DIR="$work/state"
# shellcheck source=server_test_lib.sh
source "$(dirname "$0")/server_test_lib.sh"
read -r https http < <(python3 "$(dirname "$0")/../support/server_ports.py" 2)

config() {  # config LISTEN MAX-BODY
  printf 'listen = %s\nhttps-port = %s\nhttp-port = %s\nworkers = 1\nmax-body = %s\n' \
    "$1" "$https" "$http" "$2" >"$work/petrel.conf"
}
code() {  # code URL [CURL ARGS...]: the HTTP status, or curl's exit status as "exit N"
  local url="$1"
  shift
  local rc=0 out
  out="$(curl -sS -k -g --max-time 20 -o /dev/null -w '%{http_code}' "$@" "$url" 2>/dev/null)" ||
    rc=$?
  [[ $rc -eq 0 ]] && echo "$out" || echo "exit $rc"
}
h3() {  # h3 IP: the petrel-client exit status of GET / over HTTP/3 to IP
  local rc=0
  timeout 30 "$client" -k --timeout 5 -o /dev/null --connect-to "$1:$https" \
    "https://localhost:$https/" >/dev/null 2>&1 || rc=$?
  echo "$rc"
}
listening_tcp() { ss -Htln "src $1:$2" | grep -c . || true; }
bound_udp() { ss -Huan "src $1:$2" | grep -c . || true; }

config 127.0.0.1 100000
start --config "$work/petrel.conf"
[[ "$(code "http://127.0.0.1:$http/")" == 200 ]] || fail "h1 on 127.0.0.1 before the reload"
[[ "$(code "http://127.0.0.2:$http/")" == "exit 7" ]] || fail "127.0.0.2 answered before"
# A download on 127.0.0.1, slow enough to span the reload.
curl -sS --http2 -k --limit-rate 2M -o "$work/10m.bin" \
  "https://127.0.0.1:$https/files/10m.bin" 2>"$work/curl.err" &
download=$!
wait_nonempty "$work/10m.bin"

config 127.0.0.2 5
kill -HUP "$server_pid"
wait_log "SIGHUP: now listening on 127.0.0.2:"
for args in --http1.1 --http2-prior-knowledge; do
  [[ "$(code "http://127.0.0.2:$http/" "$args")" == 200 ]] || fail "127.0.0.2 cleartext $args"
done
for args in --http1.1 --http2; do
  [[ "$(code "https://127.0.0.2:$https/" "$args")" == 200 ]] || fail "127.0.0.2 TLS $args"
done
[[ "$(h3 127.0.0.2)" == 0 ]] || fail "127.0.0.2 over HTTP/3"
[[ "$(code "http://127.0.0.1:$http/")" == "exit 7" ]] || fail "127.0.0.1 cleartext still accepts"
[[ "$(code "https://127.0.0.1:$https/")" == "exit 7" ]] || fail "127.0.0.1 TLS still accepts"
# No handshake: exit 7, or 28 when the run's deadline (the same 5 s) fires first.
[[ "$(h3 127.0.0.1)" =~ ^(7|28)$ ]] || fail "127.0.0.1 still completes QUIC handshakes"
[[ "$(listening_tcp 127.0.0.1 "$http")" == 0 ]] || fail "a TCP listener left on 127.0.0.1"
echo "ok: SIGHUP moved the listeners to 127.0.0.2 (h1, h2c, h2, h3); 127.0.0.1 takes nothing new"

[[ "$(code "https://127.0.0.2:$https/" --http2 -d 0123456789)" == 413 ]] ||
  fail "the new body limit does not hold"
echo "ok: the new body limit holds for new connections"

wait "$download" || fail "the download from before the reload failed: $(cat "$work/curl.err")"
[[ "$(sha256sum <"$work/10m.bin" | cut -d' ' -f1)" == "$(demo_sha 10485760)" ]] ||
  fail "the download from before the reload is not byte-exact"
for _ in $(seq 1 200); do  # the QUIC socket closes once no connection accepted on it is left
  [[ "$(bound_udp 127.0.0.1 "$https")" == 0 ]] && break
  sleep 0.05
done
[[ "$(bound_udp 127.0.0.1 "$https")" == 0 ]] || fail "the UDP socket on 127.0.0.1 stayed"
[[ "$(listening_tcp 127.0.0.1 "$https")" == 0 ]] || fail "the TLS listener on 127.0.0.1 stayed"
echo "ok: a download on the dropped address finished byte-exact; its sockets are closed"

config "127.0.0.2,192.0.2.1" 5
kill -HUP "$server_pid"
wait_log "SIGHUP, NOT reloaded, the running configuration and certificates stay: listen: .*192.0.2.1"
[[ "$(code "https://127.0.0.2:$https/" --http2)" == 200 ]] || fail "127.0.0.2 after a refused reload"
[[ "$(h3 127.0.0.2)" == 0 ]] || fail "127.0.0.2 over HTTP/3 after a refused reload"
echo "ok: an address that cannot be bound is refused; the running listeners stay"
stop
