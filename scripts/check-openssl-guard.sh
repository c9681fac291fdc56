#!/usr/bin/env bash
# Checks that configuring Petrel against OpenSSL 3 fails loudly: points BORINGSSL_ROOT at a
# directory holding OpenSSL's headers and libraries and expects CMake to refuse it.
# Usage: check-openssl-guard.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ ! -f /usr/include/openssl/ssl.h ]]; then
  echo "OpenSSL 3 headers are not installed here: nothing can leak, guard untestable"; exit 0
fi
mkdir -p "$tmp/root/include/openssl" "$tmp/root/lib"
cp /usr/include/openssl/*.h "$tmp/root/include/openssl/"
# OpenSSL has no base.h; give it one so that only the content check can catch it.
echo '#include <openssl/opensslv.h>' >"$tmp/root/include/openssl/base.h"
multiarch=$(gcc -print-multiarch)
ln -s "/usr/lib/$multiarch/libssl.so" "$tmp/root/lib/libssl.so"
ln -s "/usr/lib/$multiarch/libcrypto.so" "$tmp/root/lib/libcrypto.so"
if cmake -S "$src" -B "$tmp/build" -G Ninja -DBORINGSSL_ROOT="$tmp/root" -DPETREL_BUILD_TESTS=OFF \
  -DPETREL_BUILD_BENCH=OFF >"$tmp/log" 2>&1; then
  echo "FAIL: configuring against OpenSSL 3 succeeded"; cat "$tmp/log"; exit 1
fi
tr -s "\n " "  " <"$tmp/log" | grep -q "holds OpenSSL headers, not BoringSSL" || { echo "FAIL: configure failed for another reason:"; cat "$tmp/log"; exit 1; }
echo "configure refused OpenSSL 3, as it must"
