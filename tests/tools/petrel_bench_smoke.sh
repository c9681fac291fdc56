#!/usr/bin/env bash
# Smoke test of petrel-bench against a petrel-server it starts: -n 200 -c 2 -m 10 must report
# 200 requests done and succeeded, 2400 body bytes (12 each) and no failure, and exit 0; a run
# on a missing path must count every request as failed (status >= 400) and exit 1; a short -D
# run on two threads must succeed; usage errors exit 2.
# Usage: petrel_bench_smoke.sh PATH-TO-petrel-bench PATH-TO-petrel-server
set -euo pipefail
bench="$1"
server="$2"
work="$(mktemp -d /tmp/petrel-bench-smoke-XXXXXX)"
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill -9 "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  [[ -f "$work/out" ]] && cat "$work/out" >&2
  [[ -f "$work/log" ]] && cat "$work/log" >&2
  exit 1
}

# The value of KEY in the summary line of $work/out.
summary() {
  awk -v k="$1" '/^summary:/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' \
    "$work/out"
}
expect() { # KEY VALUE
  local got
  got="$(summary "$1")"
  [[ "$got" == "$2" ]] || fail "$1=$got, want $2"
}
# Runs petrel-bench with the given arguments into $work/out; sets rc.
run() {
  rc=0
  timeout 60 "$bench" "$@" >"$work/out" 2>&1 || rc=$?
}

grep -q -- "--max-concurrent-streams" <<<"$("$bench" --help)" || fail "--help"
run -n 10 -c 1 --bogus https://127.0.0.1:1/
[[ $rc -eq 2 ]] || fail "unknown option: exit $rc, want 2"
run -n 10 -D 1 https://127.0.0.1:1/
[[ $rc -eq 2 ]] || fail "-n with -D: exit $rc, want 2"

mkdir -p "$work/www"
printf 'hello-petrel' >"$work/www/12b"
https="$(python3 "$(dirname "$0")/../support/server_ports.py")"
"$server" --listen 127.0.0.1 --http-port 0 --https-port "$https" --workers 0 --root "$work/www" \
  >"$work/log" 2>&1 &
server_pid=$!
for _ in $(seq 1 200); do
  grep -q "listening" "$work/log" && break
  kill -0 "$server_pid" 2>/dev/null || fail "server exited at start"
  sleep 0.05
done
grep -q "listening" "$work/log" || fail "server did not start"
url="https://127.0.0.1:$https"

run --h3 -k -n 200 -c 2 -m 10 "$url/12b"
[[ $rc -eq 0 ]] || fail "-n 200: exit $rc"
expect requests 200
expect succeeded 200
expect failed 0
expect failed_transport 0
expect body_bytes 2400
expect connected 2
expect connect_failed 0
expect ok 1
grep -q "^requests: 200 started, 200 done, 200 succeeded, 0 failed" "$work/out" || fail "requests line"
grep -q "^status codes: 200 2xx" "$work/out" || fail "status line"

run -k -n 20 -c 1 -m 4 "$url/missing"
[[ $rc -eq 1 ]] || fail "404s: exit $rc, want 1"
expect requests 20
expect succeeded 0
expect failed_status 20

run -k -D 1 -c 2 -m 4 -t 2 "$url/12b"
[[ $rc -eq 0 ]] || fail "-D 1: exit $rc"
expect failed 0
[[ "$(summary succeeded)" -gt 0 ]] || fail "-D 1: nothing succeeded"

kill -TERM "$server_pid"
timeout 20 tail --pid="$server_pid" -f /dev/null || fail "server did not stop on SIGTERM"
server_pid=""
echo "petrel_bench_smoke: OK"
