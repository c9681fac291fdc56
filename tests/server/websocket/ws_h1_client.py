#!/usr/bin/python3
"""A WebSocket over HTTP/1.1 (RFC 6455 Upgrade) against Petrel, with Python's `websockets` (an
implementation that shares nothing with Petrel) and raw sockets for what it would not send.

Usage: ws_h1_client.py PORT tls|clear SCENARIO
  echo:     /echo echoes a text, a binary, a 200 KiB message and 20 small ones in a row; /chat
            agrees on the subprotocol the route prefers among the client's; a close 1000 with a
            reason is answered with 1000.
  refused:  /refuse gets 403; a version other than 13 gets 426 with Sec-WebSocket-Version: 13; a
            GET without Upgrade gets 426 with Upgrade: websocket; a bad Sec-WebSocket-Key gets
            400 (each on a connection of its own).
  raw:      an unmasked frame sent on a raw socket after a valid opening gets a close 1002, then
            the server closes the connection.
  deflate:  /deflate agrees on permessage-deflate (RFC 7692) with websockets' default offer, and
            large compressible and incompressible messages (compressed both ways) echo
            byte-exact; /deflate-fresh answers with its no-context-takeover and window
            parameters, which websockets honours; /echo declines the offer (no extension). On a
            raw socket, a message compressed with Python's zlib echoes with RSV1 set and
            inflates with Python's zlib to the same bytes.
Prints "PASS ..." and exits 0, or "FAIL ..." and exits 1. Everything is bounded in time.
"""
import asyncio
import base64
import hashlib
import os
import socket
import ssl
import struct
import sys
import zlib

import websockets


def fail(detail):
    print("FAIL " + detail, flush=True)
    sys.exit(1)


def context(mode):
    if mode != "tls":
        return None
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


async def echo(port, mode):
    scheme = "wss" if mode == "tls" else "ws"
    url = "%s://127.0.0.1:%d" % (scheme, port)
    async with websockets.connect(url + "/echo", ssl=context(mode), max_size=1 << 21,
                                  open_timeout=10, close_timeout=10) as ws:
        await ws.send("héllo")
        if await asyncio.wait_for(ws.recv(), 10) != "héllo":
            fail("text echo")
        await ws.send(bytes(range(256)))
        if await asyncio.wait_for(ws.recv(), 10) != bytes(range(256)):
            fail("binary echo")
        big = os.urandom(200 * 1024)
        await ws.send(big)
        if await asyncio.wait_for(ws.recv(), 10) != big:
            fail("200 KiB echo")
        for i in range(20):
            await ws.send("m%d" % i)
        for i in range(20):
            got = await asyncio.wait_for(ws.recv(), 10)
            if got != "m%d" % i:
                fail("message %d: %r" % (i, got))
        await ws.close(1000, "bye")
        if ws.close_code != 1000:
            fail("close code %r" % ws.close_code)
    async with websockets.connect(url + "/chat", ssl=context(mode), subprotocols=["chat", "chat.v2"],
                                  open_timeout=10) as ws:
        if ws.subprotocol != "chat.v2":
            fail("subprotocol %r" % ws.subprotocol)
    print("PASS echo", flush=True)


def raw_exchange(port, mode, request, read_all=False):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if mode == "tls":
        sock = context(mode).wrap_socket(sock, server_hostname="localhost")
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data or read_all:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return sock, data


def opening(path, key=None, version=b"13", upgrade=True):
    key = key or base64.b64encode(os.urandom(16))
    lines = [b"GET " + path + b" HTTP/1.1", b"Host: 127.0.0.1"]
    if upgrade:
        lines += [b"Upgrade: websocket", b"Connection: Upgrade"]
    lines += [b"Sec-WebSocket-Key: " + key, b"Sec-WebSocket-Version: " + version]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def head_of(data):
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    fields = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return head[0], fields


def refused(port, mode):
    status, _ = head_of(raw_exchange(port, mode, opening(b"/refuse"))[1])
    if " 403 " not in status:
        fail("/refuse: %s" % status)
    status, fields = head_of(raw_exchange(port, mode, opening(b"/echo", version=b"8"))[1])
    if " 426 " not in status or fields.get("sec-websocket-version") != "13":
        fail("version 8: %s %r" % (status, fields))
    status, fields = head_of(raw_exchange(port, mode, opening(b"/echo", upgrade=False))[1])
    if " 426 " not in status or fields.get("upgrade", "").lower() != "websocket":
        fail("no Upgrade: %s %r" % (status, fields))
    status, _ = head_of(raw_exchange(port, mode, opening(b"/echo", key=b"c2hvcnQ="))[1])
    if " 400 " not in status:
        fail("bad key: %s" % status)
    print("PASS refused", flush=True)


def raw(port, mode):
    key = base64.b64encode(os.urandom(16))
    sock, data = raw_exchange(port, mode, opening(b"/echo", key=key))
    status, fields = head_of(data)
    if " 101 " not in status or fields.get("upgrade", "").lower() != "websocket" or \
            fields.get("connection", "").lower() != "upgrade":
        fail("opening: %s %r" % (status, fields))

    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    if fields.get("sec-websocket-accept", "").encode() != accept:
        fail("accept %r" % fields.get("sec-websocket-accept"))
    rest = data.split(b"\r\n\r\n", 1)[1]
    sock.sendall(bytes([0x81, 5]) + b"plain")  # unmasked: a client must mask
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    if len(rest) < 4 or rest[0] != 0x88 or struct.unpack("!H", rest[2:4])[0] != 1002:
        fail("close %r" % rest[:16])
    print("PASS raw", flush=True)


async def deflate(port, mode):
    scheme = "wss" if mode == "tls" else "ws"
    url = "%s://127.0.0.1:%d" % (scheme, port)
    async with websockets.connect(url + "/deflate", ssl=context(mode), max_size=1 << 21,
                                  open_timeout=10, close_timeout=10) as ws:
        if [e.name for e in ws.extensions] != ["permessage-deflate"]:
            fail("/deflate extensions %r" % ws.extensions)
        answer = ws.response_headers.get("Sec-WebSocket-Extensions")
        if answer != "permessage-deflate":
            fail("/deflate answered %r" % answer)
        text = "".join("petrel %d héllo; " % (i % 1000) for i in range(40000))  # ~700 KiB
        binary = bytes(range(256)) * 3000
        noise = os.urandom(300 * 1024)
        for message in (text, binary, noise, text, "small", b"\x00"):
            await ws.send(message)
            if await asyncio.wait_for(ws.recv(), 10) != message:
                fail("/deflate echo of %d bytes" % len(message))
        for i in range(20):
            await ws.send("m%d" % i)
        for i in range(20):
            got = await asyncio.wait_for(ws.recv(), 10)
            if got != "m%d" % i:
                fail("/deflate message %d: %r" % (i, got))
        await ws.close(1000, "bye")
        if ws.close_code != 1000:
            fail("/deflate close code %r" % ws.close_code)
    async with websockets.connect(url + "/deflate-fresh", ssl=context(mode), max_size=1 << 21,
                                  open_timeout=10, close_timeout=10) as ws:
        answer = ws.response_headers.get("Sec-WebSocket-Extensions")
        if answer != ("permessage-deflate; server_no_context_takeover; client_no_context_takeover;"
                      " server_max_window_bits=10; client_max_window_bits=12"):
            fail("/deflate-fresh answered %r" % answer)
        text = "".join("fresh %d; " % (i % 300) for i in range(30000))
        for _ in range(3):
            await ws.send(text)
            if await asyncio.wait_for(ws.recv(), 10) != text:
                fail("/deflate-fresh echo")
    async with websockets.connect(url + "/echo", ssl=context(mode), open_timeout=10) as ws:
        if ws.extensions or ws.response_headers.get("Sec-WebSocket-Extensions") is not None:
            fail("/echo agreed on %r" % ws.extensions)
        await ws.send("x" * 1000)
        if await asyncio.wait_for(ws.recv(), 10) != "x" * 1000:
            fail("/echo echo")
    raw_deflate(port, mode)
    print("PASS deflate", flush=True)


def read_frame(sock, buf):
    """One whole unmasked server frame: ((byte0, payload), rest)."""
    def need(n):
        nonlocal buf
        while len(buf) < n:
            chunk = sock.recv(65536)
            if not chunk:
                fail("connection ended inside a frame")
            buf += chunk
    need(2)
    n, at = buf[1] & 0x7F, 2
    if n == 126:
        need(4)
        n, at = struct.unpack("!H", buf[2:4])[0], 4
    elif n == 127:
        need(10)
        n, at = struct.unpack("!Q", buf[2:10])[0], 10
    need(at + n)
    return (buf[0], buf[at:at + n]), buf[at + n:]


def masked(byte0, payload):
    n = len(payload)
    if n < 126:
        head = bytes([byte0, 0x80 | n])
    elif n < 65536:
        head = bytes([byte0, 0x80 | 126]) + struct.pack("!H", n)
    else:
        head = bytes([byte0, 0x80 | 127]) + struct.pack("!Q", n)
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def raw_deflate(port, mode):
    """The wire format itself, checked with Python's zlib rather than websockets' codec."""
    request = opening(b"/deflate").replace(
        b"\r\n\r\n", b"\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n")
    sock, data = raw_exchange(port, mode, request)
    status, fields = head_of(data)
    if " 101 " not in status or fields.get("sec-websocket-extensions") != "permessage-deflate":
        fail("raw opening: %s %r" % (status, fields))
    rest = data.split(b"\r\n\r\n", 1)[1]
    compressor = zlib.compressobj(wbits=-15)
    decompressor = zlib.decompressobj(wbits=-15)
    message = ("raw deflate " * 2000).encode()
    for _ in range(2):  # the second time both sides use the context of the first
        body = compressor.compress(message) + compressor.flush(zlib.Z_SYNC_FLUSH)
        if body[-4:] != b"\x00\x00\xff\xff":
            fail("zlib flush")
        sock.sendall(masked(0xC1, body[:-4]))  # FIN, RSV1, text
        (byte0, payload), rest = read_frame(sock, rest)
        if byte0 != 0xC1:
            fail("echo frame starts %#x, not FIN+RSV1+text" % byte0)
        if len(payload) > len(message) // 10:
            fail("echo of %d bytes is %d compressed" % (len(message), len(payload)))
        if decompressor.decompress(payload + b"\x00\x00\xff\xff") != message:
            fail("echo does not inflate to the message")
    sock.sendall(masked(0x88, struct.pack("!H", 1000)))
    (byte0, payload), rest = read_frame(sock, rest)
    if byte0 != 0x88 or payload[:2] != struct.pack("!H", 1000):
        fail("close %#x %r" % (byte0, payload))
    sock.close()


def main():
    port, mode, scenario = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    if scenario == "echo":
        asyncio.run(asyncio.wait_for(echo(port, mode), 60))
    elif scenario == "deflate":
        asyncio.run(asyncio.wait_for(deflate(port, mode), 60))
    elif scenario == "refused":
        refused(port, mode)
    else:
        raw(port, mode)


if __name__ == "__main__":
    main()
