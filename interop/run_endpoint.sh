#!/bin/bash
# Petrel's endpoint for the QUIC interop runner (see interop/README.md for the contract).
#
# Environment (the runner sets the first group; the rest are local overrides):
#   ROLE server|client, TESTCASE, REQUESTS (client: space-separated URLs), SSLKEYLOGFILE,
#   QLOGDIR, SERVER_PARAMS / CLIENT_PARAMS (extra flags, appended).
#   PETREL_BIN_DIR (default /usr/local/bin), WWW (/www), DOWNLOADS (/downloads),
#   CERTS (/certs), SERVER_LISTEN (default: 0.0.0.0:443 and [::]:443; a space-separated
#   list of ADDR:PORT), PREFERRED_ADDRESS (connectionmigration; default 193.167.100.100:4433),
#   PETREL_ALPN (h3: every case over HTTP/3), PETREL_V2_DRAFT=1 (run v2 with the provisional
#   code point), PETREL_NO_WAIT=1 (no /setup.sh, no waiting for the simulator).
# Exit status: 0 success, 1 failure, 127 test case not supported.
set -euo pipefail

readonly kUnsupported=127
# Clears AES-NI in BoringSSL's view of the CPU, so that it prefers ChaCha20 (see
# petrel-hq-client --help, --ciphers).
readonly kNoAesNi='~0x200000000000000'

role=${ROLE:-}
testcase=${TESTCASE:-}
bin=${PETREL_BIN_DIR:-/usr/local/bin}
www=${WWW:-/www}
downloads=${DOWNLOADS:-/downloads}
certs=${CERTS:-/certs}
alpn=${PETREL_ALPN:-hq-interop}
[[ $testcase == http3 ]] && alpn=h3

log() { echo "run_endpoint ($role, $testcase, $alpn): $*" >&2; }

unsupported() {
  log "unsupported: $*"
  exit "$kUnsupported"
}

# The runner's names (what it passes as TESTCASE) plus the case names the local runner may pass
# unchanged; the comment says what the endpoint does differently for them.
case $testcase in
  handshake | transfer | longrtt | multiplexing | blackhole | amplificationlimit) ;;
  transferloss | transfercorruption | ipv6 | rebind-port | rebind-addr | ecn) ;;
  goodput | crosstraffic | http3) ;;
  chacha20) ;;            # ChaCha20 only (AES-NI masked; the client checks the suite)
  retry) ;;               # the server sends a Retry to every new connection
  resumption | zerortt) ;; # first URL on connection 1, the others on a resumed connection 2
  multiconnect | handshakeloss | handshakecorruption) ;; # one connection per URL
  keyupdate) ;;           # the client updates keys at once
  connectionmigration) ;; # server: preferred address; client: active migration (below)
  versionnegotiation)
    # The server answers unknown versions with Version Negotiation by itself; the client cannot
    # start with a version it does not speak.
    [[ $role == client ]] && unsupported "the client speaks only versions it implements"
    ;;
  v2)
    # ngtcp2 0.12.1 speaks only the provisional v2 code point (0x709a50c4), which an RFC 9369
    # peer does not; PETREL_V2_DRAFT=1 runs it anyway (Petrel x Petrel).
    [[ ${PETREL_V2_DRAFT:-0} == 1 ]] || unsupported "v2 is the draft code point only (PETREL_V2_DRAFT=1 to run)"
    ;;
  *) unsupported "unknown test case" ;;
esac
case $role in
  server | client) ;;
  *)
    log "ROLE must be server or client"
    exit 1
    ;;
esac

if [[ ${PETREL_NO_WAIT:-0} != 1 ]]; then
  # The simulator's endpoint image: routes through the simulator, then (client) wait for it.
  if [[ -x /setup.sh ]]; then /setup.sh; fi
  if [[ $role == client && -x /wait-for-it.sh ]]; then /wait-for-it.sh sim:57832 -s -t 30; fi
fi

qlog_args=()
if [[ -n ${QLOGDIR:-} ]]; then
  mkdir -p "$QLOGDIR"
  qlog_args=(--qlog-dir "$QLOGDIR")
fi

# Extra flags, split on whitespace on purpose.
read -r -a server_params <<<"${SERVER_PARAMS:-}"
read -r -a client_params <<<"${CLIENT_PARAMS:-}"

run_server() {
  local listen=${SERVER_LISTEN:-"0.0.0.0:443 [::]:443"}
  local -a addrs
  read -r -a addrs <<<"$listen"
  if [[ $testcase == chacha20 ]]; then
    # A server without AES hardware prefers ChaCha20.
    export OPENSSL_ia32cap=$kNoAesNi
  fi
  if [[ $alpn == h3 ]]; then
    local -a args=(--root "$www" --cert "$certs/cert.pem" --key "$certs/priv.key"
      --http-port 0 "${qlog_args[@]}")
    [[ -n ${SSLKEYLOGFILE:-} ]] && args+=(--keylog-file "$SSLKEYLOGFILE")
    # Every address, on the first one's port (petrel-server serves one https port).
    local port=${addrs[0]##*:} a
    for a in "${addrs[@]}"; do args+=(--listen "$a"); done
    # --handshake-timeout: see the hq server's below.
    args+=(--https-port "$port" --handshake-timeout 60)
    case $testcase in
      retry) args+=(--retry always) ;;
      v2) unsupported "petrel-server has no version preference setting" ;;
      connectionmigration) unsupported "petrel-server offers no preferred address" ;;
    esac
    log "exec petrel-server ${args[*]} ${server_params[*]}"
    exec "$bin/petrel-server" "${args[@]}" "${server_params[@]}"
  fi
  local -a args=(--root "$www" --cert "$certs/cert.pem" --key "$certs/priv.key" "${qlog_args[@]}")
  local a
  for a in "${addrs[@]}"; do args+=(--listen "$a"); done
  [[ -n ${SSLKEYLOGFILE:-} ]] && args+=(--keylog "$SSLKEYLOGFILE")
  case $testcase in
    retry) args+=(--retry always) ;;
    v2) args+=(--versions "v2,v1") ;;
    connectionmigration) args+=(--preferred-address "${PREFERRED_ADDRESS:-193.167.100.100:4433}") ;;
  esac
  # Under 30 % loss each way (handshakeloss / handshakecorruption, which the runner may send as
  # `multiconnect` or `transfer`) a handshake can need more PTO rounds than the 10 s default
  # allows; the runner bounds every test case itself.
  args+=(--handshake-timeout 60000)
  log "exec petrel-hq-server ${args[*]} ${server_params[*]}"
  exec "$bin/petrel-hq-server" "${args[@]}" "${server_params[@]}"
}

# BoringSSL keeps a session's time in whole seconds, so the ticket age petrel-client reports
# is the difference of wall-clock seconds, which exceeds the real age when the ticket came late
# in one second and is used early in the next; a server that measures the age more finely
# (gtlsserver) then declines 0-RTT. Sleep, if needed, to a moment where the reported age is
# not above the real one, with a margin for the client's start.
wait_for_ticket_age() {
  local saved now delay
  saved=$(stat -c %.9Y "$1")
  now=$(date +%s.%N)
  # The reported age is floor(f + d) for a real age d and a ticket saved at fraction f of a
  # second: right when d is in [k, k + 1 - f) for a whole k.
  delay=$(awk -v s="$saved" -v n="$now" -v m=0.02 'BEGIN {
    f = s - int(s); e = n - s
    for (k = 0; k < 3; k++) {
      d = (e > k) ? e : k
      if (d + m <= k + 1 - f) { printf "%.3f", d - e; exit }
    }
    # The window is narrower than the margin: aim at its start.
    k = (e > 1) ? int(e) + 1 : 1
    printf "%.3f", k - e
  }')
  if [[ $delay != 0 && $delay != 0.000 ]]; then
    log "waiting ${delay}s so the ticket's age in whole seconds does not exceed its real age"
    sleep "$delay"
  fi
}

run_client() {
  local -a urls
  read -r -a urls <<<"${REQUESTS:-}"
  if [[ ${#urls[@]} -eq 0 ]]; then
    log "REQUESTS is empty"
    exit 1
  fi
  mkdir -p "$downloads"
  local -a trust=(--insecure)
  if [[ $alpn == h3 ]]; then
    [[ -f $certs/ca.pem ]] && trust=(--cacert "$certs/ca.pem")
    # A preferred address (offered in connectionmigration, whose client gets TESTCASE=transfer
    # in the runner's older layout) is moved to at once from a new port: the runner wants the
    # server's first packet on the new path to be its PATH_CHALLENGE, which a probing client
    # cannot get (the server's first packet there answers the probe).
    # --keep-alive: a client that only waits for data sends nothing, so after a NAT rebinding
    # that lost the server's packets to the old binding neither side would speak again.
    local -a args=(-v --download "$downloads" --timeout 300 "${trust[@]}" "${qlog_args[@]}"
      --preferred-address-move immediate --keep-alive 1000)
    case $testcase in
      chacha20) args+=(--ciphers TLS_CHACHA20_POLY1305_SHA256) ;;
      keyupdate) args+=(--key-update) ;;
      v2) args+=(--quic-version v1) ;; # offers v2 for compatible version negotiation
    esac
    local client=$bin/petrel-client
    case $testcase in
      resumption | zerortt)
        # Two runs sharing a session file: the first URL, then the rest resuming (in 0-RTT).
        local session
        session=$(mktemp /tmp/petrel-session.XXXXXX)
        rm -f "$session"
        local -a second=(--session-file "$session")
        [[ $testcase == zerortt ]] && second+=(--0rtt)
        log "petrel-client ${args[*]} --session-file $session ${urls[0]}"
        "$client" "${args[@]}" --session-file "$session" "${client_params[@]}" "${urls[0]}" || exit 1
        if [[ ! -s $session ]]; then
          log "no session ticket saved by the first connection"
          exit 1
        fi
        if [[ ${#urls[@]} -gt 1 ]]; then
          [[ $testcase == zerortt ]] && wait_for_ticket_age "$session"
          log "petrel-client ${args[*]} ${second[*]} ${urls[*]:1}"
          "$client" "${args[@]}" "${second[@]}" "${client_params[@]}" "${urls[@]:1}" || exit 1
        fi
        rm -f "$session"
        exit 0
        ;;
      multiconnect | handshakeloss | handshakecorruption)
        local u
        for u in "${urls[@]}"; do
          "$client" "${args[@]}" "${client_params[@]}" "$u" || exit 1
        done
        exit 0
        ;;
    esac
    log "petrel-client ${args[*]} ${client_params[*]} ${urls[*]}"
    "$client" "${args[@]}" "${client_params[@]}" "${urls[@]}" || exit 1
    exit 0
  fi
  [[ -f $certs/ca.pem ]] && trust=(--ca "$certs/ca.pem")
  # --handshake-timeout: as the server's (above).
  # --preferred-address-move, --keep-alive: as petrel-client's (above).
  local -a args=(--download "$downloads" "${trust[@]}" "${qlog_args[@]}" --handshake-timeout 60000
    --preferred-address-move immediate --keep-alive 1000)
  [[ -n ${SSLKEYLOGFILE:-} ]] && args+=(--keylog "$SSLKEYLOGFILE")
  case $testcase in
    chacha20) args+=(--chacha20) ;;
    resumption) args+=(--resumption) ;;
    zerortt) args+=(--resumption --0rtt) ;;
    multiconnect | handshakeloss | handshakecorruption) args+=(--multiconnect) ;;
    keyupdate) args+=(--key-update) ;;
    connectionmigration) args+=(--migrate) ;;
    v2) args+=(--quic-version v1 --other-versions v2) ;;
  esac
  log "petrel-hq-client ${args[*]} ${client_params[*]} ${urls[*]}"
  "$bin/petrel-hq-client" "${args[@]}" "${client_params[@]}" "${urls[@]}" || exit 1
  exit 0
}

if [[ $role == server ]]; then run_server; else run_client; fi
