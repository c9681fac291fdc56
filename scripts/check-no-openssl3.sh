#!/usr/bin/env bash
# Fails if a Petrel binary loads OpenSSL 3 (libssl.so.3 / libcrypto.so.3) or does not load
# BoringSSL from Debian's android directory (or BORINGSSL_LIBRARY_DIR).
# Usage: check-no-openssl3.sh BINARY [BUILD_DIR]  — with BUILD_DIR, every ELF executable under it
# that links libssl is checked too.
set -euo pipefail
main_bin=$1
build_dir=${2:-}
bins=("$main_bin")
if [[ -n $build_dir ]]; then
  while IFS= read -r f; do bins+=("$f"); done < <(
    # interop/local/peers holds other implementations built as test peers (quic-go's static Go
    # binaries, with Go's own TLS), not Petrel's.
    find "$build_dir" -type f -perm -u+x ! -name '*.so*' ! -path '*/CMakeFiles/*' \
      ! -path '*/interop/local/peers/*' 2>/dev/null |
      while read -r f; do file -b "$f" 2>/dev/null | grep -q '^ELF' && echo "$f"; done)
fi
status=0
checked=0
for b in "${bins[@]}"; do
  deps=$(ldd "$b" 2>&1) || { echo "ldd failed on $b: $deps"; status=1; continue; }
  if grep -Eq 'lib(ssl|crypto)\.so\.3' <<<"$deps"; then
    echo "FAIL: $b loads OpenSSL 3:"; grep -E 'lib(ssl|crypto)' <<<"$deps"; status=1
  fi
  if grep -Eq 'lib(ssl|crypto)\.so' <<<"$deps"; then
    if grep -E 'lib(ssl|crypto)\.so' <<<"$deps" | grep -vq '/android/\|not found'; then
      [[ -n ${BORINGSSL_LIBRARY_DIR:-} ]] || { echo "FAIL: $b loads a TLS library outside android/:";
        grep -E 'lib(ssl|crypto)\.so' <<<"$deps"; status=1; }
    fi
    if grep -Eq 'lib(ssl|crypto)\.so.*not found' <<<"$deps"; then
      echo "FAIL: $b cannot find BoringSSL without LD_LIBRARY_PATH (rpath missing)"; status=1
    fi
  fi
  checked=$((checked + 1))
done
# The main binary must link BoringSSL at all, or this check proves nothing.
# (ldd's output is captured first: grep -q stops reading early, and under pipefail the SIGPIPE
# that then kills ldd would fail the check by chance.)
main_deps="$(ldd "$main_bin")"
grep -Eq 'android/libssl\.so|android/libcrypto\.so' <<<"$main_deps" ||
  { echo "FAIL: $main_bin does not load BoringSSL from android/"; status=1; }
echo "checked $checked binaries"
exit $status
