#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang, ASan and UBSan (in build-fuzz/) and runs each
# for a bounded time from its checked-in seeds. Part of the README's test command; also the way
# to run longer campaigns.
#
# Usage: scripts/fuzz.sh [--seconds N] [--jobs N] [--build-only] [TARGET...]
#   --seconds N   run each target N seconds (default: PETREL_FUZZ_SECONDS or 20)
#   --build-only  configure and build, run nothing (scripts/test.sh runs the ctest itself)
#   TARGET...     only these targets (names as in fuzz/CMakeLists.txt, e.g. h1_request_fuzz)
# Crashes and property violations go to build-fuzz/fuzz/fuzz-artifacts/; inputs that found new
# coverage to build-fuzz/fuzz/corpus/<target>/ (copy the useful ones into fuzz/corpus/).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${PETREL_FUZZ_SECONDS:-20}
jobs=${JOBS:-$(nproc)}
targets=()
build_only=0
while (($# > 0)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds == 0)); then
  echo "fuzz.sh: --seconds wants a positive number, not '$seconds'" >&2
  exit 2
fi

dir=build-fuzz
mkdir -p "$dir"
CC=clang CXX=clang++ cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DPETREL_FUZZ=ON -DPETREL_SANITIZE=address,undefined -DPETREL_WERROR=ON \
  -DPETREL_BUILD_TESTS=OFF -DPETREL_BUILD_BENCH=OFF -DPETREL_FUZZ_SECONDS="$seconds" \
  >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
if ((${#targets[@]} > 0)); then
  cmake --build "$dir" -j "$jobs" --target "${targets[@]}"
else
  cmake --build "$dir" -j "$jobs" --target petrel_fuzz
fi

if ((build_only)); then exit 0; fi

filter=()
if ((${#targets[@]} > 0)); then
  filter=(-R "^($(IFS='|'; echo "${targets[*]}"))\$")
fi
# Leak checking stays on; a target's own setup (a static tree) is built once and kept.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" -L fuzz "${filter[@]}"
