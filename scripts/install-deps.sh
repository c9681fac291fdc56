#!/usr/bin/env bash
# Installs every package Petrel builds and tests with (DESIGN.md §2), from Debian 12's archive.
# Idempotent: when everything is present it runs no apt command at all.
# Usage: scripts/install-deps.sh [--bench]   (--bench adds the benchmark peer nginx, and
# valgrind and strace for bench/cost)
set -euo pipefail

build_pkgs=(
  cmake ninja-build g++ pkg-config file
  android-libboringssl-dev libngtcp2-dev libnghttp3-dev libnghttp2-dev libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev libbrotli-dev  # response compression
  libwslay-dev  # WebSocket framing
  clang libclang-rt-14-dev  # the fuzz targets (libFuzzer) in fuzz/
)
# Independent implementations the tests talk to (quic-go: its interop server and client, built
# by the quicgo-peers target; chromium: the browser test, headless; wrk: the h1 load of the
# shutdown-under-load test; python3-brotli: decoding what Petrel compressed; python3-websockets: a
# WebSocket peer); iproute2 shapes the loopback of a test namespace.
peer_pkgs=(curl nghttp2-client ngtcp2-client ngtcp2-server python3 python3-h2 python3-brotli python3-websockets tshark openssl iproute2
  golang-go golang-github-lucas-clemente-quic-go-dev chromium wrk)
bench_pkgs=(nginx-light valgrind strace)

want=("${build_pkgs[@]}" "${peer_pkgs[@]}")
if [[ ${1:-} == --bench ]]; then want+=("${bench_pkgs[@]}"); fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  sudo=sudo
else
  sudo=
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
