# Sourced first by the server shell tests that need a loopback of their own (thousands of
# connections, fixed ports): re-executes the calling script inside a private network namespace
# with its own loopback when the kernel allows an unprivileged one. Afterwards
# PETREL_TEST_NETNS is "active" inside one, "none" where none could be made.
# Usage, at the top of a script: source "$(dirname "$0")/private_netns.sh" "$0" "$@"
if [[ -z "${PETREL_TEST_NETNS:-}" ]]; then
  if unshare -rn true 2>/dev/null; then
    export PETREL_TEST_NETNS=active
    exec unshare -rn bash -c 'ip link set lo up && exec bash "$0" "$@"' "$@"
  fi
  export PETREL_TEST_NETNS=none
  echo "note: no private network namespace here; using the machine's loopback" >&2
fi
