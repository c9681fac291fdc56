#!/bin/bash
# Runs interop/run_endpoint.sh as server and client on loopback (no simulator) for each test
# case and checks exit statuses (127 where a case is unsupported), the downloads byte for byte,
# and what the client reports about the connection (resumed, 0-RTT, cipher, version, key update,
# migration). Where tshark can capture on lo it also checks the Retry and the ECN marks and
# ACK-ECN counts on the wire. With gtlsserver / gtlsclient installed, the http3 case runs against
# interop/local/peers/ngtcp2_endpoint.sh in both directions.
#
# Environment: PETREL_HQ_SERVER, PETREL_HQ_CLIENT, PETREL_SERVER, PETREL_CLIENT (the binaries),
# PETREL_SOURCE_DIR (the repository). Exit 0 when every check passed.
set -euo pipefail

src=${PETREL_SOURCE_DIR:?}
endpoint=$src/interop/run_endpoint.sh
ngtcp2_endpoint=$src/interop/local/peers/ngtcp2_endpoint.sh
work=$(mktemp -d /tmp/petrel-endpoint-test.XXXXXX)
server_pid=
capture_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
  if [[ -n $capture_pid ]]; then kill "$capture_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# run_endpoint.sh takes one directory holding the four binaries.
mkdir -p "$work/bin"
ln -s "${PETREL_HQ_SERVER:?}" "$work/bin/petrel-hq-server"
ln -s "${PETREL_HQ_CLIENT:?}" "$work/bin/petrel-hq-client"
ln -s "${PETREL_SERVER:?}" "$work/bin/petrel-server"
ln -s "${PETREL_CLIENT:?}" "$work/bin/petrel-client"
export PETREL_BIN_DIR=$work/bin PETREL_NO_WAIT=1 CERTS=$work/certs
unset PETREL_ALPN PETREL_V2_DRAFT SERVER_PARAMS CLIENT_PARAMS QLOGDIR SSLKEYLOGFILE

# A throwaway CA and a leaf for localhost / 127.0.0.1 / ::1, so the client verifies the chain.
mkdir -p "$CERTS"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=test-ca \
  -keyout "$work/ca.key" -out "$CERTS/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
  -keyout "$CERTS/priv.key" -out "$work/leaf.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n' >"$work/ext.cnf"
openssl x509 -req -in "$work/leaf.csr" -CA "$CERTS/ca.pem" -CAkey "$work/ca.key" \
  -CAcreateserial -days 2 -extfile "$work/ext.cnf" -out "$CERTS/cert.pem" 2>/dev/null

failures=0
fail() {
  echo "FAIL [$case_label]: $*" >&2
  failures=$((failures + 1))
}

can_capture=0
if command -v tshark >/dev/null 2>&1 && timeout 5 tshark -i lo -c 1 -a duration:1 -w /dev/null \
  >/dev/null 2>&1; then
  can_capture=1
fi

# make_www N SIZE...: fresh $WWW with files f1..fN of the given sizes (the last size repeats).
make_www() {
  local n=$1
  shift
  local -a sizes=("$@")
  rm -rf "$WWW"
  mkdir -p "$WWW"
  local i size
  for ((i = 1; i <= n; i++)); do
    size=${sizes[$((i <= ${#sizes[@]} ? i - 1 : ${#sizes[@]} - 1))]}
    head -c "$size" /dev/urandom >"$WWW/f$i"
  done
}

# start_server SCRIPT TESTCASE LISTEN: starts the server, waits for its listening line and sets
# server_port (and server_ports: every port it printed). Returns the script's status if it
# exited (127: unsupported).
start_server() {
  local script=$1 tc=$2 listen=$3
  : >"$work/server.log"
  ROLE=server TESTCASE=$tc SERVER_LISTEN=$listen "$script" >"$work/server.log" 2>&1 &
  server_pid=$!
  local i
  for ((i = 0; i < 200; i++)); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      local rc=0
      wait "$server_pid" || rc=$?
      server_pid=
      return "$rc"
    fi
    if grep -qE 'listening on|https [0-9]+' "$work/server.log"; then break; fi
    sleep 0.05
  done
  # petrel-hq-server: "listening on ADDR:PORT" per socket; petrel-server: "https PORT";
  # gtlsserver prints nothing with -q: the port asked for.
  mapfile -t server_ports < <(grep -oE 'listening on .*:[0-9]+$' "$work/server.log" |
    grep -oE '[0-9]+$')
  if [[ ${#server_ports[@]} -eq 0 ]]; then
    mapfile -t server_ports < <(grep -oE 'https [0-9]+' "$work/server.log" | grep -oE '[0-9]+')
  fi
  if [[ ${#server_ports[@]} -eq 0 ]]; then server_ports=("${listen##*:}"); fi
  server_port=${server_ports[0]}
  sleep 0.2 # gtlsserver gives no sign of life: a moment to bind
  return 0
}

stop_server() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}

# The capture also takes UDP port 9 (discard: nothing listens there): a datagram sent to it and
# seen in the capture file proves that the capture is live — "Capturing on" alone does not, and
# a handshake that went by before the filter was attached leaves nothing to decrypt.
capture_probe() {
  local i seen
  seen=$(tshark -r "$work/capture.pcap" -Y 'udp.dstport == 9' 2>/dev/null | wc -l)
  for ((i = 0; i < 200; i++)); do
    echo probe >/dev/udp/127.0.0.1/9 2>/dev/null || true
    sleep 0.05
    if (($(tshark -r "$work/capture.pcap" -Y 'udp.dstport == 9' 2>/dev/null | wc -l) > seen)); then
      return 0
    fi
  done
  return 1
}

start_capture() {
  [[ $can_capture == 1 ]] || return 0
  : >"$work/capture.log"
  rm -f "$work/capture.pcap"
  tshark -i lo -f "udp port $1 or udp port 9" -w "$work/capture.pcap" >"$work/capture.log" 2>&1 &
  capture_pid=$!
  capture_probe || fail "the capture on lo did not start"
}

stop_capture() {
  if [[ -n $capture_pid ]]; then
    # Every packet sent before this probe is in the file once the probe is.
    capture_probe || true
    kill -INT "$capture_pid" 2>/dev/null || true
    wait "$capture_pid" 2>/dev/null || true
    capture_pid=
  fi
}

# run_client SCRIPT TESTCASE HOST: fetches every file in $WWW; sets client_rc.
run_client() {
  local script=$1 tc=$2 host=$3
  local -a urls=()
  local f
  for f in "$WWW"/*; do urls+=("https://$host:$server_port/${f##*/}"); done
  rm -rf "$DOWNLOADS"
  client_rc=0
  ROLE=client TESTCASE=$tc REQUESTS="${urls[*]}" timeout 120 "$script" >"$work/client.log" 2>&1 ||
    client_rc=$?
}

check_downloads() {
  local f
  for f in "$WWW"/*; do
    if ! cmp -s "$f" "$DOWNLOADS/${f##*/}"; then
      fail "${f##*/} missing or different"
      return
    fi
  done
}

expect_log() {
  grep -qE -- "$1" "$work/client.log" || fail "client log lacks /$1/: $(tail -c 600 "$work/client.log")"
}

# pair SERVER_SCRIPT CLIENT_SCRIPT SERVER_CASE CLIENT_CASE [HOST]: one exchange; the checks
# that follow read the logs.
pair() {
  local ss=$1 cs=$2 stc=$3 ctc=$4 host=${5:-127.0.0.1}
  local listen="$host:0"
  # gtlsserver needs a port, and petrel-server refuses an https port 0 along with http port 0.
  # One below Linux's ephemeral range (32768 and up), which other tests' clients draw from.
  if [[ $ss == "$ngtcp2_endpoint" || $stc == http3 || ${PETREL_ALPN:-} == h3 ]]; then
    listen="$host:$((10000 + RANDOM % 20000))"
  fi
  local rc=0
  start_server "$ss" "$stc" "$listen" || rc=$?
  if [[ $rc -ne 0 ]]; then
    fail "server exited with $rc: $(tail -c 600 "$work/server.log")"
    return 1
  fi
  start_capture "$server_port"
  run_client "$cs" "$ctc" "$host"
  stop_capture
  stop_server
  if [[ $client_rc -ne 0 ]]; then
    fail "client exited with $client_rc: $(tail -c 800 "$work/client.log")"
    return 1
  fi
  check_downloads
}

export WWW=$work/www DOWNLOADS=$work/downloads

# --- Unsupported cases: 127 from either role, before anything else happens.
for spec in "server foo" "client foo" "server v2" "client v2" "client versionnegotiation"; do
  read -r role tc <<<"$spec"
  case_label="$tc/$role"
  rc=0
  ROLE=$role TESTCASE=$tc REQUESTS=https://127.0.0.1:1/x timeout 10 "$endpoint" \
    >"$work/client.log" 2>&1 || rc=$?
  [[ $rc -eq 127 ]] || fail "expected 127, got $rc"
done

# --- Petrel x Petrel over hq-interop (http3: h3).
case_label=handshake
make_www 1 1024
pair "$endpoint" "$endpoint" handshake handshake && expect_log 'connection 1: 1 of 1'

case_label=transfer
make_www 3 300000 1000000 2000000
pair "$endpoint" "$endpoint" transfer transfer && expect_log 'connection 1: 3 of 3'

case_label=multiplexing
make_www 300 32
pair "$endpoint" "$endpoint" transfer transfer && expect_log 'connection 1: 300 of 300'

case_label=chacha20
make_www 1 1000000
pair "$endpoint" "$endpoint" chacha20 chacha20 && expect_log 'TLS_CHACHA20_POLY1305_SHA256'

case_label=retry
make_www 1 10240
if pair "$endpoint" "$endpoint" retry retry && [[ $can_capture == 1 ]]; then
  retries=$(tshark -r "$work/capture.pcap" -Y 'quic.long.packet_type == 3' 2>/dev/null | wc -l)
  [[ $retries -ge 1 ]] || fail "no Retry packet on the wire"
fi

case_label=resumption
make_www 2 5120 10240
pair "$endpoint" "$endpoint" resumption resumption && expect_log 'connection 2: 1 of 1 .*resumed=1'

case_label=zerortt
make_www 10 32
pair "$endpoint" "$endpoint" zerortt zerortt && expect_log 'connection 2: 9 of 9 .*resumed=1, 0-RTT=1'

case_label=multiconnect
make_www 3 1024
pair "$endpoint" "$endpoint" multiconnect multiconnect && expect_log 'connection 3: 1 of 1'

case_label=keyupdate
make_www 1 1000000
pair "$endpoint" "$endpoint" transfer keyupdate && expect_log 'key update=1'

case_label=ecn
make_www 1 1024
rm -rf "$work/qlog"
paired=0
if SSLKEYLOGFILE=$work/keys.log QLOGDIR=$work/qlog pair "$endpoint" "$endpoint" ecn ecn; then
  paired=1
  # Both sides send ACK frames with ECN counts: each endpoint's qlog records the ACK-ECN frames
  # it sent (packet_sent with a nonzero ect0), so this check needs no decryption.
  for role in server client; do
    sent=$(cat "$work/qlog/"*"-$role.sqlog" 2>/dev/null |
      grep -a -c '"transport:packet_sent".*"frame_type":"ack"[^}]*"ect0":[1-9]' || true)
    [[ $sent -gt 0 ]] || fail "the $role sent no ACK frame with ECN counts (qlog)"
  done
fi
if [[ $paired == 1 && $can_capture == 1 ]]; then
  # On the wire both sides mark their datagrams ECT(0) (2) and never ECT(1) or CE. Not every
  # datagram need be marked: ngtcp2 validates ECN (RFC 9000 §13.4.2) by marking its first ten
  # datagrams, then sends unmarked ones until an ACK confirms the marks arrived — on a loaded
  # machine that ACK can come after the tenth. ICMP port-unreachable replies quote late QUIC
  # packets to an exited client: not ours.
  marks=$(tshark -r "$work/capture.pcap" -Y 'quic && !icmp' -T fields -e udp.srcport \
    -e ip.dsfield.ecn 2>/dev/null | sort -u)
  ect0_senders=$(awk '$2 == 2 { print $1 }' <<<"$marks" | sort -u | wc -l)
  [[ $ect0_senders -eq 2 ]] || fail "ECT(0) datagrams from $ect0_senders side(s), want 2: $marks"
  other=$(awk '$2 != 2 && $2 != 0' <<<"$marks")
  [[ -z $other ]] || fail "ECN codepoints other than ECT(0) and Not-ECT on the wire: $other"
  # The same ACK-ECN frames on the wire, decrypted with the key log. Once (a fresh-clone run)
  # tshark decrypted none though both sides' marks were on the wire; the cause is not known.
  # What the endpoints sent is checked above from their qlogs, so a decoding miss is reported
  # with what tshark saw instead of failing the case.
  senders=$(tshark -r "$work/capture.pcap" -o "tls.keylog_file:$work/keys.log" \
    -Y 'quic.ack.ect0_count' -T fields -e udp.srcport 2>/dev/null | sort -u | wc -l)
  if [[ $senders -ne 2 ]]; then
    echo "note [ecn]: ACK-ECN frames decrypted from $senders side(s) of the capture; key log" \
      "lines $(wc -l <"$work/keys.log"); tshark's view:" >&2
    tshark -r "$work/capture.pcap" -o "tls.keylog_file:$work/keys.log" -T fields \
      -e frame.number -e udp.srcport -e ip.dsfield.ecn -e quic.long.packet_type \
      -e quic.frame_type -e quic.ack.ect0_count 2>&1 | head -n 40 >&2
  fi
fi

case_label=v2
make_www 1 1024
PETREL_V2_DRAFT=1 pair "$endpoint" "$endpoint" v2 v2 && expect_log 'version 0x709a50c4'

case_label=connectionmigration/preferred-address
make_www 1 1000000
if PREFERRED_ADDRESS=127.0.0.1:0 pair "$endpoint" "$endpoint" connectionmigration transfer; then
  [[ ${#server_ports[@]} -ge 2 ]] || fail "the server printed no preferred-address socket"
  expect_log "server 127.0.0.1:${server_ports[1]:-none}\)"
fi

case_label=connectionmigration/active
make_www 1 1000000
pair "$endpoint" "$endpoint" transfer connectionmigration && expect_log 'migrated=1'

case_label=ipv6
if ip -6 addr show dev lo 2>/dev/null | grep -q '::1'; then
  make_www 2 5120 10240
  pair "$endpoint" "$endpoint" transfer transfer '[::1]' && expect_log 'server \[::1\]'
fi

case_label=http3
make_www 3 5120 10240 512000
pair "$endpoint" "$endpoint" http3 http3 && expect_log 'ALPN h3'

case_label=h3/resumption
make_www 2 5120 10240
PETREL_ALPN=h3 pair "$endpoint" "$endpoint" resumption resumption &&
  expect_log 'session resumed: yes'

case_label=h3/keyupdate
make_www 1 1000000
PETREL_ALPN=h3 pair "$endpoint" "$endpoint" transfer keyupdate && expect_log 'key update started'

# --- Against ngtcp2's examples, both directions (h3).
if command -v gtlsserver >/dev/null 2>&1 || [[ -x /usr/sbin/gtlsserver ]]; then
  make_www 3 5120 10240 512000
  case_label=http3/petrel-server-x-gtlsclient
  pair "$endpoint" "$ngtcp2_endpoint" http3 http3
  case_label=http3/gtlsserver-x-petrel-client
  pair "$ngtcp2_endpoint" "$endpoint" http3 http3 && expect_log 'ALPN h3'
else
  echo "SKIP: no gtlsserver/gtlsclient, the ngtcp2 pairings did not run"
fi

if [[ $can_capture == 0 ]]; then echo "SKIP: tshark cannot capture on lo: no wire checks"; fi
if [[ $failures -ne 0 ]]; then
  echo "run_endpoint_test: $failures failure(s)"
  exit 1
fi
echo "run_endpoint_test: all checks passed"
