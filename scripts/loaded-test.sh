#!/usr/bin/env bash
# Runs the README's test command (scripts/test.sh) while other processes keep every core busy:
# the way to find tests that pass on an idle machine and fail by chance on a loaded one (a test
# that waits on time instead of events, a timeout too tight for a slow run). One busy loop per
# core, at normal priority, runs whenever ctest runs (the tests and the fuzz runs); while the command
# compiles the loops are paused, since load there would only make the run longer.
#
# Usage: bash scripts/loaded-test.sh [--runs N] [--always] [--log-dir DIR]
#   --runs N      run the test command N times, one after the other (default 1); each run
#                 builds in the same tree, so the second and later ones compile nothing
#   --always      keep the loops running while it compiles too
#   --log-dir DIR where each run's output goes (default: a new directory under /tmp)
# Environment: passed on to scripts/test.sh (JOBS, PETREL_TEST_SKIP_SANITIZERS, ...).
#
# Prints one line per run: its exit status, the "N passed, M failed" line, its duration and
# the seconds of it that ran loaded (every loop alive and running beside ctest). Exit status: 0
# when every run passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=1
always=0
log_dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs=${2:?}; shift 2 ;;
    --always) always=1; shift ;;
    --log-dir) log_dir=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "loaded-test.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[0-9]+$ ]] && ((runs > 0)) || { echo "--runs: not a positive integer" >&2; exit 2; }
[[ -n $log_dir ]] || log_dir=$(mktemp -d /tmp/petrel-loaded-XXXXXX)
mkdir -p "$log_dir"

loops=()
watcher=""
stop_load() {
  [[ -z $watcher ]] || kill "$watcher" 2>/dev/null || true
  watcher=""
  for p in "${loops[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  loops=()
}
trap stop_load EXIT

# The loops, and a watcher that lets them run only while a test runs. It counts the seconds
# it saw every loop alive and running, so that each run can say how much of it was loaded. The
# loops ignore SIGHUP: started from a shell that has gone (a process group without a parent in
# the session), stopping and resuming them could otherwise end them with the kernel's SIGHUP to
# an orphaned group that has stopped members.
start_load() { # seconds-file
  local seconds_file=$1 i
  for i in $(seq 1 "$(nproc)"); do
    bash -c 'trap "" HUP; while :; do :; done' &
    loops+=($!)
    kill -STOP "$!"
  done
  (
    loaded=0
    state=stop
    while sleep 1; do
      if ((always)) || pgrep -x -g 0 ctest >/dev/null; then
        want=run
      else
        want=stop
      fi
      if [[ $want != "$state" ]]; then
        if [[ $want == run ]]; then sig=CONT; else sig=STOP; fi
        for p in "${loops[@]}"; do kill -"$sig" "$p" 2>/dev/null || true; done
        state=$want
      fi
      alive=1
      for p in "${loops[@]}"; do kill -0 "$p" 2>/dev/null || alive=0; done
      [[ $state == run ]] && ((alive)) && loaded=$((loaded + 1)) && echo "$loaded" >"$seconds_file"
    done
  ) &
  watcher=$!
}

failed=0
for run in $(seq 1 "$runs"); do
  log=$log_dir/run$run.log
  seconds_file=$log_dir/run$run.loaded-seconds
  echo 0 >"$seconds_file"
  start_load "$seconds_file"
  start=$(date +%s)
  set +e
  bash scripts/test.sh >"$log" 2>&1
  rc=$?
  set -e
  elapsed=$(($(date +%s) - start))
  stop_load
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1 || true)
  failing=$(grep -E '^test.sh: failing runs:' "$log" | tail -n1 || true)
  echo "run $run: exit $rc, ${summary:-no summary}, ${elapsed} s, loaded $(cat "$seconds_file") s" \
    "${failing:+($failing)} — $log"
  if ((rc != 0)); then
    failed=1
    grep -E '\*\*\*(Failed|Timeout|Exception)|FAILED  \]' "$log" | sort -u | head -n 40 || true
  fi
done
exit "$failed"
