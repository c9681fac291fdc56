#!/usr/bin/python3
"""A graceful server stop as a WebSocket client sees it: Petrel sends close 1001 ("going away",
RFC 6455 §7.4.1) on every open WebSocket, and the closing handshake completes before the stop's
grace period ends.

Usage: ws_going_away.py PORT h1|h2 tls|clear
  Opens /hold (Python's websockets over HTTP/1.1, or python-h2 with frames built here over
  HTTP/2), then waits for the server — stopped by the test once the WebSocket is open — to close
  it with 1001 and the reason "server stopping"; answers the close, and (h2) checks the stream
  then ends cleanly.
Prints "PASS going-away" and exits 0, or "FAIL ..." and exits 1. Bounded in time.
"""
import asyncio
import os
import ssl
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ws_h2_client  # noqa: E402  (its Client, frame and parse)

import h2.connection  # noqa: E402
import websockets  # noqa: E402

REASON = "server stopping"


def fail(detail):
    print("FAIL " + detail, flush=True)
    sys.exit(1)


async def over_h1(port, mode):
    ctx = None
    if mode == "tls":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    url = "%s://127.0.0.1:%d/hold" % ("wss" if mode == "tls" else "ws", port)
    async with websockets.connect(url, ssl=ctx, open_timeout=10, close_timeout=10) as ws:
        try:
            got = await asyncio.wait_for(ws.recv(), 30)
            fail("a message instead of the close: %r" % got)
        except websockets.exceptions.ConnectionClosed:
            pass
        except asyncio.TimeoutError:
            fail("no close within 30 s")
        if ws.close_code != 1001 or ws.close_reason != REASON:
            fail("close %r %r" % (ws.close_code, ws.close_reason))
    print("PASS going-away", flush=True)


def over_h2(port, mode):
    c = ws_h2_client.Client(port, mode)
    # python-h2 takes any GOAWAY as the end of the connection and refuses every later frame,
    # while RFC 9113 §6.8 lets the streams up to the GOAWAY's last id go on (which is how the
    # closing handshake completes here): keep this client's connection open on a GOAWAY.
    machine = c.conn.state_machine
    machine._transitions = dict(machine._transitions)
    machine._transitions[(h2.connection.ConnectionState.CLIENT_OPEN,
                          h2.connection.ConnectionInputs.RECV_GOAWAY)] = (
                              None, h2.connection.ConnectionState.CLIENT_OPEN)
    sid = c.connect("/hold")
    c.pump(lambda: sid in c.heads, "the 200")
    if c.heads[sid].get(b":status") != b"200":
        fail("status %r" % c.heads[sid])
    got = []

    def closed():
        nonlocal got
        got, _ = ws_h2_client.parse(c.data.get(sid, b""))
        return len(got) >= 1
    c.pump(closed, "the server's close", seconds=30)
    fin, opcode, payload = got[0]
    if opcode != 0x8 or payload != struct.pack("!H", 1001) + REASON.encode():
        fail("close frame %r" % (got[0],))
    c.send(sid, ws_h2_client.frame(0x8, struct.pack("!H", 1001)))
    c.pump(lambda: sid in c.ended or sid in c.reset, "the end of the stream", seconds=30)
    if sid in c.reset:
        fail("stream reset %r" % c.reset[sid])
    print("PASS going-away", flush=True)


def main():
    port, protocol, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    if protocol == "h1":
        asyncio.run(over_h1(port, mode))
    else:
        over_h2(port, mode)


if __name__ == "__main__":
    main()
