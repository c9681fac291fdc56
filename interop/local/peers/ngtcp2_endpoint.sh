#!/bin/bash
# The interop endpoint contract of interop/run_endpoint.sh (see interop/README.md), played by
# Debian's ngtcp2 0.12.1 examples gtlsserver / gtlsclient. They speak HTTP/3 only, so every
# case runs over h3 (the Petrel side gets PETREL_ALPN=h3).
#
# Environment: ROLE, TESTCASE, REQUESTS, SSLKEYLOGFILE (GnuTLS reads it itself), QLOGDIR,
# SERVER_PARAMS / CLIENT_PARAMS, WWW, DOWNLOADS, CERTS, SERVER_LISTEN (one ADDR:PORT; default
# [::]:443, i.e. every address), PREFERRED_ADDRESS, PETREL_V2_DRAFT, GTLSSERVER / GTLSCLIENT
# (the binaries; default from PATH, then /usr/sbin, /usr/bin).
# Exit status: 0 success, 1 failure, 127 test case not supported.
set -euo pipefail

readonly kUnsupported=127
readonly kChaChaOnly='NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+CHACHA20-POLY1305'

role=${ROLE:-}
testcase=${TESTCASE:-}
www=${WWW:-/www}
downloads=${DOWNLOADS:-/downloads}
certs=${CERTS:-/certs}

log() { echo "ngtcp2_endpoint ($role, $testcase): $*" >&2; }

unsupported() {
  log "unsupported: $*"
  exit "$kUnsupported"
}

find_binary() {
  local name=$1 override=$2
  if [[ -n $override ]]; then
    echo "$override"
  elif command -v "$name" >/dev/null 2>&1; then
    command -v "$name"
  elif [[ -x /usr/sbin/$name ]]; then
    echo "/usr/sbin/$name"
  else
    echo "/usr/bin/$name"
  fi
}

case $testcase in
  handshake | transfer | longrtt | multiplexing | blackhole | amplificationlimit) ;;
  transferloss | transfercorruption | ipv6 | rebind-port | rebind-addr | ecn) ;;
  goodput | crosstraffic | http3 | chacha20 | retry | resumption | zerortt) ;;
  multiconnect | handshakeloss | handshakecorruption | keyupdate | connectionmigration) ;;
  versionnegotiation)
    [[ $role == client ]] && unsupported "gtlsclient is not driven to start with an unknown version"
    ;;
  v2)
    [[ ${PETREL_V2_DRAFT:-0} == 1 ]] || unsupported "ngtcp2 0.12.1 speaks the v2 draft code point only"
    ;;
  *) unsupported "unknown test case" ;;
esac

qlog_args=()
if [[ -n ${QLOGDIR:-} ]]; then
  mkdir -p "$QLOGDIR"
  qlog_args=(--qlog-dir="$QLOGDIR")
fi
read -r -a server_params <<<"${SERVER_PARAMS:-}"
read -r -a client_params <<<"${CLIENT_PARAMS:-}"

if [[ $role == server ]]; then
  server=$(find_binary gtlsserver "${GTLSSERVER:-}")
  listen=${SERVER_LISTEN:-"[::]:443"}
  host=${listen%:*}
  port=${listen##*:}
  host=${host#[}
  host=${host%]}
  [[ $host == "::" || $host == "0.0.0.0" ]] && host='*'
  # A lossy handshake may need more than the 10 s default (as in run_endpoint.sh).
  args=(-q -d "$www" "${qlog_args[@]}" --handshake-timeout=60s)
  case $testcase in
    chacha20) args+=(--ciphers="$kChaChaOnly") ;;
    retry) args+=(-V) ;;
    v2) args+=("--preferred-versions=v2draft,v1") ;;
    connectionmigration)
      pa=${PREFERRED_ADDRESS:-193.167.100.100:4433}
      if [[ $pa == \[* ]]; then
        args+=(--preferred-ipv6-addr="$pa")
      else
        args+=(--preferred-ipv4-addr="$pa")
      fi
      ;;
  esac
  log "exec $server ${args[*]} ${server_params[*]} $host $port"
  exec "$server" "${args[@]}" "${server_params[@]}" "$host" "$port" "$certs/priv.key" \
    "$certs/cert.pem"
elif [[ $role != client ]]; then
  log "ROLE must be server or client"
  exit 1
fi

client=$(find_binary gtlsclient "${GTLSCLIENT:-}")
read -r -a urls <<<"${REQUESTS:-}"
if [[ ${#urls[@]} -eq 0 ]]; then
  log "REQUESTS is empty"
  exit 1
fi
mkdir -p "$downloads"
# The host and port of the first URL (https://HOST:PORT/..., IPv6 in brackets).
authority=${urls[0]#https://}
authority=${authority%%/*}
if [[ $authority == \[* ]]; then
  host=${authority%%]*}
  host=${host#[}
  rest=${authority#*]}
else
  host=${authority%%:*}
  rest=${authority#"$host"}
fi
port=${rest#:}
[[ -n $port ]] || port=443

args=(-q --exit-on-all-streams-close --download="$downloads" "${qlog_args[@]}"
  --handshake-timeout=60s)
case $testcase in
  chacha20) args+=(--ciphers="$kChaChaOnly") ;;
  keyupdate) args+=(--key-update=1ms) ;;
  connectionmigration) args+=(--change-local-addr=200ms) ;;
  v2) args+=("--other-versions=v2draft,v1") ;;
esac

fetch() {
  log "$client ${args[*]} $* ${client_params[*]} $host $port ..."
  "$client" "${args[@]}" "$@" "${client_params[@]}" "$host" "$port" "${fetch_urls[@]}"
}

case $testcase in
  resumption | zerortt)
    state=$(mktemp -d /tmp/ngtcp2-session.XXXXXX)
    fetch_urls=("${urls[0]}")
    fetch --session-file="$state/session" --tp-file="$state/tp" || exit 1
    if [[ ${#urls[@]} -gt 1 ]]; then
      extra=()
      [[ $testcase == resumption ]] && extra=(--disable-early-data)
      fetch_urls=("${urls[@]:1}")
      fetch --session-file="$state/session" --tp-file="$state/tp" "${extra[@]}" || exit 1
    fi
    rm -rf "$state"
    ;;
  multiconnect | handshakeloss | handshakecorruption)
    for u in "${urls[@]}"; do
      fetch_urls=("$u")
      fetch || exit 1
    done
    ;;
  *)
    fetch_urls=("${urls[@]}")
    fetch || exit 1
    ;;
esac
# gtlsclient exits 0 even when it never reached the server: every file must be there.
for u in "${urls[@]}"; do
  name=${u##*/}
  if [[ ! -f $downloads/$name ]]; then
    log "not downloaded: $u"
    exit 1
  fi
done
exit 0
