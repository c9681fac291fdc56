#!/usr/bin/env bash
# `cmake --install` of a Petrel build into a temporary prefix, then an outside project
# (examples/consumer) configured with only CMAKE_PREFIX_PATH pointing there, built, and run:
# it must answer over h1, h2 (TLS) and h3 and exit cleanly. Also checks that the package
# holds every public header, the four libraries and the CMake files, names no path of the
# source or build tree, and that the program loads BoringSSL, never OpenSSL 3.
# Usage: install_test.sh CMAKE BUILD_DIR CONSUMER_SOURCE GENERATOR MAKE_PROGRAM CXX PETREL_SOURCE
set -euo pipefail
cmake_bin=$1
build=$2
consumer_src=$3
generator=$4
make_program=$5
cxx=$6
petrel_src=$7
gtlsclient=/usr/bin/gtlsclient
work=$(mktemp -d /tmp/petrel-install-XXXXXX)
prefix=$work/prefix
pid=""
cleanup() {
  if [[ -n $pid ]]; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.log; do
    [[ -f $f ]] && { echo "--- $f" >&2; tail -n 60 "$f" >&2; }
  done
  exit 1
}

"$cmake_bin" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  fail "cmake --install"

# The package's contents.
while IFS= read -r header; do
  [[ -f $prefix/include/$header ]] || fail "header $header not installed"
done < <(cd "$petrel_src/include" && find petrel -name '*.h')
for lib in common quic http server; do
  [[ -n $(find "$prefix" -name "libpetrel_$lib.a") ]] || fail "libpetrel_$lib.a not installed"
done
config=$(find "$prefix" -name PetrelConfig.cmake)
[[ -n $config ]] || fail "PetrelConfig.cmake not installed"
cmake_dir=$(dirname "$config")
for f in PetrelConfigVersion.cmake PetrelTargets.cmake FindBoringSSL.cmake FindNgtcp2.cmake \
  FindNghttp3.cmake FindNghttp2.cmake; do
  [[ -f $cmake_dir/$f ]] || fail "$f not installed next to PetrelConfig.cmake"
done
# Nothing in the package may point back into the tree it came from (src/ in particular).
if grep -n -e "$petrel_src" -e "$build" "$cmake_dir"/*.cmake >"$work/leak.log"; then
  fail "the package names the source or build tree"
fi

# The outside project, copied out of the Petrel tree: nothing but the prefix to find Petrel with.
cp -r "$consumer_src" "$work/consumer"
"$cmake_bin" -S "$work/consumer" -B "$work/build" -G "$generator" \
  -DCMAKE_MAKE_PROGRAM="$make_program" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/configure.log" 2>&1 || fail "consumer configure"
grep -q "Petrel 0\..* from $cmake_dir" "$work/configure.log" ||
  fail "the consumer did not find the Petrel installed in $prefix"
"$cmake_bin" --build "$work/build" -j 2 >"$work/build.log" 2>&1 || fail "consumer build"
if grep -n "$petrel_src" "$work/build/build.ninja" "$work/build/CMakeCache.txt" \
  >"$work/leak.log" 2>/dev/null; then
  fail "the consumer's build names the Petrel source tree"
fi
bin=$work/build/petrel_consumer

ldd "$bin" >"$work/ldd.log" 2>&1 || fail "ldd"
grep -q "not found" "$work/ldd.log" && fail "a library of the consumer is not found"
grep -Eq 'lib(ssl|crypto)\.so\.3' "$work/ldd.log" && fail "the consumer loads OpenSSL 3"
grep -Eq 'libssl\.so.* => /' "$work/ldd.log" || fail "the consumer does not load BoringSSL's libssl"

"$bin" >"$work/run.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  grep -q "listening" "$work/run.log" && break
  kill -0 "$pid" 2>/dev/null || fail "the consumer exited at start"
  sleep 0.05
done
read -r http_port https_port < <(sed -n 's/.*listening: http \([0-9]*\) https \([0-9]*\).*/\1 \2/p' \
  "$work/run.log")
[[ -n ${https_port:-} ]] || fail "the consumer did not start within 30 s"

want="hello from an installed Petrel over"
got=$(curl -sS --max-time 30 "http://127.0.0.1:$http_port/hello") || fail "curl h1"
[[ $got == "$want HTTP/1.1" ]] || fail "h1: got '$got'"
got=$(curl -sS --max-time 30 -k --http2 "https://127.0.0.1:$https_port/hello") || fail "curl h2"
[[ $got == "$want HTTP/2" ]] || fail "h2: got '$got'"
if [[ -x $gtlsclient ]]; then
  mkdir -p "$work/dl"
  timeout 60 "$gtlsclient" -q --exit-on-all-streams-close --download "$work/dl" 127.0.0.1 \
    "$https_port" "https://127.0.0.1:$https_port/hello" >"$work/gtlsclient.log" 2>&1 ||
    fail "gtlsclient"
  [[ $(cat "$work/dl/hello") == "$want HTTP/3" ]] || fail "h3: got '$(cat "$work/dl/hello")'"
else
  fail "$gtlsclient missing (scripts/install-deps.sh installs ngtcp2-client)"
fi
got=$(curl -sS --max-time 30 "http://127.0.0.1:$http_port/quit") || fail "curl /quit"
[[ $got == "bye" ]] || fail "/quit: got '$got'"
timeout 20 tail --pid="$pid" -f /dev/null || fail "the consumer did not exit after /quit"
rc=0
wait "$pid" || rc=$?
pid=""
((rc == 0)) || fail "the consumer's exit status: $rc"
grep -q "consumer: stopped" "$work/run.log" || fail "no 'stopped' line"
echo "install: ok"
