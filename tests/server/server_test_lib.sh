# Shared by the shell tests of petrel-server: start it in the background, stop it with SIGTERM,
# fail with the server's log. The caller sets `bin` (the petrel-server binary) and `work` (a
# directory of its own, removed on exit) before sourcing this file.
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill -9 "$server_pid" 2>/dev/null || true
  jobs -p | xargs -r kill -9 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f "$work/log" ]] && tail -20 "$work/log" >&2; exit 1; }

start() {  # start [ARGS...]: waits (bounded) for the "listening" line
  # Emptied here, not only by the child's redirection: until the child has opened it, the log
  # still holds the previous server's "listening" line, and a stop sent on the strength of that
  # line could reach the new process before it blocks SIGTERM (exit status 143).
  : >"$work/log"
  "$bin" "$@" >"$work/log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 300); do
    grep -q "listening on" "$work/log" && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "server exited at start: $*"
    sleep 0.05
  done
  fail "server did not start"
}
wait_nonempty() {  # wait_nonempty FILE: until FILE has bytes (bounded: 10 s)
  for _ in $(seq 1 400); do
    [[ -s "$1" ]] && return 0
    sleep 0.025
  done
  fail "$1 stayed empty"
}
wait_log() {  # wait_log TEXT [COUNT]: until the server's log has TEXT COUNT times (bounded)
  for _ in $(seq 1 400); do
    [[ "$(grep -c "$1" "$work/log")" -ge "${2:-1}" ]] && return 0
    sleep 0.05
  done
  fail "the server's log never said '$1' ${2:-1} times"
}
stop() {  # SIGTERM; expects exit status 0
  kill -TERM "$server_pid"
  local rc=0
  timeout 40 tail --pid="$server_pid" -f /dev/null || fail "server did not stop on SIGTERM"
  wait "$server_pid" || rc=$?
  server_pid=""
  [[ $rc -eq 0 ]] || fail "server exit status $rc"
}

# The demo files' bytes: byte i is 'a' + (7i + i/4093) mod 26.
demo_sha() {
  python3 -c '
import hashlib, sys
n = int(sys.argv[1]); h = hashlib.sha256(); step = 1 << 20
for base in range(0, n, step):
    h.update(bytes(97 + (i * 7 + i // 4093) % 26 for i in range(base, min(n, base + step))))
print(h.hexdigest())' "$1"
}
