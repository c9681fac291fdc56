#!/usr/bin/python3
"""A WebSocket over HTTP/2 extended CONNECT (RFC 8441) against Petrel, with python-h2 (an HTTP/2
implementation that shares nothing with Petrel) and WebSocket frames built here.

Usage: ws_h2_client.py PORT tls|clear SCENARIO
  echo:      the server's SETTINGS enable extended CONNECT; CONNECT :protocol websocket to /echo
             gets 200 (and the subprotocol chosen on /chat); a text, a binary, a fragmented text
             and a ping come back as echoes and a pong; a close is answered and the stream ends.
  refused:   CONNECT :protocol websocket to /refuse gets 403; :protocol other than websocket
             gets 400; a GET to /echo gets 426.
  bad-frame: an unmasked frame gets a close 1002 and the stream ends; another stream on the
             same connection still works.
  deflate:   /deflate agrees on permessage-deflate (RFC 7692) from the same field as over
             HTTP/1.1; messages compressed here with Python's zlib (one in fragments, RSV1 on the
             first only) echo compressed, RSV1 set, and inflate to the same bytes; a deflate bomb
             (64 MiB of zeros) on another stream gets a close 1009 while the first stream
             carries on.
Prints "PASS ..." and exits 0, or "FAIL ..." and exits 1. Every read has a deadline.
"""
import os
import socket
import ssl
import struct
import sys
import time
import zlib

import h2.config
import h2.connection
import h2.events
import h2.settings


def fail(detail):
    print("FAIL " + detail, flush=True)
    sys.exit(1)


def frame(opcode, payload, fin=True, mask=True, rsv1=False):
    head = bytes([(0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode])
    n = len(payload)
    bit = 0x80 if mask else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def parse(buf, rsv1=False):
    """Whole unmasked frames off the front of buf: ([(fin, opcode, payload)], rest), and each
    frame's RSV1 after its opcode if rsv1."""
    out = []
    while len(buf) >= 2:
        n = buf[1] & 0x7F
        if buf[1] & 0x80:
            fail("a masked server frame")
        at = 2
        if n == 126:
            if len(buf) < 4:
                break
            n = struct.unpack("!H", buf[2:4])[0]
            at = 4
        elif n == 127:
            if len(buf) < 10:
                break
            n = struct.unpack("!Q", buf[2:10])[0]
            at = 10
        if len(buf) < at + n:
            break
        if rsv1:
            out.append((bool(buf[0] & 0x80), buf[0] & 0x0F, bool(buf[0] & 0x40), buf[at:at + n]))
        else:
            out.append((bool(buf[0] & 0x80), buf[0] & 0x0F, buf[at:at + n]))
        buf = buf[at + n:]
    return out, buf


class Client:
    def __init__(self, port, mode):
        self.port = port
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if mode == "tls":
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            sock = ctx.wrap_socket(sock, server_hostname="localhost")
        self.scheme = "https" if mode == "tls" else "http"
        self.sock = sock
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.flush()
        self.heads = {}
        self.data = {}
        self.ended = set()
        self.reset = {}
        self.remote_settings = {}

    def flush(self):
        self.sock.sendall(self.conn.data_to_send())

    def pump(self, until, what, seconds=10):
        deadline = time.monotonic() + seconds
        while not until():
            if time.monotonic() > deadline:
                fail("timed out waiting for " + what)
            chunk = self.sock.recv(65536)
            if not chunk:
                fail("connection closed waiting for " + what)
            for e in self.conn.receive_data(chunk):
                if isinstance(e, h2.events.RemoteSettingsChanged):
                    for code, setting in e.changed_settings.items():
                        self.remote_settings[code] = setting.new_value
                elif isinstance(e, h2.events.ResponseReceived):
                    self.heads[e.stream_id] = dict(e.headers)
                elif isinstance(e, h2.events.DataReceived):
                    self.data[e.stream_id] = self.data.get(e.stream_id, b"") + e.data
                    self.conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                elif isinstance(e, h2.events.StreamEnded):
                    self.ended.add(e.stream_id)
                elif isinstance(e, h2.events.StreamReset):
                    self.reset[e.stream_id] = e.error_code
            self.flush()

    def connect(self, path, protocol=b"websocket", extra=()):
        sid = self.conn.get_next_available_stream_id()
        headers = [(b":method", b"CONNECT"), (b":protocol", protocol), (b":scheme", self.scheme.encode()),
                   (b":path", path.encode()), (b":authority", b"127.0.0.1:%d" % self.port),
                   (b"sec-websocket-version", b"13")] + list(extra)
        self.conn.send_headers(sid, headers)
        self.flush()
        return sid

    def send(self, sid, data):
        for at in range(0, len(data), 16384):
            self.conn.send_data(sid, data[at:at + 16384])
        self.flush()

    def frames(self, sid, count, what):
        got = []

        def enough():
            nonlocal got
            got, rest = parse(self.data.get(sid, b""))
            return len(got) >= count
        self.pump(enough, what)
        return got


def echo(c):
    c.pump(lambda: 8 in c.remote_settings, "the server's SETTINGS")
    if c.remote_settings.get(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL) != 1:
        fail("SETTINGS_ENABLE_CONNECT_PROTOCOL is %r" % c.remote_settings.get(8))
    sid = c.connect("/echo")
    c.pump(lambda: sid in c.heads, "the 200")
    if c.heads[sid].get(b":status") != b"200":
        fail("status %r" % c.heads[sid])
    big = bytes(range(256)) * 300
    c.send(sid, frame(0x1, "héllo".encode()) + frame(0x2, big) + frame(0x1, b"frag", fin=False) +
           frame(0x9, b"p1ng") + frame(0x0, b"mented") + frame(0x1, b"x" * 70000))
    got = c.frames(sid, 5, "the echoes")
    want = [(True, 0x1, "héllo".encode()), (True, 0x2, big), (True, 0xA, b"p1ng"),
            (True, 0x1, b"fragmented"), (True, 0x1, b"x" * 70000)]
    if got[:5] != want:
        fail("echoes %r" % [(f, o, p[:20], len(p)) for f, o, p in got])
    c.send(sid, frame(0x8, struct.pack("!H", 1000) + b"bye"))
    c.pump(lambda: sid in c.ended, "the end of the stream")
    got = c.frames(sid, 6, "the close")
    if got[5][1] != 0x8 or struct.unpack("!H", got[5][2][:2])[0] != 1000:
        fail("close %r" % (got[5],))
    # A subprotocol is chosen from the client's offer.
    sid = c.connect("/chat", extra=[(b"sec-websocket-protocol", b"chat, chat.v2")])
    c.pump(lambda: sid in c.heads, "the /chat 200")
    if c.heads[sid].get(b"sec-websocket-protocol") != b"chat.v2":
        fail("subprotocol %r" % c.heads[sid])
    print("PASS echo", flush=True)


def refused(c):
    c.pump(lambda: 8 in c.remote_settings, "the server's SETTINGS")
    sid = c.connect("/refuse")
    c.pump(lambda: sid in c.heads, "the 403")
    if c.heads[sid].get(b":status") != b"403":
        fail("/refuse: %r" % c.heads[sid])
    sid = c.connect("/echo", protocol=b"webtransport")
    c.pump(lambda: sid in c.heads, "the 400")
    if c.heads[sid].get(b":status") != b"400":
        fail(":protocol webtransport: %r" % c.heads[sid])
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, [(b":method", b"GET"), (b":scheme", c.scheme.encode()), (b":path", b"/echo"),
                              (b":authority", b"127.0.0.1")], end_stream=True)
    c.flush()
    c.pump(lambda: sid in c.heads, "the 426")
    # (No Upgrade field: HTTP/2 has none, RFC 9113 §8.2.2.)
    if c.heads[sid].get(b":status") != b"426" or b"upgrade" in c.heads[sid]:
        fail("GET /echo: %r" % c.heads[sid])
    print("PASS refused", flush=True)


def bad_frame(c):
    sid = c.connect("/echo")
    c.pump(lambda: sid in c.heads, "the 200")
    c.send(sid, frame(0x1, b"not masked", mask=False))
    got = c.frames(sid, 1, "the close")
    if got[0][1] != 0x8 or struct.unpack("!H", got[0][2][:2])[0] != 1002:
        fail("close %r" % (got[0],))
    c.pump(lambda: sid in c.ended or sid in c.reset, "the end of the stream")
    other = c.connect("/echo")
    c.pump(lambda: other in c.heads, "the other 200")
    c.send(other, frame(0x1, b"still here"))
    got = c.frames(other, 1, "the other echo")
    if got[0][2] != b"still here":
        fail("other stream %r" % (got[0],))
    print("PASS bad-frame", flush=True)


def compress(compressor, message):
    body = compressor.compress(message) + compressor.flush(zlib.Z_SYNC_FLUSH)
    if body[-4:] != b"\x00\x00\xff\xff":
        fail("zlib flush")
    return body[:-4]


def deflate(c):
    offer = [(b"sec-websocket-extensions", b"permessage-deflate; client_max_window_bits")]
    sid = c.connect("/deflate", extra=offer)
    c.pump(lambda: sid in c.heads, "the 200")
    if c.heads[sid].get(b":status") != b"200" or \
            c.heads[sid].get(b"sec-websocket-extensions") != b"permessage-deflate":
        fail("opening %r" % c.heads[sid])
    compressor = zlib.compressobj(wbits=-15)
    decompressor = zlib.decompressobj(wbits=-15)
    text = "".join("h2 deflate %d; " % (i % 77) for i in range(20000)).encode()
    binary = bytes(range(256)) * 500
    # Compressed in the order sent: each refers back into the ones before (context takeover).
    first = compress(compressor, text)
    second = compress(compressor, text)
    fragmented = compress(compressor, binary)
    c.send(sid, frame(0x1, first, rsv1=True) + frame(0x1, second, rsv1=True) +
           frame(0x2, fragmented[:5], fin=False, rsv1=True) + frame(0x0, fragmented[5:]))
    got = []

    def three():
        nonlocal got
        got = parse(c.data.get(sid, b""), rsv1=True)[0]
        return len(got) >= 3
    c.pump(three, "the echoes")
    for (fin, opcode, rsv1, payload), (want_opcode, want) in zip(got, [(0x1, text), (0x1, text),
                                                                       (0x2, binary)]):
        if not fin or opcode != want_opcode or not rsv1:
            fail("echo frame %r %r %r" % (fin, opcode, rsv1))
        if len(payload) > len(want) // 10:
            fail("echo of %d bytes is %d compressed" % (len(want), len(payload)))
        if decompressor.decompress(payload + b"\x00\x00\xff\xff") != want:
            fail("echo does not inflate to the message")
    # A bomb on another stream: 64 MiB of zeros against /deflate's 2 MiB max_message.
    bomb_sid = c.connect("/deflate", extra=offer)
    c.pump(lambda: bomb_sid in c.heads, "the bomb's 200")
    bomb = compress(zlib.compressobj(wbits=-15), bytes(64 << 20))
    c.send(bomb_sid, frame(0x2, bomb, rsv1=True))
    got = c.frames(bomb_sid, 1, "the bomb's close")
    if got[0][1] != 0x8 or struct.unpack("!H", got[0][2][:2])[0] != 1009:
        fail("bomb close %r" % (got[0][:2],))
    c.pump(lambda: bomb_sid in c.ended or bomb_sid in c.reset, "the end of the bomb's stream")
    c.send(sid, frame(0x1, compress(compressor, text), rsv1=True))
    c.pump(lambda: len(parse(c.data.get(sid, b""))[0]) >= 4, "the echo after the bomb")
    last = parse(c.data[sid], rsv1=True)[0][3]
    if decompressor.decompress(last[3] + b"\x00\x00\xff\xff") != text:
        fail("echo after the bomb")
    c.send(sid, frame(0x8, struct.pack("!H", 1000)))
    c.pump(lambda: sid in c.ended, "the end of the stream")
    print("PASS deflate", flush=True)


def main():
    port, mode, scenario = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    c = Client(port, mode)
    {"echo": echo, "refused": refused, "bad-frame": bad_frame, "deflate": deflate}[scenario](c)


if __name__ == "__main__":
    main()
