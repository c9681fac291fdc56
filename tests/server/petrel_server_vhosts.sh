#!/usr/bin/env bash
# petrel-server's virtual hosts: one port, several sites chosen by Host / :authority, each with
# its own certificate chosen by SNI over TCP and QUIC. Checked with real clients: curl
# --resolve for several names (h1 and h2, verifying each site's certificate), openssl s_client
# -servername for the certificate each name gets, petrel-client (verifying) and gtlsclient
# over h3; 421 for a request whose host belongs to another site than the connection's SNI
# unless the certificate covers both; Alt-Svc per site; per-site request counts in the metrics;
# config errors name the file, line and key; SIGHUP applies a changed config (sites, roots,
# certificates) and refuses one that does not load.
# Usage: petrel_server_vhosts.sh PETREL-SERVER PETREL-CLIENT
set -euo pipefail
bin="$1"
client="$2"
work="$(mktemp -d /tmp/petrel-vhosts-XXXXXX)"
export PETREL_STATE_DIR="$work/state"
# shellcheck source=server_test_lib.sh
source "$(dirname "$0")/server_test_lib.sh"
read -r https http admin < <(python3 "$(dirname "$0")/../support/server_ports.py" 3)

make_cert() {  # make_cert FILE-NAME SAN: a self-signed P-256 certificate
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=$1" -addext "subjectAltName=$2" \
    -keyout "$work/$1.key" -out "$work/$1.crt" 2>/dev/null || fail "openssl req ($1)"
}
fingerprint() { openssl x509 -noout -fingerprint -sha256 | cut -d= -f2; }
served() {  # served [SNI]: the fingerprint of the certificate a TLS handshake over TCP gets
  local sni=(-noservername)
  [[ $# -gt 0 ]] && sni=(-servername "$1")
  timeout 20 openssl s_client -connect "127.0.0.1:$https" "${sni[@]}" </dev/null 2>/dev/null |
    fingerprint
}
site() {  # site NAME [curl args...]: the body of https://NAME:PORT/ (curl, NAME -> 127.0.0.1)
  local name="$1"
  shift
  curl -sS --max-time 20 --resolve "$name:$https:127.0.0.1" "$@" "https://$name:$https/"
}
status() {  # status NAME [curl args...]: the status of https://NAME:PORT/
  site "$@" -o /dev/null -w '%{http_code}'
}

make_cert a "DNS:a.example,DNS:www.a.example"
make_cert b "DNS:*.b.example"
make_cert cd "DNS:c.example,DNS:d.example"
for s in default a b c d; do
  mkdir -p "$work/$s"
  echo "site $s" >"$work/$s/index.html"
done
cat >"$work/petrel.conf" <<CONF
# the default site and the server's own settings first
root = $work/default
https-port = $https
http-port = $http
listen = 127.0.0.1
workers = 1
metrics-listen = 127.0.0.1:$admin

[host a.example www.a.example]
root = $work/a
cert = $work/a.crt
key = $work/a.key

[host *.b.example]
root = $work/b
cert = $work/b.crt
key = $work/b.key
alt-svc = false

[host c.example]
root = $work/c
cert = $work/cd.crt
key = $work/cd.key

[host d.example]
root = $work/d
cert = $work/cd.crt
key = $work/cd.key
CONF
start --config "$work/petrel.conf"
grep -q "4 virtual hosts" "$work/log" || fail "the start line does not count the virtual hosts"
default_crt="$work/state/cert.pem"  # the self-signed one petrel-server made

# Sites by name, h1 and h2 over TLS, each verified against its own certificate only.
for v in --http1.1 --http2; do
  [[ "$(site a.example "$v" --cacert "$work/a.crt")" == "site a" ]] || fail "a.example $v"
  [[ "$(site www.a.example "$v" --cacert "$work/a.crt")" == "site a" ]] || fail "www.a.example $v"
  [[ "$(site x.b.example "$v" --cacert "$work/b.crt")" == "site b" ]] || fail "x.b.example $v"
  [[ "$(site c.example "$v" --cacert "$work/cd.crt")" == "site c" ]] || fail "c.example $v"
  [[ "$(site d.example "$v" --cacert "$work/cd.crt")" == "site d" ]] || fail "d.example $v"
  [[ "$(site localhost "$v" --cacert "$default_crt")" == "site default" ]] || fail "localhost $v"
  [[ "$(site other.example "$v" -k)" == "site default" ]] || fail "other.example $v"
  # The wildcard is one label: neither the bare parent nor two labels.
  [[ "$(site b.example "$v" -k)" == "site default" ]] || fail "b.example $v"
  [[ "$(site y.x.b.example "$v" -k)" == "site default" ]] || fail "y.x.b.example $v"
done
echo "ok: five names on one port reach their sites over h1 and h2, each with its certificate"

# The certificate each server name gets (openssl s_client), and none for no SNI.
[[ "$(served a.example)" == "$(fingerprint <"$work/a.crt")" ]] || fail "s_client a.example"
[[ "$(served WWW.A.EXAMPLE)" == "$(fingerprint <"$work/a.crt")" ]] || fail "s_client WWW.A"
[[ "$(served q.b.example)" == "$(fingerprint <"$work/b.crt")" ]] || fail "s_client q.b.example"
[[ "$(served d.example)" == "$(fingerprint <"$work/cd.crt")" ]] || fail "s_client d.example"
[[ "$(served other.example)" == "$(fingerprint <"$default_crt")" ]] || fail "s_client other"
[[ "$(served)" == "$(fingerprint <"$default_crt")" ]] || fail "s_client without SNI"
echo "ok: openssl s_client -servername gets each site's certificate, the default otherwise"

# Cleartext: the Host header alone chooses.
[[ "$(curl -sS -H 'Host: www.a.example' "http://127.0.0.1:$http/")" == "site a" ]] ||
  fail "cleartext Host: www.a.example"
[[ "$(curl -sS -H 'Host: Z.B.Example:80' "http://127.0.0.1:$http/")" == "site b" ]] ||
  fail "cleartext Host: Z.B.Example:80"
[[ "$(curl -sS --http2-prior-knowledge -H 'Host: c.example' "http://127.0.0.1:$http/")" == \
  "site c" ]] || fail "h2c c.example"
[[ "$(curl -sS -0 -H 'Host:' "http://127.0.0.1:$http/")" == "site default" ]] ||
  fail "HTTP/1.0 without Host"
echo "ok: cleartext h1 and h2c choose by Host"

# 421: the host belongs to another site than the SNI and the certificate does not cover it.
for v in --http1.1 --http2; do
  [[ "$(status a.example "$v" -k -H 'Host: x.b.example')" == 421 ]] || fail "421 a->b $v"
  [[ "$(status a.example "$v" -k -H 'Host: other.example')" == 421 ]] || fail "421 a->other $v"
  [[ "$(status other.example "$v" -k -H 'Host: a.example')" == 421 ]] || fail "421 other->a $v"
  # The connection's certificate covers both names: a client may reuse it, no 421.
  [[ "$(site c.example "$v" -k -H 'Host: d.example')" == "site d" ]] || fail "c->d $v"
  # Same site by another of its names.
  [[ "$(site a.example "$v" -k -H 'Host: www.a.example')" == "site a" ]] || fail "a->www $v"
done
echo "ok: 421 Misdirected Request across sites unless the certificate covers the host"

# HTTP/3: petrel-client verifying each certificate, gtlsclient --sni, and 421.
for n in a www.a; do
  out="$(timeout 40 "$client" --cacert "$work/a.crt" --connect-to "127.0.0.1:$https" \
    "https://$n.example:$https/")" || fail "h3 $n.example"
  [[ "$out" == "site a" ]] || fail "h3 $n.example: '$out'"
done
out="$(timeout 40 "$client" --cacert "$work/b.crt" --connect-to "127.0.0.1:$https" \
  "https://k.b.example:$https/")" || fail "h3 k.b.example"
[[ "$out" == "site b" ]] || fail "h3 k.b.example: '$out'"
# gtlsclient (ngtcp2 0.12, GnuTLS) sends as SNI the host it connects to ("localhost" for an IP
# address; its --sni is not used by the GnuTLS backend), so it resolves the names through a
# private /etc/hosts in a mount namespace of its own; without one (not root) this part is
# skipped, saying so.
printf '127.0.0.1 a.example y.b.example c.example\n' >"$work/hosts"
if ! command -v gtlsclient >/dev/null; then
  echo "skipped: gtlsclient is not installed"
elif ! unshare -m sh -c "mount --bind '$work/hosts' /etc/hosts" 2>/dev/null; then
  echo "skipped: gtlsclient part: no private mount namespace (needs root)"
else
  gtls() {  # gtls NAME URL-HOST: the body gtlsclient downloads connecting to (and SNI) NAME
    rm -rf "$work/dl" && mkdir -p "$work/dl"
    timeout 40 unshare -m sh -c "mount --bind '$work/hosts' /etc/hosts && exec gtlsclient \
      --exit-on-all-streams-close --no-quic-dump --no-http-dump --download='$work/dl' \
      '$1' '$https' 'https://$2:$https/index.html'" >"$work/gtls.out" 2>&1 ||
      fail "gtlsclient $1 $2: $(tail -3 "$work/gtls.out")"
    cat "$work/dl/index.html"
  }
  [[ "$(gtls a.example a.example)" == "site a" ]] || fail "gtlsclient a.example"
  [[ "$(gtls y.b.example y.b.example)" == "site b" ]] || fail "gtlsclient y.b.example"
  [[ "$(gtls c.example d.example)" == "site d" ]] || fail "gtlsclient c->d"
  [[ "$(gtls a.example y.b.example)" == "421 Misdirected Request"* ]] || fail "gtlsclient 421 a->b"
  echo "ok: h3: gtlsclient reaches each site by SNI; 421 across sites"
fi
echo "ok: h3: petrel-client verifies each site's certificate"

# Alt-Svc per site.
curl -sS -D - -o /dev/null --resolve "a.example:$https:127.0.0.1" -k "https://a.example:$https/" |
  grep -qi '^alt-svc: h3=' || fail "a.example advertises no h3"
curl -sS -D - -o /dev/null --resolve "x.b.example:$https:127.0.0.1" -k \
  "https://x.b.example:$https/" | grep -qi '^alt-svc' && fail "x.b.example advertises h3"
echo "ok: Alt-Svc per site"

metrics="$(curl -sS --max-time 20 "http://127.0.0.1:$admin/metrics")" || fail "metrics"
for h in a.example '\*.b.example' c.example d.example default; do
  grep -q "^petrel_http_requests_by_host_total{host=\"$h\"} [1-9]" <<<"$metrics" ||
    fail "metrics: no requests counted for $h: $(grep by_host <<<"$metrics")"
done
echo "ok: requests counted per site"

# SIGHUP reads the config again: a new site, a new root and certificate for a.example, d.example
# gone; a setting that needs a restart keeps its value, with a warning.
make_cert a2 "DNS:a.example,DNS:www.a.example"
mkdir -p "$work/a2" "$work/e"
echo "site a2" >"$work/a2/index.html"
echo "site e" >"$work/e/index.html"
sed -i -e "s|^root = $work/a\$|root = $work/a2|" -e "s|$work/a.crt|$work/a2.crt|" \
  -e "s|$work/a.key|$work/a2.key|" -e '/^\[host d.example\]/,$d' "$work/petrel.conf"
printf 'cc = reno\nmax-body = 5\n' | cat - "$work/petrel.conf" >"$work/next.conf"
mv "$work/next.conf" "$work/petrel.conf"
printf '[host e.example]\nroot = %s/e\n' "$work" >>"$work/petrel.conf"
kill -HUP "$server_pid"
wait_log "SIGHUP, reloaded: certificates read again, 4 virtual hosts"
wait_log "need a restart keep their running values: cc"
for v in --http1.1 --http2; do
  [[ "$(site a.example "$v" --cacert "$work/a2.crt")" == "site a2" ]] || fail "reload: a.example $v"
  [[ "$(site e.example "$v" -k)" == "site e" ]] || fail "reload: e.example $v"
  [[ "$(site d.example "$v" -k)" == "site default" ]] || fail "reload: d.example $v"
  [[ "$(site c.example "$v" --cacert "$work/cd.crt")" == "site c" ]] || fail "reload: c $v"
done
out="$(timeout 40 "$client" --cacert "$work/a2.crt" --connect-to "127.0.0.1:$https" \
  "https://a.example:$https/")" || fail "reload: h3 a.example"
[[ "$out" == "site a2" ]] || fail "reload: h3 a.example: '$out'"
# The body limit is a reloadable one: new connections get it.
[[ "$(curl -sS -o /dev/null -w '%{http_code}' -d 0123456789 -H 'Host: e.example' \
  "http://127.0.0.1:$http/")" == 413 ]] || fail "reload: max-body not applied"
echo "ok: SIGHUP applies the new sites, roots and certificates (h1, h2, h3)"

# A config that does not load: refused, naming file, line and key; the running one stays.
cp "$work/petrel.conf" "$work/good.conf"
printf '[host f.example]\nroot = %s/e\nbogus = 1\n' "$work" >>"$work/petrel.conf"
bad_line=$(($(wc -l <"$work/petrel.conf")))
kill -HUP "$server_pid"
wait_log "SIGHUP, NOT reloaded, the running configuration and certificates stay: config $work/petrel.conf:$bad_line: bogus: unknown key"
[[ "$(site e.example --http2 -k)" == "site e" ]] || fail "after a failed reload: e.example"
[[ "$(site f.example --http2 -k)" == "site default" ]] || fail "after a failed reload: f.example"
# A certificate that does not load: the same.
cp "$work/good.conf" "$work/petrel.conf"
echo "not a key" >"$work/a2.key"
kill -HUP "$server_pid"
wait_log "SIGHUP, NOT reloaded.*host a.example: certificate $work/a2.crt, key $work/a2.key: private key PEM"
[[ "$(site a.example --http2 --cacert "$work/a2.crt")" == "site a2" ]] ||
  fail "after a failed certificate reload: a.example"
echo "ok: a config or certificate that does not load is refused; the running one stays"
stop

# Config errors name the file, the line and the key; the server does not start.
bad() {  # bad EXPECTED-TEXT: petrel-server --config $work/bad.conf fails saying it
  local out
  if out="$(timeout 20 "$bin" --config "$work/bad.conf" 2>&1)"; then fail "started with: $1"; fi
  grep -qF "$1" <<<"$out" || fail "error for '$1' was: $out"
}
printf '[host a.example]\nroot = %s/a\nport = 1\n' "$work" >"$work/bad.conf"
bad "bad.conf:3: port: unknown key in a host section"
printf '[host a.example]\ncert = %s/a.crt\nkey = %s/a.key\n' "$work" "$work" >"$work/bad.conf"
bad "bad.conf:1: [host a.example]: needs root"
printf '[host a.example]\nroot = %s/a\n[host A.example]\nroot = %s/b\n' "$work" "$work" \
  >"$work/bad.conf"
bad "bad.conf:3: [host A.example]: host name \"A.example\" given twice"
printf '[host a.example]\nroot = %s/a\ncert = %s/missing.crt\nkey = %s/a.key\n' "$work" "$work" \
  "$work" >"$work/bad.conf"
bad "bad.conf:1: [host a.example]: cannot read $work/missing.crt"
printf '[site a.example]\n' >"$work/bad.conf"
bad "bad.conf:1: expected a section '[host NAME...]'"
printf '[host a.example]\nroot = %s/a\ncert = %s/a.crt\nkey = %s/b.key\n' "$work" "$work" \
  "$work" >"$work/bad.conf"
bad "host a.example: certificate $work/a.crt, key $work/b.key: private key does not match certificate"
echo "ok: config errors name file, line and key"
echo "PASS"
