#!/usr/bin/env python3
"""Sums a callgrind output file into the figures bench/cost/run.sh reports.

Reads the callgrind.out format itself (name compression included) rather than the text of
callgrind_annotate, whose layout changes between valgrind versions. Prints one JSON object:

  total            instructions (Ir) of the whole process, from the cost lines
  summary          the file's own `summary:`/`totals:` figure, to check the parse against
  by_lib           self Ir per library class (see classify_object)
  calls            call counts of the allocation functions (malloc, calloc, realloc, free,
                   operator new, operator delete)
  complete         whether the file ends with its `totals:` line (callgrind writes it last)

Self cost is what a function executes itself; the cost line after a `calls=` line is the
inclusive cost of that call and belongs to the callee, so it is skipped here.

Usage: callgrind_cost.py [--own PATH] [--top N] FILE
  --own PATH   the server's own executable (its code is the `own` class); default: the program
               the file's `cmd:` line names
  --top N      also list the N functions with the highest self cost (for looking into a result)
"""

import argparse
import json
import os
import re
import sys

# libc functions that make up malloc/free, for the `malloc` class. glibc's debug information
# also names the source file, which catches the static helpers (see is_malloc_file).
MALLOC_FUNCTIONS = {
    "malloc", "free", "calloc", "realloc", "cfree", "memalign", "posix_memalign",
    "aligned_alloc", "valloc", "pvalloc", "malloc_usable_size", "_int_malloc", "_int_free",
    "_int_realloc", "_int_memalign", "malloc_consolidate", "sysmalloc", "unlink_chunk",
    "tcache_init", "tcache_init.part.0", "ptmalloc_init", "ptmalloc_init.part.0",
    "__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc", "__malloc_arena_thread_freeres",
    "arena_get2", "arena_get2.part.0", "_int_free_merge_chunk", "_int_free_create_chunk",
    "_int_free_maybe_consolidate", "malloc_printerr", "checked_request2size",
}

ALLOC_NAMES = ("malloc", "calloc", "realloc", "free")

# The classes, in the order the report prints them.
CLASSES = ("own", "abseil", "nghttp2", "nghttp3", "ngtcp2", "tls", "malloc", "libc", "cxxrt",
           "other")


def classify_object(path, own):
    """The library class of a shared object or executable, by its file name."""
    if own is not None and (path == own or os.path.basename(path) == os.path.basename(own)):
        return "own"
    base = os.path.basename(path)
    if base.startswith("libnghttp2"):
        return "nghttp2"
    if base.startswith("libnghttp3"):
        return "nghttp3"
    # ngtcp2's own crypto helpers (gtlsserver links libngtcp2_crypto_gnutls) count with
    # ngtcp2; Petrel's equivalent glue is part of its own code.
    if base.startswith("libngtcp2"):
        return "ngtcp2"
    # BoringSSL (Petrel), OpenSSL 3 (nginx), GnuTLS with nettle/hogweed/gmp (gtlsserver).
    if re.match(r"lib(ssl|crypto|gnutls|nettle|hogweed|gmp|tasn1|p11-kit|idn2|unistring)\b",
                base):
        return "tls"
    if base.startswith("libabsl"):
        return "abseil"
    if re.match(r"libc[.-]", base):
        return "libc"
    if re.match(r"lib(stdc\+\+|gcc_s)\.so", base):
        return "cxxrt"
    return "other"


def is_malloc_file(name):
    return "/malloc/malloc.c" in name or "/malloc/arena.c" in name


def is_abseil_function(name):
    """Whether a demangled name is a function of namespace absl (inlined into the caller)."""
    head = name.split("(", 1)[0]
    # A template function's demangled name starts with its return type: skip to the name.
    depth = 0
    start = 0
    for i, ch in enumerate(head):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == " " and depth == 0:
            start = i + 1
    return head[start:].startswith("absl::")


class Names:
    """One compressed-name table: `(id) name` defines, `(id)` refers back."""

    def __init__(self):
        self.by_id = {}

    def resolve(self, text):
        text = text.strip()
        m = re.match(r"\((\d+)\)\s*(.*)$", text)
        if not m:
            return text
        ident, name = m.group(1), m.group(2)
        if name:
            self.by_id[ident] = name
            return name
        return self.by_id.get(ident, "(%s)" % ident)


def parse(path, own):
    objects, files, functions = Names(), Names(), Names()
    by_lib = dict.fromkeys(CLASSES, 0)
    calls = {n: 0 for n in ALLOC_NAMES + ("operator new", "operator delete")}
    per_function = {}
    total = 0
    summary = None
    totals = None
    events = None
    positions = 1
    cmd_object = None

    ob = None
    fl = None
    fn = None
    fn_class = "other"
    cob = None
    cfn = None
    skip_next_cost = False

    def function_class(obj, name, file_name):
        cls = classify_object(obj or "", own)
        if cls == "libc" and (name in MALLOC_FUNCTIONS or is_malloc_file(file_name or "")):
            return "malloc"
        if cls == "own" and is_abseil_function(name):
            return "abseil"
        return cls

    with open(path, "r", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            c0 = line[0]
            if c0.isdigit() or c0 in "+-*":
                if skip_next_cost:
                    skip_next_cost = False
                    continue
                fields = line.split()
                costs = fields[positions:]
                ir = int(costs[0]) if costs else 0
                total += ir
                by_lib[fn_class] += ir
                if fn is not None:
                    key = (fn, ob)
                    per_function[key] = per_function.get(key, 0) + ir
                continue
            key, sep, value = line.partition("=")
            if sep:
                if key == "ob":
                    ob = objects.resolve(value)
                elif key == "fl":
                    fl = files.resolve(value)
                elif key in ("fi", "fe"):
                    # Inlined code: cost stays with the function, but the name table grows.
                    files.resolve(value)
                elif key == "fn":
                    fn = functions.resolve(value)
                    fn_class = function_class(ob, fn, fl)
                elif key == "cob":
                    cob = objects.resolve(value)
                elif key in ("cfi", "cfl"):
                    files.resolve(value)
                elif key == "cfn":
                    cfn = functions.resolve(value)
                elif key == "calls":
                    count = int(value.split()[0])
                    target_obj = cob if cob is not None else ob
                    target_cls = classify_object(target_obj or "", own)
                    if cfn in ALLOC_NAMES and target_cls == "libc":
                        calls[cfn] += count
                    elif cfn is not None and cfn.startswith("operator new") and \
                            not (fn or "").startswith("operator new"):
                        # operator new[] forwards to operator new: count the outer call once.
                        calls["operator new"] += count
                    elif cfn is not None and cfn.startswith("operator delete") and \
                            not (fn or "").startswith("operator delete"):
                        calls["operator delete"] += count
                    cob = None
                    skip_next_cost = True
                elif key in ("jump", "jcnd"):
                    skip_next_cost = True
                continue
            key, sep, value = line.partition(":")
            if sep:
                value = value.strip()
                if key == "events":
                    events = value.split()
                elif key == "positions":
                    positions = len(value.split())
                elif key == "summary":
                    summary = int(value.split()[0])
                elif key == "totals":
                    totals = int(value.split()[0])
                elif key == "cmd" and value:
                    cmd_object = value.split()[0]
                    if own is None:
                        own = cmd_object

    if events and events[0] != "Ir":
        sys.exit("callgrind_cost: first event is %s, want Ir" % events[0])
    return {
        "file": path,
        "cmd_object": cmd_object,
        "total": total,
        "summary": summary,
        "totals": totals,
        "complete": totals is not None,  # written last: a cut file has none
        "by_lib": by_lib,
        "calls": calls,
        "per_function": per_function,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--own", help="the server's own executable")
    ap.add_argument("--top", type=int, default=0, help="list the N costliest functions")
    ap.add_argument("file")
    args = ap.parse_args()
    result = parse(args.file, args.own)
    top = sorted(result.pop("per_function").items(), key=lambda kv: -kv[1])[:args.top]
    if args.top:
        result["top"] = [{"fn": k[0], "ob": os.path.basename(k[1] or "?"), "ir": v}
                         for k, v in top]
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
