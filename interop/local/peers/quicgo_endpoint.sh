#!/bin/bash
# The interop endpoint contract of interop/run_endpoint.sh (see interop/README.md), played by
# quic-go 0.29's own interop-runner server and client (Debian's golang-github-lucas-clemente-
# quic-go-dev, built by the CMake target quicgo-peers). They expect the runner's container
# layout — /certs, /www, /downloads, /logs — and the server listens on :443. Each runs chrooted
# into a directory of this case (not the machine's /), in a private mount namespace whose bind
# mounts give it that layout; the server role therefore wants SERVER_LISTEN on port 443.
#
# Environment: ROLE, TESTCASE, REQUESTS, SSLKEYLOGFILE, QLOGDIR, WWW, DOWNLOADS, CERTS,
# SERVER_LISTEN, QUICGO_BIN_DIR (quicgo-server and quicgo-client; both statically linked).
# Exit status: 0 success, 1 failure, 127 test case not supported (quic-go's own answer).
set -euo pipefail

role=${ROLE:-}
testcase=${TESTCASE:-}
bin_dir=${QUICGO_BIN_DIR:-}

log() { echo "quicgo_endpoint ($role, $testcase): $*" >&2; }

case $role in
  server) binary=$bin_dir/quicgo-server ;;
  client) binary=$bin_dir/quicgo-client ;;
  *) log "ROLE must be server or client"; exit 1 ;;
esac
[[ -x $binary ]] || { log "no $binary (build the quicgo-peers target)"; exit 1; }
if [[ $role == server ]]; then
  listen=${SERVER_LISTEN:-"[::]:443"}
  [[ ${listen##*:} == 443 ]] || { log "quic-go's server listens on :443 only, not $listen"; exit 1; }
fi

# The root it runs in: the layout as mount points, filled by bind mounts below.
root=$(mktemp -d /tmp/quicgo-root.XXXXXX)
# The outer shell stays in the machine's mount namespace, where the mount points are empty:
# removing them never reaches through a bind mount.
trap 'rm -rf "$root"' EXIT
trap 'exit 143' TERM INT
mkdir -p "$root"/{certs,www,downloads,logs,keys,qlog,dev}
touch "$root/endpoint"
keys_dir=$(dirname "${SSLKEYLOGFILE:-$root/logs/keys}")
keys_name=$(basename "${SSLKEYLOGFILE:-keys}")
qlog_dir=${QLOGDIR:-$root/logs}
mkdir -p "$qlog_dir" "$keys_dir"
[[ $role == client ]] && mkdir -p "${DOWNLOADS:?}"

mounts=(
  "$binary:endpoint"
  "$keys_dir:keys"
  "$qlog_dir:qlog"
  "/dev/null:dev/null"
)
if [[ $role == server ]]; then
  mounts+=("${CERTS:?}:certs" "${WWW:?}:www")
else
  mounts+=("$DOWNLOADS:downloads")
fi
touch "$root/dev/null"

# In the new mount namespace: bind SOURCE:TARGET pairs up to "--", then become the endpoint.
script='set -e; root=$1; shift
while [[ $1 != -- ]]; do mount --bind "${1%%:*}" "$root/${1#*:}"; shift; done; shift
exec chroot "$root" /endpoint "$@"'

read -r -a urls <<<"${REQUESTS:-}"
env_args=(TESTCASE="$testcase" SSLKEYLOGFILE="/keys/$keys_name" QLOGDIR=/qlog)
log "chroot $root: $binary ${urls[*]}"
set +e
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${env_args[@]}" \
  unshare --mount --propagation private bash -c "$script" bash "$root" "${mounts[@]}" -- \
  "${urls[@]}"
rc=$?
set -e
cat "$root/logs/log.txt" >&2 2>/dev/null || true
exit "$rc"
