#!/usr/bin/python3
"""Many concurrent streams, big and small bodies mixed, against Petrel's h2 test server.

Usage: h2_mixed_client.py PORT tls|clear wide|narrow. Opens one connection with the python-h2
state machine (an HTTP/2 implementation that shares nothing with Petrel) and sends, in one go,
4 GET /big?mib=2 interleaved with 40 GET /hello. Then:
  wide:   16 MiB stream and connection windows, and a pause before reading, so the server fills
          the socket and its output buffer and must stop and resume on writability;
  narrow: the default 64 KiB windows, credit returned only as bytes are read, so the big
          streams stall on flow control while the small ones must still get through.
Every body is checked byte for byte (/big is BigByte(i) of the test server). Prints "PASS ..."
and exits 0, or "FAIL ..." and exits 1. Every read has a deadline.
"""
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

BIG = 2 << 20


def big_bytes(n):
    return bytes(97 + (i * 7 + i // 4099) % 26 for i in range(n))


def fail(detail):
    print("FAIL " + detail, flush=True)
    sys.exit(1)


def main():
    port, mode, windows = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if mode == "tls":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        sock = ctx.wrap_socket(sock, server_hostname="localhost")
        if sock.selected_alpn_protocol() != "h2":
            fail("ALPN %r" % sock.selected_alpn_protocol())
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    if windows == "wide":
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16 << 20})
        conn.increment_flow_control_window((16 << 20) - 65535)
    authority = "127.0.0.1:%d" % port
    scheme = "https" if mode == "tls" else "http"
    expected = {}
    for i in range(44):
        path = "/big?mib=2" if i % 11 == 0 else "/hello"
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [(":method", "GET"), (":scheme", scheme),
                                (":authority", authority), (":path", path)], end_stream=True)
        expected[sid] = path
    sock.sendall(conn.data_to_send())
    if windows == "wide":
        time.sleep(0.5)  # the scenario: a reader that is late, not a synchronisation

    status, bodies, ended = {}, {sid: bytearray() for sid in expected}, set()
    deadline = time.monotonic() + 60
    while len(ended) < len(expected):
        if time.monotonic() > deadline:
            fail("timeout: %d of %d streams ended" % (len(ended), len(expected)))
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        if not data:
            fail("EOF after %d of %d streams" % (len(ended), len(expected)))
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                status[ev.stream_id] = dict(ev.headers).get(b":status")
            elif isinstance(ev, h2.events.DataReceived):
                bodies[ev.stream_id] += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                ended.add(ev.stream_id)
            elif isinstance(ev, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                fail("unexpected %r" % ev)
        out = conn.data_to_send()
        if out:
            sock.sendall(out)

    want_big = big_bytes(BIG)
    for sid, path in expected.items():
        if status.get(sid) != b"200":
            fail("stream %d %s: status %r" % (sid, path, status.get(sid)))
        want = want_big if path.startswith("/big") else b"hello"
        if bytes(bodies[sid]) != want:
            fail("stream %d %s: %d bytes, want %d (or content differs)" %
                 (sid, path, len(bodies[sid]), len(want)))
    print("PASS %d streams, %d bytes" % (len(expected), sum(len(b) for b in bodies.values())),
          flush=True)


if __name__ == "__main__":
    main()
