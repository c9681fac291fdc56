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


def main():
    port, mode, scenario = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    if scenario == "echo":
        asyncio.run(asyncio.wait_for(echo(port, mode), 60))
    elif scenario == "refused":
        refused(port, mode)
    else:
        raw(port, mode)


if __name__ == "__main__":
    main()
