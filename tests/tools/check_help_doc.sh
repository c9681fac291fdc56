#!/usr/bin/env bash
# Checks that a binary's --help output is the text kept in docs/, so the reference cannot go
# stale. Usage: check_help_doc.sh BINARY DOC-FILE  (regenerate: BINARY --help > DOC-FILE)
set -euo pipefail
got="$("$1" --help)"
if ! diff -u "$2" <(printf '%s\n' "$got"); then
  echo "FAIL: $2 differs from '$(basename "$1") --help'; regenerate it with: $1 --help > $2" >&2
  exit 1
fi
echo "$(basename "$2"): up to date"
