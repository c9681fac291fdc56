#!/usr/bin/env bash
# Builds Petrel and runs every test: the full suite, the unit tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, the concurrency tests under ThreadSanitizer, and
# every fuzz target for a bounded time.
# Installs what is missing first. This is the README's test command and what CI runs.
#
# Environment: JOBS (default: nproc), PETREL_TEST_SKIP_SANITIZERS=1 to run only the plain build.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${JOBS:-$(nproc)}

bash scripts/install-deps.sh

total_pass=0
total_fail=0
failed_runs=()

# configure_and_build DIR [cmake args...]
configure_and_build() {
  local dir=$1
  shift
  cmake -S "$root" -B "$dir" -G Ninja -DPETREL_WERROR=ON "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j "$jobs"
}

# run_ctest NAME DIR [ctest args...]: runs ctest, adds its counts to the totals.
run_ctest() {
  local name=$1 dir=$2
  shift 2
  local log="$dir/ctest.log"
  echo "=== ctest ($name) ==="
  set +e
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n1 || true)
  if [[ $line =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
    local failed=${BASH_REMATCH[1]} all=${BASH_REMATCH[2]}
    total_fail=$((total_fail + failed))
    total_pass=$((total_pass + all - failed))
  else
    total_fail=$((total_fail + 1))
  fi
  if ((rc != 0)); then failed_runs+=("$name"); fi
}

mkdir -p build
configure_and_build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
run_ctest plain build

if [[ ${PETREL_TEST_SKIP_SANITIZERS:-0} != 1 ]]; then
  # Unit and loopback tests under ASan + UBSan. Tests labelled `nosan` (heavy external-peer runs)
  # are left to the plain build.
  mkdir -p build-asan
  configure_and_build build-asan -DCMAKE_BUILD_TYPE=Debug -DPETREL_SANITIZE=address,undefined \
    -DPETREL_BUILD_BENCH=OFF
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest asan-ubsan build-asan -LE 'nosan|tools'

  # Every test labelled `concurrency` under ThreadSanitizer.
  mkdir -p build-tsan
  configure_and_build build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPETREL_SANITIZE=thread \
    -DPETREL_BUILD_BENCH=OFF
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest tsan build-tsan -L concurrency

  # Every libFuzzer target (fuzz/, clang + ASan + UBSan) for PETREL_FUZZ_SECONDS (default 20)
  # from its checked-in seeds: a crash or a violated property fails the run.
  bash scripts/fuzz.sh --build-only --jobs "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest fuzz build-fuzz -L fuzz
fi

echo
if ((${#failed_runs[@]} > 0)); then
  echo "test.sh: failing runs: ${failed_runs[*]}"
fi
echo "$total_pass passed, $total_fail failed"
((total_fail == 0 && ${#failed_runs[@]} == 0))
