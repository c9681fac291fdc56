#!/usr/bin/env bash
# Installs what is missing, builds petrel-server and the HTTP/3 clients the README goes on to use
# (petrel-client, petrel-bench; Release) and starts the server with its embedded defaults. Extra
# arguments go to petrel-server. This is the README's first command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DPETREL_BUILD_TESTS=OFF \
  -DPETREL_BUILD_BENCH=OFF >/dev/null
cmake --build build-release --target petrel-server petrel-client petrel-bench -j "${JOBS:-$(nproc)}"
exec build-release/src/server/petrel-server "$@"
