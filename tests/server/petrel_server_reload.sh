#!/usr/bin/env bash
# petrel-server changes without a restart. SIGHUP reads the certificate and key files again: new
# TLS handshakes over TCP (openssl s_client) and over QUIC (petrel-client trusting only the new
# certificate) get the new one, a download running on a connection from before finishes
# byte-exact, a session ticket from before still resumes, and a broken key file is refused with
# the old certificate kept. SIGUSR1 reopens the access log and the log file after they were
# moved away (log rotation): the lines before are in the old files, the lines after in the new.
# Reloads under load (h2load, petrel-bench, a new TLS connection after another) fail nothing.
# Usage: petrel_server_reload.sh PETREL-SERVER PETREL-CLIENT PETREL-BENCH
set -euo pipefail
bin="$1"
client="$2"
bench="$3"
work="$(mktemp -d /tmp/petrel-reload-XXXXXX)"
export PETREL_STATE_DIR="$work/state"
# shellcheck source=server_test_lib.sh
source "$(dirname "$0")/server_test_lib.sh"
read -r https http admin < <(python3 "$(dirname "$0")/../support/server_ports.py" 3)

make_cert() {  # make_cert NAME: a self-signed P-256 certificate for localhost
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" \
    -keyout "$work/$1.key" -out "$work/$1.crt" 2>/dev/null || fail "openssl req ($1)"
}
fingerprint() { openssl x509 -noout -fingerprint -sha256 | cut -d= -f2; }
served() {  # the fingerprint of the certificate a new TLS handshake over TCP gets
  timeout 20 openssl s_client -connect "127.0.0.1:$https" -servername localhost </dev/null \
    2>/dev/null | fingerprint
}
h3_trusting() {  # h3_trusting NAME: GET /hello over HTTP/3, verifying against NAME.crt only
  timeout 30 "$client" --cacert "$work/$1.crt" -o /dev/null "https://127.0.0.1:$https/hello" \
    >/dev/null 2>&1
}

make_cert a
make_cert b
cp "$work/a.crt" "$work/live.crt"
cp "$work/a.key" "$work/live.key"
start --cert "$work/live.crt" --key "$work/live.key" --https-port "$https" --http-port "$http" \
  --listen 127.0.0.1 --workers 1 --access-log common --access-log-file "$work/access.log" \
  --log-file "$work/petrel.log" \
  --metrics-listen "127.0.0.1:$admin"

[[ "$(served)" == "$(fingerprint <"$work/a.crt")" ]] || fail "TCP does not serve certificate a"
h3_trusting a || fail "HTTP/3 does not verify against certificate a"
h3_trusting b && fail "HTTP/3 verified against certificate b before the reload"
# A session ticket from before the reload (TLS 1.3 tickets come after the handshake: make a
# request so that s_client reads one).
printf 'GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >"$work/request"
timeout 20 openssl s_client -connect "127.0.0.1:$https" -servername localhost -alpn http/1.1 -ign_eof \
  -sess_out "$work/session" <"$work/request" >/dev/null 2>&1 || true
[[ -s "$work/session" ]] || fail "no session ticket before the reload"
# A download on a connection from before the reload, slow enough to span it.
curl -sS --http2 -k --limit-rate 2M -o "$work/10m.bin" \
  "https://127.0.0.1:$https/files/10m.bin" 2>"$work/curl.err" &
download=$!
wait_nonempty "$work/10m.bin"

cp "$work/b.crt" "$work/live.crt"
cp "$work/b.key" "$work/live.key"
kill -HUP "$server_pid"
wait_log "SIGHUP, reloaded"
[[ "$(served)" == "$(fingerprint <"$work/b.crt")" ]] || fail "TCP does not serve certificate b"
h3_trusting b || fail "HTTP/3 does not verify against certificate b after the reload"
h3_trusting a && fail "HTTP/3 still verified against certificate a after the reload"
timeout 20 openssl s_client -connect "127.0.0.1:$https" -servername localhost -alpn http/1.1 -ign_eof \
  -sess_in "$work/session" <"$work/request" 2>/dev/null | grep -q "^Reused, TLSv1.3" ||
  fail "the session ticket from before the reload did not resume"
echo "ok: SIGHUP: new handshakes (TCP, QUIC) get the new certificate; the old ticket resumes"

# A key that is not PEM: refused, the certificate in use stays.
echo "not a key" >"$work/live.key"
kill -HUP "$server_pid"
wait_log "SIGHUP, NOT reloaded, the running configuration and certificates stay"
[[ "$(served)" == "$(fingerprint <"$work/b.crt")" ]] || fail "a failed reload changed the certificate"
h3_trusting b || fail "HTTP/3 after a failed reload"
echo "ok: SIGHUP with a broken key file keeps the certificate in use"
metrics="$(curl -sS --max-time 20 "http://127.0.0.1:$admin/metrics")" || fail "metrics"
grep -q '^petrel_certificate_reloads_total{outcome="ok"} 1$' <<<"$metrics" ||
  fail "metrics: want one successful reload: $(grep reload <<<"$metrics")"
grep -q '^petrel_certificate_reloads_total{outcome="failed"} 1$' <<<"$metrics" ||
  fail "metrics: want one failed reload: $(grep reload <<<"$metrics")"
stamp="$(sed -n 's/^petrel_certificate_last_reload_timestamp_seconds \([0-9]*\)$/\1/p' <<<"$metrics")"
[[ -n "$stamp" && "$stamp" -ge "$(($(date +%s) - 600))" ]] ||
  fail "metrics: last reload time '$stamp'"
echo "ok: reloads counted in the metrics"

# Reloads under load: six reloads, back and forth between the two certificates, while h2load
# (h2 over TLS), petrel-bench (h3) and a series of new TLS connections (curl) run.
cp "$work/b.key" "$work/live.key"
timeout 120 h2load -n 40000 -c 4 -m 10 "https://127.0.0.1:$https/hello" >"$work/h2load.out" 2>&1 &
h2load_pid=$!
timeout 120 "$bench" -k -c 4 -m 10 -n 40000 "https://127.0.0.1:$https/hello" \
  >"$work/bench.out" 2>&1 &
bench_pid=$!
(
  ok=0
  for _ in $(seq 1 40); do
    curl -sS -k --max-time 10 "https://127.0.0.1:$https/hello" >/dev/null 2>&1 && ok=$((ok + 1))
  done
  echo "$ok" >"$work/curl.ok"
) &
curl_pid=$!
reloaded=$(grep -c "SIGHUP, .*reloaded" "$work/log")
for round in 1 2 3 4 5 6; do
  name=a
  ((round % 2 == 0)) && name=b
  cp "$work/$name.crt" "$work/live.crt"
  cp "$work/$name.key" "$work/live.key"
  kill -HUP "$server_pid"
  wait_log "SIGHUP, .*reloaded" $((reloaded + round))
done
wait "$h2load_pid" || fail "h2load during reloads: $(tail -5 "$work/h2load.out")"
grep -q "40000 succeeded, 0 failed, 0 errored, 0 timeout" "$work/h2load.out" ||
  fail "h2load during reloads: $(grep '^requests:' "$work/h2load.out")"
wait "$bench_pid" || fail "petrel-bench during reloads: $(tail -3 "$work/bench.out")"
wait "$curl_pid"
[[ "$(cat "$work/curl.ok")" == 40 ]] ||
  fail "new TLS connections during reloads: $(cat "$work/curl.ok") of 40 succeeded"
[[ "$(served)" == "$(fingerprint <"$work/b.crt")" ]] || fail "the last reload (b) is not served"
echo "ok: six reloads under h2load, petrel-bench and new TLS connections: no request failed"

wait "$download" || fail "the download across the reload failed: $(cat "$work/curl.err")"
[[ "$(sha256sum <"$work/10m.bin" | cut -d' ' -f1)" == "$(demo_sha 10485760)" ]] ||
  fail "the download across the reload is not byte-exact"
echo "ok: a download on a connection from before the reload finished byte-exact"

# SIGUSR1: the access log and the log file moved away and reopened.
curl -sS --max-time 20 "http://127.0.0.1:$http/hello?before" >/dev/null || fail "curl before"
mv "$work/access.log" "$work/access.log.1"
mv "$work/petrel.log" "$work/petrel.log.1"
curl -sS --max-time 20 "http://127.0.0.1:$http/hello?moved" >/dev/null || fail "curl moved"
# The server writes a request's line once it finished the exchange, which may be a moment after
# the client has the response: wait for the line (in the moved file, whose descriptor the server
# still holds) before asking for the reopen, or it may land in the new file.
for _ in $(seq 1 400); do
  grep -q 'GET /hello?moved' "$work/access.log.1" && break
  sleep 0.05
done
kill -USR1 "$server_pid"
wait_log "SIGUSR1, logs reopened"
curl -sS --max-time 20 "http://127.0.0.1:$http/hello?after" >/dev/null || fail "curl after"
stop
grep -q 'GET /hello' "$work/access.log.1" || fail "the moved file lost its lines"
[[ "$(grep -c 'GET /hello' "$work/access.log.1")" -ge 2 ]] ||
  fail "the line written after the move, before SIGUSR1, is not in the moved file"
[[ "$(grep -c 'GET /hello' "$work/access.log")" -eq 1 ]] ||
  fail "the reopened access log should have the one request after SIGUSR1: $(cat "$work/access.log")"
grep -q "petrel: listening on TCP" "$work/petrel.log.1" ||
  fail "the log file from before SIGUSR1 lacks the start line: $(cat "$work/petrel.log.1")"
grep -q "log file reopened (SIGUSR1)" "$work/petrel.log" ||
  fail "the reopened log file lacks the reopen line: $(cat "$work/petrel.log" 2>&1)"
grep -q "log file reopened" "$work/petrel.log.1" && fail "the reopen line went to the moved file"
echo "ok: SIGUSR1 reopened the access log and the log file; no line lost"
echo "petrel-server reload checks: ok"
