#!/usr/bin/python3
"""Raw HTTP/2 frame scenarios against Petrel's h2 test server (cleartext prior knowledge).

Usage: h2_raw_client.py PORT SCENARIO. Prints "PASS <detail>" and exits 0 when the server
answered as RFC 9113 and Petrel's limits require, else prints "FAIL <detail>" and exits 1.
Frames are built by hand (hpack only for field blocks) so that malformed and abusive input can
be sent exactly as written; every read has a deadline.
"""
import socket
import struct
import sys
import time

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0, 1, 3, 4, 6, 7, 8, 9)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, REFUSED_STREAM, CANCEL, ENHANCE_YOUR_CALM = (
    0, 1, 3, 7, 8, 11)
MAX_CONCURRENT_STREAMS = 0x3
PRIORITY_UPDATE = 0x10  # RFC 9218 §7.1
NO_RFC7540_PRIORITIES = 0x9  # RFC 9218 §2.1


def frame(ftype, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", ftype, flags, stream_id) + payload


def literal(name, value):
    """A literal field without indexing, raw bytes (no lowercasing, no Huffman)."""
    name, value = name.encode(), value.encode()
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def block(fields):
    return b"".join(literal(n, v) for n, v in fields)


def get(path, extra=()):
    return [(":method", "GET"), (":scheme", "http"), (":authority", "localhost"),
            (":path", path)] + list(extra)


def post(path, extra=()):
    return [(":method", "POST"), (":scheme", "http"), (":authority", "localhost"),
            (":path", path)] + list(extra)


class Conn:
    def __init__(self, port, stream_window=1 << 24):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""
        self.decoder = hpack.Decoder()
        self.decoder.max_allowed_table_size = 65536
        self.server_settings = None  # {id: value} of the server's first SETTINGS
        # Big receive windows by default, so that the server is never stalled by us.
        self.send(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, stream_window)) +
                  frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 24) - 65535)))

    def send(self, data):
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False  # the server may already have closed on us (e.g. after GOAWAY)

    def read_frame(self, deadline):
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            except OSError:
                return "eof"
            if not chunk:
                return "eof"
            self.buf += chunk
        length = int.from_bytes(self.buf[:3], "big")
        ftype, flags, sid = struct.unpack(">BBI", self.buf[3:9])
        payload = self.buf[9:9 + length]
        self.buf = self.buf[9 + length:]
        sid &= 0x7FFFFFFF
        if ftype == SETTINGS and not flags & ACK:
            if self.server_settings is None:
                self.server_settings = dict(struct.unpack(">HI", payload[i:i + 6])
                                            for i in range(0, len(payload) - 5, 6))
            self.send(frame(SETTINGS, ACK, 0))
        if ftype == HEADERS:
            payload = self.decoder.decode(payload)
        return (ftype, flags, sid, payload)

    def frames(self, seconds=5.0):
        """Yields frames until EOF or the deadline."""
        deadline = time.monotonic() + seconds
        while True:
            f = self.read_frame(deadline)
            if f is None or f == "eof":
                return
            yield f


def goaway_code(conn, seconds=5.0):
    for ftype, _, _, payload in conn.frames(seconds):
        if ftype == GOAWAY:
            return struct.unpack(">II", payload[:8])[1]
    return None


def stream_outcome(conn, sid, seconds=5.0):
    """('rst', code) or ('status', status) — the first decisive frame for `sid`."""
    for ftype, _, fsid, payload in conn.frames(seconds):
        if fsid == sid and ftype == RST_STREAM:
            return ("rst", struct.unpack(">I", payload)[0])
        if fsid == sid and ftype == HEADERS:
            return ("status", dict(payload).get(":status"))
        if ftype == GOAWAY:
            return ("goaway", struct.unpack(">II", payload[:8])[1])
    return ("none", None)


def scheduling_order(conn, first_fields, second_fields, before_credit=b""):
    """Opens streams 1 and 3 (GET /sized, 20000 bytes each) on a connection whose stream windows
    are 0, waits until the server has answered both heads, then sends `before_credit` and credit
    for stream 1 and then stream 3 in one write. Returns the stream of each DATA frame in the
    order they came, or a string saying what went wrong."""
    path = "/sized?bytes=20000"
    conn.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, block(get(path, first_fields))) +
              frame(HEADERS, END_STREAM | END_HEADERS, 3, block(get(path, second_fields))))
    heads = set()
    for ftype, _, sid, payload in conn.frames():
        if ftype == HEADERS and dict(payload).get(":status") == "200":
            heads.add(sid)
        elif ftype in (DATA, RST_STREAM, GOAWAY):
            return "frame type %d on stream %d before any credit" % (ftype, sid)
        if heads == {1, 3}:
            break
    if heads != {1, 3}:
        return "response heads %r" % sorted(heads)
    if conn.server_settings.get(NO_RFC7540_PRIORITIES) != 1:
        return "server SETTINGS %r" % conn.server_settings
    conn.send(before_credit + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1 << 20)) +
              frame(WINDOW_UPDATE, 0, 3, struct.pack(">I", 1 << 20)))
    order, left, ended = [], {1: 20000, 3: 20000}, set()
    for ftype, flags, sid, payload in conn.frames():
        if ftype == DATA and sid in left:
            if payload:
                order.append(sid)
            left[sid] -= len(payload)
            if flags & END_STREAM:
                ended.add(sid)
        elif ftype in (RST_STREAM, GOAWAY):
            return "frame type %d on stream %d" % (ftype, sid)
        if ended == {1, 3}:
            break
    if ended != {1, 3} or any(left.values()):
        return "bodies incomplete: ended %r, bytes left %r" % (sorted(ended), left)
    return order


def expect_urgent_first(order):
    """Every DATA frame of stream 3 (the urgent one) before any of stream 1's."""
    ok = isinstance(order, list) and order and order[0] == 3 and order == sorted(
        order, key=lambda sid: sid != 3)
    expect(ok, "DATA frames by stream %r" % (order,))


def expect(cond, detail):
    print(("PASS " if cond else "FAIL ") + detail, flush=True)
    sys.exit(0 if cond else 1)


def expect_calm(conn, flood):
    conn.send(flood)
    code = goaway_code(conn)
    expect(code == ENHANCE_YOUR_CALM, "GOAWAY code %r" % code)


def expect_rst(conn, fields, code=PROTOCOL_ERROR):
    conn.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, block(fields)))
    got = stream_outcome(conn, 1)
    expect(got == ("rst", code), "stream 1 outcome %r" % (got,))


def main():
    port, scenario = int(sys.argv[1]), sys.argv[2]
    if scenario == "priority_field":
        # RFC 9218 §4: the urgent stream (u=0) is sent before the background one (u=7), though
        # its request came second and its credit last.
        order = scheduling_order(Conn(port, stream_window=0), [("priority", "u=7")],
                                 [("priority", "u=0")])
        expect_urgent_first(order)
    if scenario == "priority_update":
        # RFC 9218 §7.1: PRIORITY_UPDATE raises stream 3 above stream 1 (both at the default
        # u=3, where stream 1 would go first).
        update = frame(PRIORITY_UPDATE, 0, 0, struct.pack(">I", 3) + b"u=0")
        order = scheduling_order(Conn(port, stream_window=0), [], [], before_credit=update)
        expect_urgent_first(order)
    if scenario == "streams_beyond_limit_early":
        # A client that opens streams before it has seen the server's SETTINGS: the stream
        # beyond the limit the server announced is refused (REFUSED_STREAM, so the client may
        # retry it), the others are answered and the connection stays up.
        c = Conn(port)
        limit = 200  # the h2 test server's max_concurrent_streams
        ids = [2 * i + 1 for i in range(limit + 1)]
        c.send(b"".join(frame(HEADERS, END_STREAM | END_HEADERS, sid, block(get("/slow?ms=500")))
                        for sid in ids))
        answered, refused = set(), []
        for ftype, flags, sid, payload in c.frames(15):
            if ftype == RST_STREAM:
                refused.append((sid, struct.unpack(">I", payload)[0]))
            elif ftype == GOAWAY:
                expect(False, "GOAWAY %r" % (struct.unpack(">II", payload[:8]),))
            elif ftype in (HEADERS, DATA) and flags & END_STREAM:
                answered.add(sid)
            if len(answered) + len(refused) == len(ids):
                break
        expect(c.server_settings.get(MAX_CONCURRENT_STREAMS) == limit and
               refused == [(ids[-1], REFUSED_STREAM)] and answered == set(ids[:-1]),
               "limit %r, %d answered, refused %r" % (
                   c.server_settings.get(MAX_CONCURRENT_STREAMS), len(answered), refused))
    if scenario == "streams_beyond_limit":
        # RFC 9113 §5.1.2: once the client has acknowledged SETTINGS_MAX_CONCURRENT_STREAMS, a
        # HEADERS beyond it is an error; nghttp2 makes it a connection error (GOAWAY
        # PROTOCOL_ERROR). A new connection is served as usual.
        c = Conn(port)
        for ftype, flags, _, _ in c.frames():
            if ftype == SETTINGS and flags & ACK:
                break  # the server's SETTINGS came first and Conn acknowledged it
        limit = (c.server_settings or {}).get(MAX_CONCURRENT_STREAMS)
        if not limit:
            expect(False, "server SETTINGS %r" % c.server_settings)
        c.send(b"".join(frame(HEADERS, END_STREAM | END_HEADERS, 2 * i + 1,
                              block(get("/slow?ms=5000"))) for i in range(limit)) +
               frame(PING, 0, 0, b"allopen!"))
        for ftype, flags, _, payload in c.frames():
            if ftype == PING and flags & ACK and payload == b"allopen!":
                break
        else:
            expect(False, "no PING ACK after %d streams" % limit)
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 2 * limit + 1, block(get("/hello"))))
        code = goaway_code(c)
        fresh = Conn(port)
        fresh.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, block(get("/hello"))))
        got = stream_outcome(fresh, 1)
        expect(code == PROTOCOL_ERROR and got == ("status", "200"),
               "GOAWAY code %r, a new connection's request: %r" % (code, got))
    c = Conn(port)
    if scenario == "rapid_reset":
        flood = b"".join(
            frame(HEADERS, END_STREAM | END_HEADERS, 2 * i + 1, block(get("/slow?ms=5000"))) +
            frame(RST_STREAM, 0, 2 * i + 1, struct.pack(">I", CANCEL)) for i in range(300))
        expect_calm(c, flood)
    elif scenario == "continuation_flood":
        first = frame(HEADERS, END_STREAM, 1, block(get("/hello")))
        rest = b"".join(frame(CONTINUATION, 0, 1, literal("x-a", "b")) for _ in range(1000))
        expect_calm(c, first + rest)
    elif scenario == "continuation_flood_after_stream_error":
        # A field nghttp2 refuses (an empty name) makes the stream an error inside its header
        # block; the block's further CONTINUATION frames are skipped without reaching the guard,
        # yet they too are held to the limit: GOAWAY ENHANCE_YOUR_CALM, not an endless block.
        first = frame(HEADERS, END_STREAM, 1, block(get("/hello")) + b"\x00\x00\x00")
        rest = b"".join(frame(CONTINUATION, 0, 1, literal("x-a", "b")) for _ in range(1000))
        expect_calm(c, first + rest)
    elif scenario == "ping_flood":
        expect_calm(c, b"".join(frame(PING, 0, 0, struct.pack(">Q", i)) for i in range(1000)))
    elif scenario == "settings_flood":
        expect_calm(c, b"".join(frame(SETTINGS, 0, 0) for _ in range(1000)))
    elif scenario == "empty_data_flood":
        head = frame(HEADERS, END_HEADERS, 1, block(post("/echo")))
        expect_calm(c, head + b"".join(frame(DATA, 0, 1) for _ in range(1000)))
    elif scenario == "missing_path":
        expect_rst(c, [(":method", "GET"), (":scheme", "http"), (":authority", "localhost")])
    elif scenario == "uppercase_header":
        expect_rst(c, get("/hello", [("X-Upper", "1")]))
    elif scenario == "connection_header":
        expect_rst(c, get("/hello", [("connection", "keep-alive")]))
    elif scenario == "content_length_mismatch":
        c.send(frame(HEADERS, END_HEADERS, 1, block(post("/echo", [("content-length", "10")]))) +
               frame(DATA, END_STREAM, 1, b"hello"))
        got = None
        for ftype, _, sid, payload in c.frames():
            if sid == 1 and ftype == RST_STREAM:
                got = struct.unpack(">I", payload)[0]
                break
        expect(got == PROTOCOL_ERROR, "RST_STREAM code %r" % got)
    elif scenario == "window_overflow":
        c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF)))
        code = goaway_code(c)
        expect(code == FLOW_CONTROL_ERROR, "GOAWAY code %r" % code)
    elif scenario == "body_over_limit":
        c.send(frame(HEADERS, END_HEADERS, 1,
                     block(post("/echo", [("content-length", "20000000")]))))
        got = stream_outcome(c, 1)
        expect(got == ("status", "413"), "stream 1 outcome %r" % (got,))
    elif scenario == "data_over_limit":  # server configured with a 64 KiB body limit
        c.send(frame(HEADERS, END_HEADERS, 1, block(post("/echo"))))
        chunk = b"x" * 16384
        c.send(b"".join(frame(DATA, 0, 1, chunk) for _ in range(8)))
        got = None
        for ftype, _, sid, payload in c.frames():
            if sid == 1 and ftype == RST_STREAM:
                got = struct.unpack(">I", payload)[0]
                break
        expect(got == CANCEL, "RST_STREAM code %r" % got)
    elif scenario == "big_headers":
        # ~70 KiB of fields in HEADERS + CONTINUATION frames of 16 KiB: over the 64 KiB list.
        fields = block(get("/hello")) + b"".join(
            literal("x-big-%03d" % i, "v" * 100) for i in range(600))
        frames = [fields[i:i + 16384] for i in range(0, len(fields), 16384)]
        out = frame(HEADERS, END_STREAM | (END_HEADERS if len(frames) == 1 else 0), 1, frames[0])
        for i, f in enumerate(frames[1:], 1):
            out += frame(CONTINUATION, END_HEADERS if i == len(frames) - 1 else 0, 1, f)
        c.send(out)
        got = stream_outcome(c, 1)
        expect(got == ("status", "431"), "stream 1 outcome %r" % (got,))
    elif scenario == "slow_reader":
        # Flow control wide open: only TCP backpressure can stop the server. We stop reading
        # for a while (the scenario, not a synchronisation), the test samples how much the
        # server pulled from its producer, then we read the whole body.
        c.send(frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 0x7FFFFFFF)) +
               frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF - (1 << 24))) +
               frame(HEADERS, END_STREAM | END_HEADERS, 1, block(get("/big?mib=64"))))
        time.sleep(1.0)
        print("STALLED", flush=True)
        time.sleep(0.3)
        total, ended = 0, False
        for ftype, flags, sid, payload in c.frames(30):
            if ftype == DATA and sid == 1:
                total += len(payload)
                if flags & END_STREAM:
                    ended = True
                    break
        expect(ended and total == 64 << 20, "received %d ended %r" % (total, ended))
    elif scenario == "fin_while_window_closed":
        # Streams whose window the client never opens, then the client closes its sending side:
        # no WINDOW_UPDATE can ever come, so the server must close the connection rather than
        # hold it and its streams forever.
        c.send(frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 0)) +
               frame(HEADERS, END_STREAM | END_HEADERS, 1, block(get("/sized?bytes=100000"))) +
               frame(HEADERS, END_STREAM | END_HEADERS, 3, block(get("/big?mib=1"))))
        seen = set()
        for ftype, _, sid, _ in c.frames():
            if ftype == HEADERS:
                seen.add(sid)
                if seen == {1, 3}:
                    break
        if seen != {1, 3}:
            expect(False, "response heads on streams %r, want 1 and 3" % (seen,))
        c.sock.shutdown(socket.SHUT_WR)
        for _ in c.frames(10):  # until EOF, or 10 s
            pass
        c.sock.settimeout(0.5)
        try:
            ended = c.sock.recv(1) == b""
        except socket.timeout:
            ended = False
        except OSError:
            ended = True  # reset: closed too
        expect(ended, "the server closed the connection after the client's FIN")
    elif scenario == "request_trailers":
        c.send(frame(HEADERS, END_HEADERS, 1, block(post("/request-trailers"))) +
               frame(DATA, 0, 1, b"abc") +
               frame(HEADERS, END_STREAM | END_HEADERS, 1, block([("x-t", "tv")])))
        status, body = None, b""
        for ftype, flags, sid, payload in c.frames():
            if sid == 1 and ftype == HEADERS:
                status = dict(payload).get(":status")
            if sid == 1 and ftype == DATA:
                body += payload
            if sid == 1 and flags & END_STREAM:
                break
        expect(status == "200" and body == b"abc|tv", "status %r body %r" % (status, body))
    elif scenario == "reset_cancels":
        # The client resets an unanswered stream; the PING ACK shows the server processed it.
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, block(get("/slow?ms=5000"))) +
               frame(RST_STREAM, 0, 1, struct.pack(">I", CANCEL)) + frame(PING, 0, 0, b"afterrst"))
        acked = False
        for ftype, flags, sid, payload in c.frames():
            if ftype == PING and flags & ACK and payload == b"afterrst":
                acked = True
                break
            if sid == 1 and ftype in (HEADERS, DATA):
                expect(False, "a response on the reset stream")
        expect(acked, "ping acked %r" % acked)
    elif scenario == "credit_on_consume":
        # Credit (WINDOW_UPDATE) comes back for a body the handler consumes (/echo) and not for
        # one it leaves unread (/hold), even though the server received every byte of both.
        for ftype, flags, _, _ in c.frames():
            if ftype == SETTINGS and not flags & ACK:
                break
        chunk = b"e" * 16384
        c.send(frame(HEADERS, END_HEADERS, 1, block(post("/echo"))) +
               b"".join(frame(DATA, 0, 1, chunk) for _ in range(37)) +
               frame(DATA, END_STREAM, 1, chunk))
        echoed, credit = 0, 0
        for ftype, flags, sid, payload in c.frames():
            if ftype == WINDOW_UPDATE:
                credit += struct.unpack(">I", payload)[0]
            if ftype == DATA and sid == 1:
                echoed += len(payload)
                if flags & END_STREAM:
                    break
        if echoed != 38 * 16384 or credit == 0:
            expect(False, "echo: echoed %d credit %d" % (echoed, credit))
        c.send(frame(HEADERS, END_HEADERS, 3, block(post("/hold"))) +
               b"".join(frame(DATA, 0, 3, chunk) for _ in range(38)) + frame(PING, 0, 0, b"pingpong"))
        held_credit, acked = 0, False
        for ftype, flags, sid, payload in c.frames(0.7):
            if ftype == WINDOW_UPDATE:
                held_credit += struct.unpack(">I", payload)[0]
            if ftype == PING and flags & ACK:
                acked = True
        expect(acked and held_credit == 0,
               "echo credit %d, unread body credit %d, ping acked %r" % (credit, held_credit, acked))
    elif scenario == "burst":
        # Setup first (our SETTINGS acked), then 20 requests in one segment: the server reads
        # them in one go and answers all of them in one write (the test counts its writes).
        acked = False
        for ftype, flags, _, _ in c.frames():
            if ftype == SETTINGS and flags & ACK:
                acked = True
                break
        if not acked:
            expect(False, "no SETTINGS ACK")
        ids = [2 * i + 1 for i in range(20)]
        c.send(b"".join(frame(HEADERS, END_STREAM | END_HEADERS, sid, block(get("/hello")))
                        for sid in ids))
        status, body, ended = {}, {}, set()
        for ftype, flags, sid, payload in c.frames():
            if ftype == HEADERS:
                status[sid] = dict(payload).get(":status")
            elif ftype == DATA:
                body[sid] = body.get(sid, b"") + payload
            elif ftype in (RST_STREAM, GOAWAY):
                expect(False, "frame type %d on stream %d" % (ftype, sid))
            if flags & END_STREAM and ftype in (HEADERS, DATA):
                ended.add(sid)
                if len(ended) == len(ids):
                    break
        ok = all(status.get(s) == "200" and body.get(s) == b"hello" for s in ids)
        expect(ok and len(ended) == len(ids), "%d of %d streams answered" % (len(ended), len(ids)))
    elif scenario == "methods":
        # One request at a time on one connection, so each stream reuses the last one's
        # Request: every handler must see its own request's method, GET after others included.
        sid, got = 1, []
        for method in ["PURGE", "GET", "PUT", "GET", "DELETE", "HEAD", "GET"]:
            fields = [(":method", method)] + get("/method")[1:]
            c.send(frame(HEADERS, END_STREAM | END_HEADERS, sid, block(fields)))
            status, body = None, b""
            for ftype, flags, fsid, payload in c.frames():
                if fsid == sid and ftype == HEADERS:
                    status = dict(payload).get(":status")
                elif fsid == sid and ftype == DATA:
                    body += payload
                elif ftype in (RST_STREAM, GOAWAY):
                    expect(False, "frame type %d on stream %d" % (ftype, fsid))
                if fsid == sid and flags & END_STREAM and ftype in (HEADERS, DATA):
                    break
            got.append("%s %s %s" % (method, status, body.decode()))
            sid += 2
        want = ["PURGE 200 PURGE", "GET 200 GET", "PUT 200 PUT", "GET 200 GET",
                "DELETE 200 DELETE", "HEAD 200 ", "GET 200 GET"]
        expect(got == want, "answers %r" % got)
    elif scenario == "graceful_shutdown":
        # Stream 1 is in flight (a slow response); the PING round trip proves the server saw it.
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, block(get("/slow?ms=700"))) +
               frame(PING, 0, 0, b"readyyyy"))
        for ftype, flags, _, payload in c.frames():
            if ftype == PING and flags & ACK and payload == b"readyyyy":
                break
        print("READY", flush=True)  # the test now calls Shutdown on the server
        goaways, status, body, ended = [], None, b"", False
        for ftype, flags, sid, payload in c.frames(8):
            if ftype == GOAWAY:
                goaways.append(struct.unpack(">II", payload[:8]))
            elif ftype == PING and not flags & ACK:
                c.send(frame(PING, ACK, 0, payload))
            elif ftype == HEADERS and sid == 1:
                status = dict(payload).get(":status")
                ended = ended or bool(flags & END_STREAM)
            elif ftype == DATA and sid == 1:
                body += payload
                ended = ended or bool(flags & END_STREAM)
        want = [(0x7FFFFFFF, NO_ERROR), (1, NO_ERROR)]
        expect(goaways == want and status == "200" and body == b"slow" and ended,
               "goaways %r status %r body %r ended %r" % (goaways, status, body, ended))
    else:
        expect(False, "unknown scenario " + scenario)


if __name__ == "__main__":
    main()
