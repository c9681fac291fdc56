#!/usr/bin/python3
"""Stuck TCP peers for petrel-server's slow-peers test.

- --h1-count slowloris HTTP/1.1 connections: each sends a request line and one header, then
  one more header line every --trickle seconds, and never ends the head;
- --h2-count idle HTTP/2 connections over TLS (ALPN h2, python3-h2 as the client): each sends
  the preface and its SETTINGS, answers what the server sends, and opens no stream.

Every connection stays until the server closes it (or --deadline passes). Once all of them are
open (h2: the server's SETTINGS received) the script writes --ready; at the end it writes
--report, a JSON object that says per kind how many opened, how each ended (h1: the status line
the server sent; h2: the GOAWAY error code) and how long they lived.
"""
import argparse
import asyncio
import json
import ssl
import time

import h2.config
import h2.connection
import h2.events


class Tally:
    def __init__(self):
        self.opened = 0
        self.connect_failed = 0
        self.errors = {}
        self.endings = {}  # h1: status line; h2: GOAWAY error code ("none" without one)
        self.closed_by_server = 0
        self.still_open = 0
        self.lifetimes = []

    def ending(self, key):
        self.endings[key] = self.endings.get(key, 0) + 1

    def error(self, e):
        key = type(e).__name__
        self.errors[key] = self.errors.get(key, 0) + 1

    def report(self):
        lt = sorted(self.lifetimes)
        return {
            "opened": self.opened,
            "connect_failed": self.connect_failed,
            "connect_errors": self.errors,
            "endings": self.endings,
            "closed_by_server": self.closed_by_server,
            "still_open": self.still_open,
            "lifetime_min_s": round(lt[0], 2) if lt else None,
            "lifetime_max_s": round(lt[-1], 2) if lt else None,
        }


async def slowloris(host, port, trickle, deadline, connect_slots, tally, opened):
    try:
        async with connect_slots:
            reader, writer = await asyncio.open_connection(host, port)
    except OSError as e:
        tally.connect_failed += 1
        tally.error(e)
        opened.release()
        return
    began = time.monotonic()
    writer.write(b"GET /never-finished HTTP/1.1\r\nHost: stuck.test\r\n")
    tally.opened += 1
    opened.release()
    received = b""
    line = 0
    closed = None
    while time.monotonic() < deadline:
        try:
            data = await asyncio.wait_for(reader.read(4096), trickle)
        except asyncio.TimeoutError:
            writer.write(b"X-Slow-%d: one line now and then\r\n" % line)
            line += 1
            continue
        except OSError as e:
            closed = f"{type(e).__name__} after {line} lines"
            break
        if not data:
            closed = f"closed after {line} lines"
            break
        received += data
    if closed:
        tally.closed_by_server += 1
        tally.lifetimes.append(time.monotonic() - began)
        tally.ending(received.split(b"\r\n", 1)[0].decode("latin-1") or closed)
    else:
        tally.still_open += 1
    writer.close()


async def idle_h2(host, port, context, deadline, connect_slots, tally, opened):
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    try:
        async with connect_slots:
            reader, writer = await asyncio.open_connection(
                host, port, ssl=context, server_hostname="localhost")
            alpn = writer.get_extra_info("ssl_object").selected_alpn_protocol()
            if alpn != "h2":
                raise ConnectionError(f"ALPN {alpn}")
            conn.initiate_connection()
            writer.write(conn.data_to_send())
            settings = False
            while not settings:  # the connection counts as open once the server's SETTINGS came
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("closed before SETTINGS")
                for event in conn.receive_data(data):
                    settings |= isinstance(event, h2.events.RemoteSettingsChanged)
                writer.write(conn.data_to_send())
    except (OSError, ConnectionError, ssl.SSLError) as e:
        tally.connect_failed += 1
        tally.error(e)
        opened.release()
        return
    began = time.monotonic()
    tally.opened += 1
    opened.release()
    goaway = "none"
    closed = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            data = await asyncio.wait_for(reader.read(65536), left)
        except asyncio.TimeoutError:
            break
        except (OSError, ssl.SSLError):
            closed = True
            break
        if not data:
            closed = True
            break
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.ConnectionTerminated):
                goaway = f"GOAWAY {int(event.error_code)}"
        out = conn.data_to_send()
        if out:
            writer.write(out)
    if closed:
        tally.closed_by_server += 1
        tally.lifetimes.append(time.monotonic() - began)
        tally.ending(goaway)
    else:
        tally.still_open += 1
    writer.close()


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--h1-port", type=int, required=True, help="cleartext HTTP/1.1 port")
    parser.add_argument("--h2-port", type=int, required=True, help="TLS port offering h2")
    parser.add_argument("--h1-count", type=int, default=1000)
    parser.add_argument("--h2-count", type=int, default=1000)
    parser.add_argument("--trickle", type=float, default=1.0,
                        help="seconds between a slowloris connection's header lines")
    parser.add_argument("--deadline", type=float, default=120,
                        help="seconds after which connections still open are counted and closed")
    parser.add_argument("--ready", required=True, help="written once every connection is open")
    parser.add_argument("--report", required=True, help="the JSON report, written at the end")
    args = parser.parse_args()

    deadline = time.monotonic() + args.deadline
    connect_slots = asyncio.Semaphore(64)  # connects in flight: well inside the listen backlog
    opened = asyncio.Semaphore(0)
    h1, h2_tally = Tally(), Tally()
    tasks = [asyncio.create_task(
        slowloris(args.host, args.h1_port, args.trickle, deadline, connect_slots, h1, opened))
        for _ in range(args.h1_count)]
    # One context for all: building one loads the system's CA store (~20 ms of CPU each).
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    tasks += [asyncio.create_task(
        idle_h2(args.host, args.h2_port, context, deadline, connect_slots, h2_tally, opened))
        for _ in range(args.h2_count)]
    for _ in range(args.h1_count + args.h2_count):
        await opened.acquire()
    with open(args.ready, "w") as f:
        json.dump({"h1_opened": h1.opened, "h2_opened": h2_tally.opened}, f)
    await asyncio.gather(*tasks)
    with open(args.report, "w") as f:
        json.dump({"h1": h1.report(), "h2": h2_tally.report()}, f, indent=1)


if __name__ == "__main__":
    asyncio.run(main())
