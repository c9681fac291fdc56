#!/usr/bin/env python3
"""Packet-trace checks of the local interop runner (interop/local/run.sh).

Given one test case, the loopback capture of a run, the TLS key log(s) and the www / downloads
directories, this decides whether the run did what the QUIC interop runner expects of that test
case, and says why not when it did not.

Two legs are told apart by UDP port (one capture on `lo` holds both):
  client leg  = packets to / from the simulator's listen port (what the client sent / received),
  server leg  = packets to / from the server's port(s)        (what the server sent / received).
Without a simulator both legs are the same packets.

The capture is first rewritten so that UDP GSO "super-datagrams" (captured on lo before the kernel
splits them) become one datagram per segment; otherwise tshark would read ten 1-RTT packets as
one undecryptable packet.

Exit status: 0 pass, 1 fail, 3 the case cannot be checked (e.g. no usable key log), 2 usage or
internal error. The last line on stdout is `PASS <case>: ...`, `FAIL <case>: <reason>` or
`UNSUPPORTED <case>: <reason>`.
"""

import argparse
import filecmp
import json
import os
import struct
import subprocess
import sys
import tempfile

QUIC_V1 = 0x00000001
QUIC_V2 = 0x6B3343CF  # RFC 9369
QUIC_V2_DRAFT = 0x709A50C4  # provisional code point of draft-ietf-quic-v2 (ngtcp2 0.12.1)

# Long header packet types by version (the two bits after the fixed bit).
V1_TYPES = {0: "initial", 1: "0rtt", 2: "handshake", 3: "retry"}
V2_TYPES = {1: "initial", 2: "0rtt", 3: "handshake", 0: "retry"}

CHACHA20 = 0x1303


class CheckFailed(Exception):
    pass


class CheckUnsupported(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# pcap handling: classic pcap in, classic pcap out, GSO super-datagrams split per segment.


def _read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise CheckFailed("capture %s is empty or truncated (tshark did not run?)" % path)
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise CheckFailed("capture %s is not a classic pcap file (capture with -F pcap)" % path)
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    records = []
    off = 24
    while off + 16 <= len(data):
        ts_s, ts_frac, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        body = data[off + 16:off + 16 + incl]
        if len(body) < incl:
            break  # cut short when the capture was stopped
        records.append((ts_s, ts_frac, body))
        off += 16 + incl
    return data[:24], endian, linktype, records


def _l3_offset(linktype, frame):
    """Returns (offset of the IP header, ethertype-ish family) or None."""
    if linktype == 1:  # Ethernet
        if len(frame) < 14:
            return None
        etype = struct.unpack(">H", frame[12:14])[0]
        return 14, etype
    if linktype == 113:  # Linux cooked v1
        return 16, struct.unpack(">H", frame[14:16])[0]
    if linktype == 276:  # Linux cooked v2
        return 20, struct.unpack(">H", frame[0:2])[0]
    if linktype in (101, 12):  # raw IP
        v = frame[0] >> 4
        return 0, 0x0800 if v == 4 else 0x86DD
    if linktype == 0:  # BSD loopback
        return 4, 0x0800 if frame[4] >> 4 == 4 else 0x86DD
    return None


def _varint(buf, pos):
    if pos >= len(buf):
        return None, pos
    first = buf[pos]
    n = 1 << (first >> 6)
    if pos + n > len(buf):
        return None, pos
    v = first & 0x3F
    for i in range(1, n):
        v = (v << 8) | buf[pos + i]
    return v, pos + n


def _walk_long_headers(d):
    """Walks coalesced long-header packets from the start of a UDP payload.

    Returns (offset where the walk stopped, version bytes, dcid) — the offset is len(d) when the
    datagram holds only long-header packets."""
    pos = 0
    version = None
    dcid = None
    while pos < len(d) and d[pos] & 0x80:
        if pos + 6 > len(d):
            return len(d), version, dcid
        ver = d[pos + 1:pos + 5]
        if ver == b"\x00\x00\x00\x00":
            return len(d), ver, dcid  # Version Negotiation: fills the datagram
        dcil = d[pos + 5]
        p = pos + 6
        if version is None:
            version = ver
            dcid = d[p:p + dcil]
        p += dcil
        if p >= len(d):
            return len(d), version, dcid
        scil = d[p]
        p += 1 + scil
        vnum = struct.unpack(">I", ver)[0]
        types = V2_TYPES if vnum in (QUIC_V2, QUIC_V2_DRAFT) else V1_TYPES
        ptype = types.get((d[pos] >> 4) & 0x3)
        if ptype == "retry":
            return len(d), version, dcid
        if ptype == "initial":
            tlen, p = _varint(d, p)
            if tlen is None:
                return len(d), version, dcid
            p += tlen
        length, p = _varint(d, p)
        if length is None:
            return len(d), version, dcid
        pos = p + length
    return min(pos, len(d)), version, dcid


def _segment_start_ok(d, s, version, dcid_prefix):
    if s >= len(d):
        return False
    if d[s] & 0x80:
        return version is not None and d[s + 1:s + 5] == version
    return len(dcid_prefix) > 0 and d[s + 1:s + 1 + len(dcid_prefix)] == dcid_prefix


def _gso_segment_size(d):
    """Guesses the GSO segment size of a captured UDP payload, or None if it is one datagram.

    A GSO batch is made of equal segments (the last may be shorter), each starting with a QUIC
    header of the same connection: a long header with the same version, or a short header with
    the same DCID. The first short-header packet inside the payload ends its segment, so the next
    segment start is the first later offset with a matching header; every multiple of it must
    match too."""
    stop, version, dcid = _walk_long_headers(d)
    if stop >= len(d):
        return None
    if dcid is None:
        # Starts with a short header: the DCID length is unknown; 8 bytes of prefix are plenty
        # (both Petrel and the ngtcp2 examples use CIDs of 8+ bytes).
        dcid = d[stop + 1:stop + 9]
    prefix = dcid[:8]
    if len(prefix) < 4:
        return None
    # The smallest protected short-header packet: header byte, CID, 1-byte packet number,
    # a 1-byte frame and the 16-byte AEAD tag — segments are never shorter than that.
    for s in range(stop + 1 + len(prefix) + 18, len(d)):
        if not _segment_start_ok(d, s, version, prefix):
            continue
        ok = True
        k = 2 * s
        while k < len(d):
            if not _segment_start_ok(d, k, version, prefix):
                ok = False
                break
            k += s
        if ok:
            return s
    return None


def _udp_ports(linktype, frame):
    l3 = _l3_offset(linktype, frame)
    if l3 is None:
        return None
    off, fam = l3
    if fam == 0x0800 and len(frame) >= off + 20 and frame[off + 9] == 17:
        udp = off + (frame[off] & 0xF) * 4
    elif fam == 0x86DD and len(frame) >= off + 48 and frame[off + 6] == 17:
        udp = off + 40
    else:
        return None
    if len(frame) < udp + 8:
        return None
    return struct.unpack(">HH", frame[udp:udp + 4])


def _split_frame(linktype, frame):
    """Returns the frame as a list of frames, one per GSO segment (usually just [frame])."""
    l3 = _l3_offset(linktype, frame)
    if l3 is None:
        return [frame], False
    off, fam = l3
    if fam == 0x0800 and len(frame) >= off + 20 and frame[off + 9] == 17:
        ihl = (frame[off] & 0xF) * 4
        udp = off + ihl
        seg = _gso_segment_size(frame[udp + 8:])
        if not seg:
            return [frame], False
        payload = frame[udp + 8:]
        parts = []
        for i in range(0, len(payload), seg):
            chunk = payload[i:i + seg]
            ip = bytearray(frame[off:off + ihl])
            struct.pack_into(">H", ip, 2, ihl + 8 + len(chunk))
            struct.pack_into(">H", ip, 10, 0)
            csum = 0
            for j in range(0, ihl, 2):
                csum += (ip[j] << 8) | ip[j + 1]
            while csum >> 16:
                csum = (csum & 0xFFFF) + (csum >> 16)
            struct.pack_into(">H", ip, 10, (~csum) & 0xFFFF)
            u = bytearray(frame[udp:udp + 8])
            struct.pack_into(">HH", u, 4, 8 + len(chunk), 0)  # checksum 0: not computed
            parts.append(frame[:off] + bytes(ip) + bytes(u) + chunk)
        return parts, True
    if fam == 0x86DD and len(frame) >= off + 48 and frame[off + 6] == 17:
        udp = off + 40
        seg = _gso_segment_size(frame[udp + 8:])
        if not seg:
            return [frame], False
        payload = frame[udp + 8:]
        parts = []
        for i in range(0, len(payload), seg):
            chunk = payload[i:i + seg]
            ip = bytearray(frame[off:off + 40])
            struct.pack_into(">H", ip, 4, 8 + len(chunk))
            u = bytearray(frame[udp:udp + 8])
            struct.pack_into(">HH", u, 4, 8 + len(chunk), 0)
            parts.append(frame[:off] + bytes(ip) + bytes(u) + chunk)
        return parts, True
    return [frame], False


def split_legs(in_path, legs):
    """Writes one capture per leg: legs maps output path -> set of ports (a datagram belongs to
    a leg when either UDP port is in its set). GSO batches are split per segment. tshark must
    see each leg on its own: both legs carry the same connection IDs, and in one file its QUIC
    connection tracking mixes them up (packets of the second leg stay undecrypted).
    Returns (GSO batches split, frames read)."""
    header, endian, linktype, records = _read_pcap(in_path)
    outs = {path: [header] for path in legs}
    split = 0
    for ts_s, ts_frac, frame in records:
        ports = _udp_ports(linktype, frame)
        if ports is None:
            continue
        targets = [path for path, ps in legs.items() if ports[0] in ps or ports[1] in ps]
        if not targets:
            continue
        parts, did = _split_frame(linktype, frame)
        split += did
        blob = b"".join(struct.pack(endian + "IIII", ts_s, ts_frac, len(p), len(p)) + p
                        for p in parts)
        for t in targets:
            outs[t].append(blob)
    for path, chunks in outs.items():
        with open(path, "wb") as f:
            f.write(b"".join(chunks))
    return split, len(records)


# ---------------------------------------------------------------------------------------------
# tshark → per-datagram records with per-QUIC-packet field multimaps.


def _flatten(obj, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (dict, list)):
                if isinstance(v, list) and all(isinstance(x, str) for x in v):
                    out.setdefault(k, []).extend(v)
                else:
                    _flatten(v, out)
            else:
                out.setdefault(k, []).append(v)
    elif isinstance(obj, list):
        for x in obj:
            _flatten(x, out)


class QuicPacket:
    def __init__(self, fields):
        self.f = fields

    def get(self, name, default=None):
        v = self.f.get(name)
        return v[0] if v else default

    def all(self, name):
        return self.f.get(name, [])

    def has(self, name):
        return name in self.f

    @property
    def long(self):
        return self.get("quic.header_form") == "1"

    @property
    def version(self):
        v = self.get("quic.version")
        return int(v, 16) if v else None

    @property
    def ptype(self):
        if not self.has("quic.header_form"):
            return "invalid"
        if not self.long:
            return "1rtt"
        ver = self.version
        if ver == 0:
            return "vn"
        if self.has("quic.long.packet_type_v2"):
            return V2_TYPES.get(int(self.get("quic.long.packet_type_v2")), "invalid")
        t = self.get("quic.long.packet_type")
        if t is None:
            return "invalid"
        # tshark versions that do not know the draft v2 code point decode its header as v1
        # (types shifted); map by version.
        if ver in (QUIC_V2, QUIC_V2_DRAFT):
            return V2_TYPES.get(int(t), "invalid")
        return V1_TYPES.get(int(t), "invalid")

    def hexfield(self, name):
        v = self.get(name)
        return v.replace(":", "") if v is not None else None

    def nbytes(self, name):
        v = self.get(name)
        if not v:
            return 0
        return len(v.split(":"))


class Datagram:
    def __init__(self, layers):
        self.number = int(layers["frame"]["frame.number"])
        self.time = float(layers["frame"]["frame.time_epoch"])
        if "ipv6" in layers:
            ip = layers["ipv6"]
            self.ipv6 = True
            self.src = ip.get("ipv6.src")
            self.dst = ip.get("ipv6.dst")
            f = {}
            _flatten(ip, f)
            ecn = (f.get("ipv6.tclass.ecn") or ["0"])[0]
        else:
            ip = layers.get("ip", {})
            self.ipv6 = False
            self.src = ip.get("ip.src")
            self.dst = ip.get("ip.dst")
            f = {}
            _flatten(ip, f)
            ecn = (f.get("ip.dsfield.ecn") or ["0"])[0]
        self.ecn = int(ecn)
        udp = layers.get("udp", {})
        self.sport = int(udp.get("udp.srcport", 0))
        self.dport = int(udp.get("udp.dstport", 0))
        self.udp_len = int(udp.get("udp.length", 8))
        self._payload_hex = udp.get("udp.payload", "")
        q = layers.get("quic")
        if q is None:
            qs = []
        elif isinstance(q, list):
            qs = q
        else:
            qs = [q]
        self.quic = []
        for one in qs:
            if not isinstance(one, dict):
                continue
            f = {}
            _flatten(one, f)
            self.quic.append(QuicPacket(f))

    def raw_long_headers(self):
        """(version, type) of each coalesced long-header packet, parsed from the bytes: tshark
        cannot decrypt (nor then walk past) packets of a version it does not know, such as the
        provisional v2 code point."""
        d = bytes.fromhex(self._payload_hex.replace(":", ""))
        out = []
        pos = 0
        while pos + 6 <= len(d) and d[pos] & 0x80:
            ver = struct.unpack(">I", d[pos + 1:pos + 5])[0]
            if ver == 0:
                out.append((0, "vn"))
                break
            types = V2_TYPES if ver in (QUIC_V2, QUIC_V2_DRAFT) else V1_TYPES
            ptype = types[(d[pos] >> 4) & 0x3]
            out.append((ver, ptype))
            p = pos + 5
            p += 1 + d[p]
            if p >= len(d):
                break
            p += 1 + d[p]
            if ptype == "retry":
                break
            if ptype == "initial":
                tl, p = _varint(d, p)
                if tl is None:
                    break
                p += tl
            ln, p = _varint(d, p)
            if ln is None:
                break
            pos = p + ln
        return out

    @property
    def path(self):
        return ((self.src, self.sport), (self.dst, self.dport))

    @property
    def first_type(self):
        return self.quic[0].ptype if self.quic else "invalid"


class Trace:
    """The packets of one leg, split by direction."""

    def __init__(self, datagrams, server_side_ports):
        self.server_ports = set(server_side_ports)
        self.all = [d for d in datagrams
                    if d.sport in self.server_ports or d.dport in self.server_ports]
        self.from_client = [d for d in self.all if d.dport in self.server_ports]
        self.from_server = [d for d in self.all if d.sport in self.server_ports]

    def packets(self, direction, ptype=None):
        src = {"client": self.from_client, "server": self.from_server, "all": self.all}[direction]
        for d in src:
            for p in d.quic:
                if ptype is None or p.ptype == ptype:
                    yield d, p


def run_tshark_parallel(tshark, jobs, keylog):
    """Runs tshark on several captures at once (2 cores: the legs are dissected side by side)."""
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs)) as ex:
        futs = [ex.submit(run_tshark, tshark, p, keylog, ports) for p, ports in jobs]
        return [f.result() for f in futs]


def run_tshark(tshark, pcap, keylog, ports):
    cmd = [tshark, "-n", "-r", pcap, "-T", "json", "--no-duplicate-keys",
           "-J", "frame ip ipv6 udp quic",
           "--disable-protocol", "http3", "--disable-protocol", "x509af"]
    if keylog:
        cmd += ["-o", "tls.keylog_file:" + keylog]
    for p in sorted(set(ports)):
        cmd += ["-d", "udp.port==%d,quic" % p]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if r.returncode != 0:
        raise CheckFailed("tshark failed (%d): %s" % (r.returncode, r.stderr.decode()[-500:]))
    text = r.stdout.decode("utf-8", "replace").strip()
    if not text:
        return []
    return [Datagram(x["_source"]["layers"]) for x in json.loads(text)]


# ---------------------------------------------------------------------------------------------
# The checks.


class Checker:
    def __init__(self, args):
        self.args = args
        self.case = args.case
        self.notes = []
        self.www = args.www
        self.downloads = args.downloads
        self.keylog = None
        self.v2_versions = {QUIC_V2}
        if args.v2_draft:
            self.v2_versions.add(QUIC_V2_DRAFT)
        self._client = None
        self._server = None

    def note(self, msg):
        self.notes.append(msg)

    def fail(self, msg):
        raise CheckFailed(msg)

    # -- inputs ---------------------------------------------------------------------------
    def prepare(self):
        # The runner uses the client's key log if it is valid, else the server's; merging both is
        # a superset of that (tshark takes the first secret it finds per client random).
        lines = []
        for k in self.args.keylog or []:
            if os.path.isfile(k) and os.path.getsize(k) > 0:
                with open(k, "r", errors="replace") as f:
                    text = f.read()
                if "SERVER_HANDSHAKE_TRAFFIC_SECRET" in text:
                    lines.append(text if text.endswith("\n") else text + "\n")
                else:
                    self.note("key log %s has no SERVER_HANDSHAKE_TRAFFIC_SECRET line" % k)
        if lines:
            self.keylog = os.path.join(self.args.work, "keylog.txt")
            with open(self.keylog, "w") as f:
                f.write("".join(lines))
        pcap = self.args.pcap
        with open(pcap, "rb") as f:
            magic = f.read(4)
        if magic == b"\x0a\x0d\x0d\x0a":  # pcapng: convert, the splitter reads classic pcap
            conv = os.path.join(self.args.work, "classic.pcap")
            r = subprocess.run([self.args.tshark, "-r", pcap, "-F", "pcap", "-w", conv],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
            if r.returncode != 0:
                self.fail("cannot convert %s to pcap: %s" % (pcap, r.stderr.decode()[-300:]))
            pcap = conv
        cports = set(self.args.client_ports)
        sports = set(self.args.server_ports)
        cpcap = os.path.join(self.args.work, "client-leg.pcap")
        spcap = os.path.join(self.args.work, "server-leg.pcap")
        same = cports == sports
        legs = {cpcap: cports} if same else {cpcap: cports, spcap: sports}
        nsplit, nrec = split_legs(pcap, legs)
        if nsplit:
            self.note("%d GSO batches split into segments" % nsplit)
        if same:
            cd = run_tshark(self.args.tshark, cpcap, self.keylog, cports)
            sd = cd
        else:
            cd, sd = run_tshark_parallel(self.args.tshark, [(cpcap, cports), (spcap, sports)],
                                         self.keylog)
        self._client = Trace(cd, cports)
        self._server = Trace(sd, sports)
        if not self._client.all:
            self.fail("no packets on the client leg (ports %s) in the capture (%d frames)" %
                      (sorted(cports), nrec))
        if not self._server.all:
            self.fail("no packets on the server leg (ports %s) in the capture" % sorted(sports))
        if self.keylog:
            for name, ds in (("client", cd), ("server", sd)):
                bad = sum(1 for d in ds for p in d.quic if p.has("quic.decryption_failed"))
                if bad:
                    self.note("%d QUIC packets of the %s leg could not be decrypted" % (bad, name))
                if same:
                    break

    def need_keylog(self):
        if not self.keylog:
            raise CheckUnsupported("needs a key log (SSLKEYLOGFILE) with handshake secrets")

    def client_trace(self):
        return self._client

    def server_trace(self):
        return self._server

    # -- shared pieces --------------------------------------------------------------------
    def expected_files(self):
        out = []
        for root, _, files in os.walk(self.www):
            for n in files:
                out.append(os.path.relpath(os.path.join(root, n), self.www))
        return sorted(out)

    def check_files(self):
        want = self.expected_files()
        if not want:
            self.fail("internal: no files generated in %s" % self.www)
        got = []
        if os.path.isdir(self.downloads):
            for root, _, files in os.walk(self.downloads):
                for n in files:
                    got.append(os.path.relpath(os.path.join(root, n), self.downloads))
        extra = sorted(set(got) - set(want))
        missing = sorted(set(want) - set(got))
        if missing or extra:
            def short(lst):
                s = ", ".join(x[:24] for x in lst[:3])
                return s + (" (+%d more)" % (len(lst) - 3) if len(lst) > 3 else "")
            msg = []
            if missing:
                msg.append("%d of %d files missing: %s" % (len(missing), len(want), short(missing)))
            if extra:
                msg.append("unexpected downloaded files: %s" % short(extra))
            self.fail("; ".join(msg))
        for n in want:
            a = os.path.join(self.www, n)
            b = os.path.join(self.downloads, n)
            sa, sb = os.path.getsize(a), os.path.getsize(b)
            if sa != sb:
                self.fail("file %s: size %d downloaded, %d expected" % (n[:40], sb, sa))
            if not filecmp.cmp(a, b, shallow=False):
                self.fail("file %s: contents differ" % n[:40])
        self.note("%d files identical" % len(want))

    def server_initial_versions(self):
        return {p.version for _, p in self.server_trace().packets("server", "initial")}

    def check_version(self):
        vers = self.server_initial_versions()
        if len(vers) != 1:
            self.fail("expected exactly one QUIC version in the server's Initials, got %s" %
                      sorted(hex(v) for v in vers if v is not None))
        if QUIC_V1 not in vers:
            self.fail("server Initials use version %s, expected 0x1" % hex(next(iter(vers))))

    def check_version_and_files(self):
        self.check_version()
        self.check_files()

    def count_handshakes(self):
        # One handshake per distinct SCID of the server's Initial packets (the runner's method).
        scids = {p.get("quic.scid") for _, p in self.server_trace().packets("server", "initial")}
        scids.discard(None)
        return len(scids)

    def expect_handshakes(self, n):
        got = self.count_handshakes()
        if got != n:
            self.fail("expected exactly %d handshake%s, saw %d (distinct server Initial SCIDs)"
                      % (n, "" if n == 1 else "s", got))
        self.note("%d handshake%s" % (n, "" if n == 1 else "s"))

    def retry_sent(self):
        return any(True for _ in self.client_trace().packets("server", "retry"))

    # -- cases ----------------------------------------------------------------------------
    def case_handshake(self):
        self.check_version_and_files()
        if self.retry_sent():
            self.fail("server sent a Retry, not expected in this case")
        self.expect_handshakes(1)

    def case_transfer(self):
        self.expect_handshakes(1)
        self.check_version_and_files()

    case_http3 = case_transfer
    case_blackhole = case_transfer
    case_transferloss = case_transfer
    case_transfercorruption = case_transfer

    def case_longrtt(self):
        self.expect_handshakes(1)
        self.check_version_and_files()
        # A ClientHello (re)transmission is an Initial CRYPTO frame starting at offset 0;
        # tshark does not label retransmitted ClientHellos with a handshake type, so count offsets.
        n = 0
        for _, p in self.client_trace().packets("client", "initial"):
            if "0" in p.all("quic.crypto.offset") or "1" in p.all("tls.handshake.type"):
                n += 1
        if n < 2:
            self.fail("expected the client to send the ClientHello at least twice "
                      "(750 ms one-way delay), saw %d" % n)
        self.note("%d ClientHello transmissions" % n)

    def case_chacha20(self):
        self.expect_handshakes(1)
        offered = []
        firsts = set()
        for _, p in self.client_trace().packets("client", "initial"):
            if "1" in p.all("tls.handshake.type"):
                suites = [int(x, 0) for x in p.all("tls.handshake.ciphersuite")]
                offered.append(suites)
                if suites:
                    firsts.add(suites[0])
        if not offered:
            self.fail("no ClientHello found in the client's Initial packets")
        # The runner reads the first cipher suite of each ClientHello.
        if firsts != {CHACHA20}:
            self.fail("expected TLS_CHACHA20_POLY1305_SHA256 (0x1303) as the offered cipher "
                      "suite, ClientHello offered %s" % [[hex(s) for s in o] for o in offered])
        if any(len(o) > 1 for o in offered):
            self.note("ClientHello also offered %s (runner reads only the first)" %
                      sorted({hex(s) for o in offered for s in o[1:]}))
        chosen = set()
        for _, p in self.client_trace().packets("server", "initial"):
            if "2" in p.all("tls.handshake.type"):
                chosen.update(int(x, 0) for x in p.all("tls.handshake.ciphersuite"))
        if chosen and chosen != {CHACHA20}:
            self.fail("server selected %s, not ChaCha20-Poly1305" % sorted(hex(c) for c in chosen))
        if chosen:
            self.note("ServerHello selected 0x1303")
        self.check_version_and_files()

    def case_multiplexing(self):
        self.need_keylog()
        self.expect_handshakes(1)
        self.check_version_and_files()
        limits = [int(v) for _, p in self.client_trace().packets("server", "handshake")
                  for v in p.all("tls.quic.parameter.initial_max_streams_bidi")]
        if not limits:
            self.fail("could not find the server's initial_max_streams_bidi (decryption?)")
        if max(limits) > 1000:
            self.fail("server set initial_max_streams_bidi=%d (> 1000): the client needs stream "
                      "limit increases (MAX_STREAMS) to be tested" % max(limits))
        self.note("server initial_max_streams_bidi=%d" % max(limits))

    def case_retry(self):
        self.expect_handshakes(1)
        self.check_version_and_files()
        tokens = []
        for _, p in self.client_trace().packets("server", "retry"):
            t = p.hexfield("quic.retry_token")
            if not t:
                self.fail("Retry packet without a token (frame %s)" % p.get("quic.scid"))
            tokens.append(t)
        if not tokens:
            self.fail("server did not send a Retry packet")
        highest_before = -1
        for d, p in self.client_trace().packets("client", "initial"):
            pn = int(p.get("quic.packet_number", "-1"))
            if p.get("quic.token_length", "0") == "0":
                highest_before = max(highest_before, pn)
                continue
            if pn <= highest_before:
                self.fail("client reset its packet number after the Retry (pn %d <= %d)" %
                          (pn, highest_before))
            tok = p.hexfield("quic.token")
            if tok in tokens:
                self.note("%d Retry; client echoed its token in frame %d" % (len(tokens),
                                                                             d.number))
                return
        self.fail("no client Initial carried the token of the server's Retry")

    def _handshakes_by_scid(self):
        groups = []
        by = {}
        for _, p in self.client_trace().packets("server", "handshake"):
            scid = p.get("quic.scid")
            if scid not in by:
                by[scid] = []
                groups.append(scid)
            by[scid].append(p)
        return groups, by

    def case_resumption(self):
        self.need_keylog()
        self.expect_handshakes(2)
        groups, by = self._handshakes_by_scid()
        if len(groups) != 2:
            self.fail("expected server Handshake packets of 2 connections, saw %d" % len(groups))
        first_cert = any(p.has("tls.handshake.certificates_length") for p in by[groups[0]])
        second_cert = any(p.has("tls.handshake.certificates_length") for p in by[groups[1]])
        if second_cert:
            self.fail("server sent a Certificate in the second handshake (no resumption)")
        if not first_cert:
            self.fail("no Certificate in the first handshake (decryption failed?)")
        self.note("second handshake without Certificate")
        self.check_version_and_files()

    def _payload_bytes(self, p):
        if p.long:
            if p.has("quic.payload"):
                return p.nbytes("quic.payload")
            return p.nbytes("quic.remaining_payload")
        return p.nbytes("quic.protected_payload")

    def case_zerortt(self):
        self.expect_handshakes(2)
        self.check_version_and_files()
        z = sum(self._payload_bytes(p) for _, p in self.client_trace().packets("client", "0rtt"))
        o = 0
        probes = 0
        for _, p in self.client_trace().packets("client", "1rtt"):
            # Deviation from the runner: packets of only PING + PADDING (path MTU probes, which
            # the ngtcp2 examples send at once on lo's 64 KiB MTU) carry no request and are
            # not counted; the runner counts them.
            types = set(p.all("quic.frame_type"))
            if types and types <= {"0", "1"}:
                probes += self._payload_bytes(p)
                continue
            o += self._payload_bytes(p)
        nfiles = len(self.expected_files())
        name_len = max(len(n) for n in self.expected_files())
        if z == 0:
            self.fail("client sent no 0-RTT data")
        limit = 0.5 * name_len * nfiles
        if o > limit:
            self.fail("client sent %d bytes in 1-RTT packets (limit %d): requests were not sent "
                      "in 0-RTT" % (o, limit))
        self.note("0-RTT payload %d bytes, client 1-RTT payload %d bytes (+%d in PING/PADDING "
                  "probes, not counted)" % (z, o, probes))

    def case_amplificationlimit(self):
        self.need_keylog()
        self.expect_handshakes(1)
        self.check_version_and_files()
        max_off = 0
        for _, p in self.server_trace().packets("server", "handshake"):
            for o, l in zip(p.all("quic.crypto.offset"), p.all("quic.crypto.length")):
                max_off = max(max_off, int(o) + int(l))
        if max_off < 7500:
            self.fail("server sent only %d bytes of Handshake CRYPTO data: not the long "
                      "certificate chain?" % max_off)
        allowed = 0
        tolerance = 0
        client_sent = server_sent = 0
        for d in self.server_trace().all:
            t = d.first_type
            if t == "vn":
                self.fail("unexpected Version Negotiation packet")
            if t == "invalid":
                self.fail("frame %d: could not determine the QUIC packet type" % d.number)
            size = d.udp_len - 8
            if d.dport in self.server_trace().server_ports:
                if t == "handshake":
                    self.note("server sent %d bytes for %d received before the client's first "
                              "Handshake packet (crypto %d bytes)" % (server_sent, client_sent,
                                                                      max_off))
                    return
                if t == "initial":
                    client_sent += size
                    allowed += 3 * size
                    tolerance += 4 * size
            else:
                server_sent += size
                if size >= tolerance:
                    self.fail("server exceeded the amplification limit: %d bytes sent (frame %d) "
                              "after receiving %d bytes" % (server_sent, d.number, client_sent))
                if size > allowed:
                    self.note("server exceeded 3x but stayed within 4x (frame %d)" % d.number)
                allowed -= size
                tolerance -= size
        self.fail("client never sent a Handshake packet on the server leg")

    def case_keyupdate(self):
        self.need_keylog()
        self.expect_handshakes(1)
        self.check_version_and_files()

        def phases(trace, direction):
            c = {0: 0, 1: 0}
            for _, p in trace.packets(direction, "1rtt"):
                kp = p.get("quic.key_phase")
                c[1 if kp in ("1", "True", "true") else 0] += 1
            return c
        cl = phases(self.client_trace(), "client")
        sv = phases(self.server_trace(), "server")
        msg = ("client sent %d/%d, server sent %d/%d packets with key phase 0/1" %
               (cl[0], cl[1], sv[0], sv[1]))
        if cl[1] == 0 or sv[1] == 0:
            self.fail("expected key phase 1 packets from both endpoints: " + msg)
        self.note(msg)

    def case_handshakeloss(self):
        n = len(self.expected_files())
        self.expect_handshakes(n)
        self.check_version_and_files()

    case_handshakecorruption = case_handshakeloss

    def case_ecn(self):
        self.need_keylog()
        self.case_handshake()

        def counts(trace, direction):
            e = [0, 0, 0, 0]  # Not-ECT, ECT(1), ECT(0), CE
            ack_ecn = False
            for d in (trace.from_client if direction == "client" else trace.from_server):
                if not d.quic:
                    continue
                e[d.ecn] += 1
                if any(p.has("quic.ack.ect0_count") for p in d.quic):
                    ack_ecn = True
            return e, ack_ecn
        ce, cack = counts(self.client_trace(), "client")
        se, sack = counts(self.server_trace(), "server")
        desc = ("client marks notect/ect1/ect0/ce=%s ack-ecn=%s; server marks %s ack-ecn=%s" %
                ("/".join(map(str, ce)), cack, "/".join(map(str, se)), sack))
        problems = []
        for who, e, other_ack in (("client", ce, sack), ("server", se, cack)):
            if e[1] == 0 and e[2] == 0:
                problems.append("%s marked no packet ECT(0)/ECT(1)" % who)
            elif e[3]:
                problems.append("%s packets seen with CE" % who)
            if not other_ack:
                problems.append("%s sent no ACK frame with ECN counts" %
                                ("server" if who == "client" else "client"))
        if problems:
            self.fail("; ".join(problems) + " (" + desc + ")")
        self.note(desc)

    def _rebinding(self, need_addr_change=False):
        self.need_keylog()
        st = self.server_trace()
        if need_addr_change:
            addrs = {d.dst for d in st.from_server if d.quic}
            if len(addrs) <= 1:
                self.fail("server saw a single client address %s: no address rebinding" %
                          sorted(addrs))
        self.expect_handshakes(1)
        self.check_version_and_files()
        last = None
        seen = set()
        challenges = set()
        new_paths = 0
        for d in st.from_server:
            if not d.quic:
                continue
            cur = d.path
            if last is None:
                last = cur
                continue
            if cur != last and cur not in seen:
                seen.add(last)
                last = cur
                new_paths += 1
                data = [v for p in d.quic for v in p.all("quic.path_challenge.data")]
                if not data:
                    self.fail("first server packet on new path %s -> %s:%d (frame %d) carries "
                              "no PATH_CHALLENGE" % (cur[0], cur[1][0], cur[1][1], d.number))
                challenges.update(data)
        if last is not None:
            seen.add(last)
        if len(seen) <= 1:
            self.fail("server used a single path: no rebinding/migration happened")
        responses = {v for d in self.client_trace().from_client for p in d.quic
                     for v in p.all("quic.path_response.data")}
        missing = sorted(challenges - responses)
        if missing:
            self.fail("PATH_CHALLENGE without PATH_RESPONSE from the client: %s" % missing[:3])
        self.note("%d paths, %d PATH_CHALLENGEs all answered" % (len(seen), len(challenges)))

    def case_rebind_port(self):
        self._rebinding()

    def case_rebind_addr(self):
        self._rebinding(need_addr_change=True)

    def case_ipv6(self):
        self.case_transfer()
        v4 = [d for d in self.server_trace().from_server if d.quic and not d.ipv6]
        if v4:
            self.fail("%d IPv4 packets from the server in an IPv6 case" % len(v4))

    def case_connectionmigration(self):
        self._rebinding()
        last = None
        seen = set()
        dcid = None
        moved = 0
        for d in self.client_trace().from_client:
            if not d.quic:
                continue
            cur = d.path
            if last is None:
                last, dcid = cur, d.quic[0].get("quic.dcid")
                continue
            if cur != last and cur not in seen:
                seen.add(last)
                last = cur
                nd = d.quic[0].get("quic.dcid")
                if nd == dcid:
                    self.fail("client's first packet on new path %s kept the DCID %s" %
                              (cur, dcid))
                dcid = nd
                moved += 1
        pref = set(self.args.preferred_ports or [])
        if pref and not any(d.dport in pref for d in self.client_trace().from_client):
            self.fail("client never sent to the server's preferred address (port %s)" %
                      sorted(pref))
        self.note("client changed path %d time(s) with a new DCID" % moved)

    def case_v2(self):
        def versions(trace, direction, ptype):
            src = trace.from_client if direction == "client" else trace.from_server
            return {v for d in src for v, t in d.raw_long_headers() if t == ptype}

        def hexes(vs):
            return sorted(hex(x) for x in vs)
        v = versions(self.client_trace(), "client", "initial")
        if QUIC_V1 not in v:
            self.fail("client Initials use %s, expected to start with 0x1" % hexes(v))
        v = versions(self.server_trace(), "server", "initial")
        if not v & self.v2_versions:
            self.fail("server Initials use %s, expected QUIC v2 %s" %
                      (hexes(v), hexes(self.v2_versions)))
        for who, tr in (("client", self.client_trace()), ("server", self.server_trace())):
            v = versions(tr, who, "handshake")
            if len(v) != 1 or not v & self.v2_versions:
                self.fail("%s Handshake packets use %s, expected only QUIC v2" % (who, hexes(v)))
        self.note("compatible version negotiation v1 -> %s" % hexes(v))
        if QUIC_V2_DRAFT in v:
            self.note("provisional v2 code point: the runner (RFC 9369) would not accept it; "
                      "tshark cannot decrypt it, so only headers are checked")
        self.check_files()

    def case_versionnegotiation(self):
        dcid = None
        for _, p in self.client_trace().packets("client", "initial"):
            dcid = p.get("quic.dcid")
            break
        if dcid is None:
            self.fail("no client Initial / DCID found")
        for _, p in self.client_trace().packets("all", "vn"):
            if p.get("quic.scid") == dcid:
                self.note("Version Negotiation echoes the client's DCID")
                return
        self.fail("no Version Negotiation packet with SCID = the client's DCID")

    def run(self):
        fn = getattr(self, "case_" + self.case.replace("-", "_"), None)
        if fn is None:
            raise CheckUnsupported("no check for test case %r" % self.case)
        self.prepare()
        fn()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", required=True)
    ap.add_argument("--pcap", required=True, help="classic pcap of both legs (tshark -F pcap)")
    ap.add_argument("--keylog", action="append", help="TLS key log (repeatable)")
    ap.add_argument("--www", required=True)
    ap.add_argument("--downloads", required=True)
    ap.add_argument("--client-ports", required=True,
                    help="comma list: the ports the client talks to (the sim's listen port, "
                         "plus the preferred-address port)")
    ap.add_argument("--server-ports", required=True,
                    help="comma list: the server's port(s)")
    ap.add_argument("--preferred-ports", default="",
                    help="comma list: the server's preferred-address port (connectionmigration)")
    ap.add_argument("--v2-draft", action="store_true",
                    help="accept the provisional v2 code point 0x709a50c4 as QUIC v2")
    ap.add_argument("--tshark", default="tshark")
    ap.add_argument("--work", help="scratch dir (default: a temporary one)")
    ap.add_argument("--json-out", help="write {result, reason, notes} here")
    args = ap.parse_args()

    def ports(s):
        return [int(x) for x in s.split(",") if x.strip()]
    args.client_ports = ports(args.client_ports)
    args.server_ports = ports(args.server_ports)
    args.preferred_ports = ports(args.preferred_ports)
    tmp = None
    if not args.work:
        tmp = tempfile.TemporaryDirectory(prefix="petrel-checks-")
        args.work = tmp.name
    os.makedirs(args.work, exist_ok=True)

    c = Checker(args)
    result, reason, code = "PASS", "", 0
    try:
        c.run()
    except CheckFailed as e:
        result, reason, code = "FAIL", str(e), 1
    except CheckUnsupported as e:
        result, reason, code = "UNSUPPORTED", str(e), 3
    except Exception as e:  # a bug here must not look like a pass
        result, reason, code = "ERROR", "%s: %s" % (type(e).__name__, e), 2
    for n in c.notes:
        print("  note: " + n)
    summary = reason if reason else "; ".join(c.notes[-3:])
    print("%s %s: %s" % (result, args.case, summary))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"result": result, "reason": reason, "notes": c.notes}, f, indent=1)
    if tmp:
        tmp.cleanup()
    return code


if __name__ == "__main__":
    sys.exit(main())
