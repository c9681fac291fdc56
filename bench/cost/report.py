#!/usr/bin/env python3
"""Turns the raw outputs of bench/cost/run.sh into its markdown report.

Every cost is (cost at the larger load - cost at the smaller load) / (difference of the loads),
so what does not grow with the load (start-up, handshakes in request mode, shutdown) cancels.
Reads from --dir, per protocol P, server S and load L:
  P.S.L.callgrind.json   callgrind_cost.py's summary of the callgrind run
  P.S.L.strace.out       strace -c -f's table (optional)
  P.S.latency.out        h2load -c1 -m1 or petrel-bench -c 1 -m 1 output (optional)
  P.S.cpu.out            bulk mode: one line per untraced download, server_cpu_s and wall_s
In bulk mode the loads are file sizes in MB and every cost is per GB (10^9 bytes).
"""

import argparse
import json
import os
import re

LIB_COLUMNS = [
    ("own", "own code"),
    ("abseil", "abseil"),
    ("nghttp2", "nghttp2"),
    ("nghttp3", "nghttp3"),
    ("ngtcp2", "ngtcp2"),
    ("tls", "TLS+crypto"),
    ("malloc", "malloc/free"),
    ("libc", "other libc"),
    ("cxxrt", "libstdc++"),
    ("other", "other"),
]


def peer_of(proto):
    return "gtlsserver" if proto.startswith("h3") else "nginx"


def read_cpu(path):
    """[(mb, server_cpu_s, wall_s)] from run.sh's untraced bulk downloads; [] when missing."""
    if not os.path.exists(path):
        return []
    rounds = []
    for line in open(path):
        kv = dict(item.split("=", 1) for item in line.split())
        rounds.append((float(kv["mb"]), float(kv["server_cpu_s"]), float(kv["wall_s"])))
    return rounds


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def read_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def read_strace(path):
    """{syscall: calls} from strace -c's table; None when the file is missing."""
    if not os.path.exists(path):
        return None
    calls = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) < 5 or not re.match(r"^\d+\.\d+$", fields[0]):
                continue
            name = fields[-1]
            if name == "total":
                continue
            calls[name] = calls.get(name, 0) + int(fields[3])
    return calls


def read_latency(path, proto):
    """(min_us, mean_us) for h1/h2 from h2load, (min_us, p50_us) for h3 from petrel-bench."""
    if not os.path.exists(path):
        return None
    text = open(path).read()
    if proto == "h3":
        m = re.search(r"^summary: (.*)$", text, re.M)
        if not m:
            return None
        kv = dict(item.split("=", 1) for item in m.group(1).split())
        return float(kv["latency_min_us"]), float(kv["latency_p50_us"])
    m = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", text)
    if not m:
        return None

    def us(v):
        num = float(re.match(r"[\d.]+", v).group(0))
        if v.endswith("ms"):
            return num * 1000
        if v.endswith("us"):
            return num
        if v.endswith("s"):
            return num * 1e6
        return num

    return us(m.group(1)), us(m.group(3))


class Row:
    def __init__(self, proto, server, lo, hi, d, span):
        self.proto, self.server = proto, server
        self.ok = False
        a = read_json(os.path.join(d, "%s.%s.%d.callgrind.json" % (proto, server, lo)))
        b = read_json(os.path.join(d, "%s.%s.%d.callgrind.json" % (proto, server, hi)))
        if a and b:
            self.ok = True
            self.instr = (b["total"] - a["total"]) / span
            self.libs = {k: (b["by_lib"][k] - a["by_lib"][k]) / span for k in b["by_lib"]}
            calls = {k: (b["calls"][k] - a["calls"][k]) / span for k in b["calls"]}
            self.allocs = calls["malloc"] + calls["calloc"] + calls["realloc"]
            self.new = calls["operator new"]
            self.free = calls["free"]
        sa = read_strace(os.path.join(d, "%s.%s.%d.strace.out" % (proto, server, lo)))
        sb = read_strace(os.path.join(d, "%s.%s.%d.strace.out" % (proto, server, hi)))
        self.syscalls = None
        if sa is not None and sb is not None:
            names = set(sa) | set(sb)
            self.syscalls = {n: (sb.get(n, 0) - sa.get(n, 0)) / span for n in names}
        self.latency = read_latency(os.path.join(d, "%s.%s.latency.out" % (proto, server)), proto)
        # Bulk mode: server CPU seconds and wall seconds per GB, the median of the rounds.
        cpu = read_cpu(os.path.join(d, "%s.%s.cpu.out" % (proto, server)))
        self.cpu_per_gb = median([c / (mb / 1000.0) for mb, c, _ in cpu]) if cpu else None
        self.wall_per_gb = median([t / (mb / 1000.0) for mb, _, t in cpu]) if cpu else None
        self.cpu_rounds = ", ".join("%.2f" % (c / (mb / 1000.0)) for mb, c, _ in cpu)


def fmt_instr(v, bulk=False):
    if bulk:
        return "%.3f G" % (v / 1e9)
    # Whole instructions: the run-to-run spread (well under 1 %) shows in the last digits.
    return "{:,}".format(int(round(v)))


def fmt(v, digits=1):
    return ("%%.%df" % digits) % v


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    return "%.2f×" % (a / b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--lo", type=int, required=True)
    ap.add_argument("--hi", type=int, required=True)
    ap.add_argument("--protocols", required=True)
    ap.add_argument("--servers", default="petrel,peer")
    ap.add_argument("--h1-connections", type=int, default=10)
    ap.add_argument("--h2-connections", type=int, default=1)
    ap.add_argument("--h3-connections", type=int, default=4)
    ap.add_argument("--h3-sequential", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--streams", type=int, default=10)
    ap.add_argument("--latency-n", type=int, default=2000)
    ap.add_argument("--h3-latency-n", type=int, default=200)
    ap.add_argument("--cpu-mb", type=int, default=0)
    ap.add_argument("--versions", default="")
    ap.add_argument("--elapsed", type=int, default=0)
    ap.add_argument("--date", default="")
    ap.add_argument("--machine", default="")
    a = ap.parse_args()

    protos = a.protocols.split(",")
    servers = a.servers.split(",")
    request_mode = a.mode == "request"
    bulk = a.mode == "bulk"
    unit = {"request": "req", "handshake": "conn", "bulk": "GB"}[a.mode]
    # Bulk loads are MB; the costs are per GB.
    span = (a.hi - a.lo) / 1000.0 if bulk else a.hi - a.lo
    rows = []
    for p in protos:
        for s in servers:
            rows.append(Row(p, "petrel" if s == "petrel" else peer_of(p), a.lo, a.hi, a.dir, span))

    out = []
    w = out.append
    if request_mode:
        w("Per-request cost, `bench/cost/run.sh --mode request` — %s" % a.date)
        w("")
        w("- loads: %d and %d requests; cost per request = difference / %d, so start-up, "
          "handshakes and shutdown cancel" % (a.lo, a.hi, a.hi - a.lo))
        if a.h3_sequential:
            h3_load = ("`petrel-bench -k -c 1 -m 1 -n N` (one request at a time on one "
                       "connection)")
        else:
            h3_load = ("%d `gtlsclient -n N/%d` connections in parallel (up to 100 streams "
                       "each)" % (a.h3_connections, a.h3_connections))
        w("- h1: `h2load --h1 -c %d -n N`; h2 (TLS) and h2c: `h2load -c %d -m %d -n N`; h3: %s"
          % (a.h1_connections, a.h2_connections, a.streams, h3_load))
        w("- latency (no tracer, one warm connection, one request at a time): h1/h2/h2c "
          "`h2load -c1 -m1 -n %d` min and mean; h3 `petrel-bench -c 1 -m 1 -n %d` min and p50"
          % (a.latency_n, a.h3_latency_n))
    elif bulk:
        w("Cost per GB of one HTTP/3 download, `bench/cost/run.sh --mode bulk` — %s" % a.date)
        w("")
        w("- loads: one download of a random file of %d MB and one of %d MB, each on a fresh "
          "server and one connection; cost per GB = difference / %.3f GB, so start-up, the "
          "handshake and shutdown cancel" % (a.lo, a.hi, span))
        w("- clients: h3 = `gtlsclient --download DIR` (the file compared byte for byte), "
          "h3-bench = `petrel-bench -c 1 -m 1 -n 1` (body bytes counted)")
        if a.cpu_mb:
            w("- server CPU s/GB and wall s/GB: untraced downloads of %d MB on one server, "
              "user + system time from /proc (median of the rounds; each round's CPU s/GB in "
              "the last column)" % a.cpu_mb)
    else:
        w("Per-connection cost (handshake + one request + close), `bench/cost/run.sh --mode "
          "handshake` — %s" % a.date)
        w("")
        w("- loads: %d and %d connections, one after the other, one request each; cost per "
          "connection = difference / %d" % (a.lo, a.hi, a.hi - a.lo))
        w("- h1: HTTP/1.1 over TLS (`h2load --h1 -c 1 -n 1 https://`); h2: `h2load -c 1 -n 1 "
          "https://`; h3: `gtlsclient -n 1`; no session resumption")
    w("- instructions and allocations: `valgrind --tool=callgrind` on the server process "
      "(user space only); syscalls: `strace -c -f` on the server, a separate run")
    w("- servers: petrel-server `--workers %d`; nginx `master_process off; worker_processes 1` "
      "(h2c: `sendfile off`); gtlsserver as is; %s" % (a.workers, a.versions))
    w("- machine: %s; the whole run took %d s" % (a.machine, a.elapsed))
    w("")

    lat = request_mode
    head = ["protocol", "server", "instr/%s" % unit, "allocs/%s" % unit, "operator new/%s" % unit,
            "free/%s" % unit, "syscalls/%s" % unit]
    if lat:
        head += ["latency min µs", "latency mean µs (h3: p50)"]
    if bulk:
        head += ["server CPU s/GB", "wall s/GB", "CPU s/GB by round"]
    w("| " + " | ".join(head) + " |")
    w("| " + " | ".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + " |")

    def sys_total(r):
        return sum(r.syscalls.values()) if r.syscalls is not None else None

    for p in protos:
        prow = [r for r in rows if r.proto == p]
        for r in prow:
            cells = [p, r.server]
            digits = 0 if bulk else 1
            if r.ok:
                cells += [fmt_instr(r.instr, bulk), fmt(r.allocs, digits), fmt(r.new, digits),
                          fmt(r.free, digits)]
            else:
                cells += ["-"] * 4
            st = sys_total(r)
            cells.append(fmt(st, 0 if bulk else 2) if st is not None else "-")
            if lat:
                cells += ([fmt(r.latency[0], 0), fmt(r.latency[1], 0)] if r.latency else ["-", "-"])
            if bulk:
                cells += [fmt(r.cpu_per_gb, 2) if r.cpu_per_gb is not None else "-",
                          fmt(r.wall_per_gb, 2) if r.wall_per_gb is not None else "-",
                          r.cpu_rounds or "-"]
            w("| " + " | ".join(cells) + " |")
        if len(prow) == 2 and prow[0].ok and prow[1].ok:
            x, y = prow
            cells = [p, "petrel / %s" % y.server, ratio(x.instr, y.instr), ratio(x.allocs, y.allocs),
                     "", ratio(x.free, y.free), ratio(sys_total(x), sys_total(y))]
            if lat:
                cells += [ratio(x.latency and x.latency[0], y.latency and y.latency[0]),
                          ratio(x.latency and x.latency[1], y.latency and y.latency[1])]
            if bulk:
                cells += [ratio(x.cpu_per_gb, y.cpu_per_gb), ratio(x.wall_per_gb, y.wall_per_gb), ""]
            w("| " + " | ".join(cells) + " |")
    w("")
    w("allocs = calls to malloc + calloc + realloc (operator new calls malloc, so it is inside; "
      "its own count is beside it); free = calls to free.")
    w("")

    w("Instructions per %s by library (%s; self cost of the library's functions):"
      % (unit, "G" if bulk else "thousands"))
    w("")
    w("| protocol | server | " + " | ".join(c[1] for c in LIB_COLUMNS) + " |")
    w("| --- | --- | " + " | ".join(["---:"] * len(LIB_COLUMNS)) + " |")
    for r in rows:
        if not r.ok:
            continue
        w("| %s | %s | " % (r.proto, r.server) +
          " | ".join(("%.2f" % (r.libs.get(k, 0) / (1e9 if bulk else 1000.0)))
                     for k, _ in LIB_COLUMNS) + " |")
    w("")
    w("own code = the server's executable (Petrel's libraries are linked into petrel-server), "
      "abseil = absl:: functions inside it; TLS+crypto = BoringSSL (Petrel), OpenSSL 3 (nginx), "
      "GnuTLS + nettle + gmp (gtlsserver); ngtcp2 includes gtlsserver's libngtcp2_crypto_gnutls; "
      "malloc/free = glibc's allocator; other = the dynamic loader, libev, pcre, zlib, ...")
    w("")

    if any(r.syscalls is not None for r in rows):
        w("Syscalls per %s (strace -c -f; calls of at least 0.01 per %s):" % (unit, unit))
        w("")
        w("| protocol | server | syscalls |")
        w("| --- | --- | --- |")
        for r in rows:
            if r.syscalls is None:
                continue
            items = sorted(((v, n) for n, v in r.syscalls.items() if abs(v) >= 0.01),
                           key=lambda t: (-t[0], t[1]))
            each = "%s %.0f" if bulk else "%s %.2f"
            w("| %s | %s | %s |" % (r.proto, r.server,
                                    ", ".join(each % (n, v) for v, n in items) or "-"))
        w("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
