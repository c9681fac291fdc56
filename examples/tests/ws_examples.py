#!/usr/bin/python3
"""The WebSocket examples against Python's websockets (an implementation that shares nothing
with Petrel), over HTTP/1.1.

Usage: ws_examples.py SCENARIO PORT
  echo:      /echo returns a text, a binary, a 1 MiB binary and 500 small messages sent
             without waiting (so the server's send buffer fills and its backpressure path runs),
             all byte for byte and in order; a close 1000 is answered with 1000.
  broadcast: three members join /room; each sees the others join; a message from one reaches
             all three; a member that leaves is announced to the rest.
  hold:      opens /echo, prints "open", then waits (up to 30 s) for the server's close and
             prints "closed CODE REASON".
Prints "PASS SCENARIO" (or the hold lines) and exits 0, or "FAIL ..." and exits 1.
"""
import asyncio
import os
import sys

import websockets


def fail(detail):
    print("FAIL " + detail, flush=True)
    sys.exit(1)


async def recv(ws, what):
    try:
        return await asyncio.wait_for(ws.recv(), 10)
    except asyncio.TimeoutError:
        fail("timed out waiting for " + what)


async def echo(port):
    async with websockets.connect("ws://127.0.0.1:%d/echo" % port, max_size=1 << 22,
                                  open_timeout=10, close_timeout=10) as ws:
        await ws.send("héllo")
        if await recv(ws, "text") != "héllo":
            fail("text echo")
        await ws.send(bytes(range(256)))
        if await recv(ws, "binary") != bytes(range(256)):
            fail("binary echo")
        big = os.urandom(1 << 20)
        await ws.send(big)
        if await recv(ws, "1 MiB") != big:
            fail("1 MiB echo")
        sent = ["m%d-" % i + "x" * 4000 for i in range(500)]
        for m in sent:
            await ws.send(m)
        for i, m in enumerate(sent):
            if await recv(ws, "message %d" % i) != m:
                fail("message %d out of order or changed" % i)
        await ws.close(1000, "bye")
        if ws.close_code != 1000:
            fail("close code %r" % ws.close_code)
    print("PASS echo", flush=True)


async def expect(ws, want, who):
    while True:
        got = await recv(ws, "%r at %s" % (want, who))
        if got == want:
            return


async def broadcast(port):
    url = "ws://127.0.0.1:%d/room?name=" % port
    a = await websockets.connect(url + "a", open_timeout=10)
    await expect(a, "* a joined", "a")
    b = await websockets.connect(url + "b", open_timeout=10)
    await expect(a, "* b joined", "a")
    await expect(b, "* b joined", "b")
    c = await websockets.connect(url + "c", open_timeout=10)
    for ws, who in ((a, "a"), (b, "b"), (c, "c")):
        await expect(ws, "* c joined", who)
    await b.send("hi from b")
    for ws, who in ((a, "a"), (b, "b"), (c, "c")):
        await expect(ws, "b: hi from b", who)
    await c.close()
    for ws, who in ((a, "a"), (b, "b")):
        await expect(ws, "* c left", who)
    await a.close()
    await b.close()
    print("PASS broadcast", flush=True)


async def hold(port):
    async with websockets.connect("ws://127.0.0.1:%d/echo" % port, open_timeout=10,
                                  close_timeout=10) as ws:
        print("open", flush=True)
        try:
            got = await asyncio.wait_for(ws.recv(), 30)
            fail("a message instead of the close: %r" % got)
        except websockets.exceptions.ConnectionClosed:
            pass
        except asyncio.TimeoutError:
            fail("no close within 30 s")
        print("closed %s %s" % (ws.close_code, ws.close_reason), flush=True)


def main():
    scenario, port = sys.argv[1], int(sys.argv[2])
    asyncio.run({"echo": echo, "broadcast": broadcast, "hold": hold}[scenario](port))


if __name__ == "__main__":
    main()
