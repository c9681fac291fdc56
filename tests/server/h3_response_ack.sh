#!/usr/bin/env bash
# A response written in the turn that read its request carries the ACK of that request: one
# packet each way per request on a warm connection, not the response and then an ACK-only
# packet. petrel-bench sends 40 requests one at a time; the server's qlog must show an ACK frame
# in every 1-RTT packet after the handshake that ends a request stream.
# Usage: h3_response_ack.sh PATH-TO-petrel-server PATH-TO-petrel-bench
set -euo pipefail
server="$1"
bench="$2"
work="$(mktemp -d /tmp/petrel-h3-ack-XXXXXX)"
export PETREL_STATE_DIR="$work/state"
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill -9 "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f "$work/log" ]] && cat "$work/log" >&2; exit 1; }

mkdir -p "$work/www" "$work/qlog"
printf 'hello-petrel' >"$work/www/12b"
started=""
for _ in 1 2 3; do  # a port picked here may be taken before the server binds it
  port="$(python3 "$(dirname "$0")/../support/server_ports.py")"
  "$server" --listen 127.0.0.1 --http-port 0 --https-port "$port" --workers 0 \
    --root "$work/www" --qlog-dir "$work/qlog" >"$work/log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 200); do
    grep -q "listening" "$work/log" && { started=1; break; }
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  [[ -n "$started" ]] && break
  kill -9 "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
done
[[ -n "$started" ]] || fail "server did not start"

timeout 60 "$bench" --h3 -k -n 40 -c 1 -m 1 "https://127.0.0.1:$port/12b" >"$work/bench.log" 2>&1 ||
  { cat "$work/bench.log" >&2; fail "petrel-bench"; }
grep -q "succeeded=40 " "$work/bench.log" || { cat "$work/bench.log" >&2; fail "not 40 successes"; }
kill -TERM "$server_pid"
timeout 20 tail --pid="$server_pid" -f /dev/null || fail "server did not stop"
server_pid=""

python3 - "$work/qlog" <<'PY' || fail "qlog check"
import collections, json, os, sys
d = sys.argv[1]
# The packets before a failing response, printed with it.
recent = collections.deque(maxlen=8)
# Whether an ack-eliciting packet came in that no ACK sent since covers, and whether the last
# ACK sent went alone. A response may lack an ACK when a packet written just before it in the
# same pass (a loss or PMTUD probe on a loaded machine) took the ACK along: it failed once that
# way, [max_streams, stream, stream]. What must not happen is the ACK of the request left for
# later, or sent alone ahead of a response that waited.
ack_owed = False
last_ack_alone = False
def eliciting(frames):
    return any(fr.get("frame_type") not in ("ack", "padding") for fr in frames)
files = [f for f in os.listdir(d) if f.endswith("-server.sqlog")]
if len(files) != 1:
    sys.exit(f"want one server qlog, found {files}")
responses = without_ack = 0
sent_before = set()  # (stream, offset) of the STREAM frames sent so far
with open(os.path.join(d, files[0]), encoding="utf-8", errors="replace") as f:
    for line in f:
        line = line.strip().lstrip("\x1e")
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        name = ev.get("name")
        if name not in ("transport:packet_sent", "transport:packet_received"):
            continue
        data = ev.get("data", {})
        recent.append("%s %s pn=%s %s" % (
            ev.get("time"), "sent" if name.endswith("sent") else "recv",
            data.get("header", {}).get("packet_number"),
            [fr.get("frame_type") for fr in data.get("frames", [])]))
        if data.get("header", {}).get("packet_type") != "1RTT":
            continue
        frames = data.get("frames", [])
        has_ack = any(fr.get("frame_type") == "ack" for fr in frames)
        if name != "transport:packet_sent":
            ack_owed = ack_owed or eliciting(frames)
            continue
        owed_before = ack_owed
        if has_ack:
            ack_owed = False
            last_ack_alone = not eliciting(frames)
        ends_request = any(fr.get("frame_type") == "stream" and fr.get("fin") and
                           fr.get("stream_id", 1) % 4 == 0 for fr in frames)
        streams = [(fr.get("stream_id"), fr.get("offset", 0)) for fr in frames
                   if fr.get("frame_type") == "stream"]
        resent = bool(streams) and all(s in sent_before for s in streams)
        sent_before.update(streams)
        # The handshake's last flight may carry the first response; its ACKs follow their own
        # rules. The property is about the warm connection, and about a response's first
        # transmission: a loss probe that resends it (a peer slow to acknowledge, on a loaded
        # machine) has nothing new to acknowledge.
        if not ends_request or resent or any(fr.get("frame_type") == "handshake_done"
                                             for fr in frames):
            continue
        responses += 1
        if not has_ack and (owed_before or last_ack_alone):
            without_ack += 1
            print("without ACK:", [fr.get("frame_type") for fr in frames])
            print("  the packets before it (time, direction, number, frames):")
            for r in recent:
                print("   ", r)
print(f"response packets: {responses}, without an ACK: {without_ack}")
if responses < 39:
    sys.exit("fewer response packets than requests in the qlog")
if without_ack:
    sys.exit("responses went out without the ACK of their request")
PY
echo "ok"
