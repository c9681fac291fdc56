#!/usr/bin/env python3
"""petrel-server's WebSocket echo (--websocket-echo /ws) against a real browser: Debian's
Chromium, headless.

A page served by petrel-server opens wss://ORIGIN/ws, sends a text message (non-ASCII) and a
100 000-byte binary one, checks both echoes byte for byte, closes with 1000 and reports what it
saw by requesting /report/<result>, which the server's access log records. Run twice:
  - over HTTP/2 (QUIC off): Chromium carries the WebSocket on the page's HTTP/2 connection with
    an extended CONNECT (RFC 8441), because the server's SETTINGS offered it — the net log must
    show the CONNECT with :protocol websocket on an HTTP/2 session, and no HTTP/1.1 Upgrade;
  - over HTTP/1.1 (HTTP/2 off too): an Upgrade request (RFC 6455) — the net log must show it.
Chromium offers permessage-deflate (RFC 7692) and the echo route accepts it: the page must see it
agreed (WebSocket.extensions) on both protocols, and the echoes exact through it.

Usage: chromium_websocket_test.py PETREL-SERVER
Exits 77 (skipped) only when no Chromium is installed or it cannot start at all.
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chromium_test import (SKIP, Browser, Failure, NetLog, Server, cannot_start,  # noqa: E402
                           find_chromium, free_ports, spki_hash)

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>ws</title></head><body><script>
async function run() {
  const ws = new WebSocket(`wss://${location.host}/ws`);
  ws.binaryType = 'arraybuffer';
  await new Promise((ok, bad) => { ws.onopen = ok; ws.onerror = () => bad('no-open'); });
  const next = () => new Promise(ok => { ws.onmessage = e => ok(e.data); });
  ws.send('h\\u00e9llo \\u2603');
  const text = await next();
  const big = new Uint8Array(100000);
  for (let i = 0; i < big.length; ++i) big[i] = (i * 7 + (i >> 8)) & 255;
  ws.send(big);
  const back = new Uint8Array(await next());
  const same = back.length === big.length && back.every((b, i) => b === big[i]);
  const closed = new Promise(ok => { ws.onclose = e => ok(e); });
  ws.close(1000, 'done');
  const e = await closed;
  await fetch(`/report/text-${text === 'h\\u00e9llo \\u2603'}-binary-${same}-close-${e.code}` +
              `-clean-${e.wasClean}-ext-${ws.extensions || 'none'}`);
}
run().catch(e => fetch('/report/error-' + encodeURIComponent(String(e))));
</script></body></html>
"""
WANT = "text-true-binary-true-close-1000-clean-true-ext-permessage-deflate"


def headers_of(event):
    h = event["params"].get("headers", [])
    return h if isinstance(h, list) else str(h).split("\n")


def check_netlog(netlog, protocol):
    """Which handshake carried the WebSocket: RFC 8441 on an HTTP/2 session, or RFC 6455."""
    connect = [e for e in netlog.of_type("HTTP2_SESSION_SEND_HEADERS")
               if ":protocol: websocket" in headers_of(e)
               and ":method: CONNECT" in headers_of(e)]
    upgrade = [e for e in netlog.events
               if e["type"] in ("HTTP_TRANSACTION_SEND_REQUEST_HEADERS",
                                "HTTP_TRANSACTION_HTTP2_SEND_REQUEST_HEADERS")
               and any(h.lower() == "upgrade: websocket" for h in headers_of(e))]
    if protocol == "h2":
        if not connect:
            raise Failure("over h2: the net log has no HTTP/2 CONNECT with :protocol websocket "
                          "(RFC 8441)")
        if upgrade:
            raise Failure("over h2: the net log shows an HTTP/1.1 Upgrade as well")
        path = [h for h in headers_of(connect[0]) if h.startswith(":path: ")]
        if path != [":path: /ws"]:
            raise Failure(f"over h2: the CONNECT's path is {path}")
    else:
        if connect:
            raise Failure("over HTTP/1.1: the net log shows an HTTP/2 CONNECT")
        if not upgrade:
            raise Failure("over HTTP/1.1: the net log has no request with Upgrade: websocket")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    server_bin = sys.argv[1]
    chromium = find_chromium()
    if not chromium:
        print("SKIP: Chromium is not installed (scripts/install-deps.sh installs Debian's "
              "chromium)")
        return SKIP
    work = tempfile.mkdtemp(prefix="petrel-chromium-ws-")
    os.makedirs(os.path.join(work, "tmp"))
    os.environ["TMPDIR"] = os.path.join(work, "tmp")
    server = None
    try:
        why = cannot_start(chromium, work)
        if why:
            print(f"SKIP: {why}")
            return SKIP

        os.environ["PETREL_STATE_DIR"] = os.path.join(work, "state")
        root = os.path.join(work, "root")
        os.makedirs(root)
        with open(os.path.join(root, "ws.html"), "w") as f:
            f.write(PAGE)
        (port,) = free_ports(1)
        server = Server(server_bin, work, "ws", port, ["--root", root, "--websocket-echo", "/ws"])
        browser = Browser(chromium, work, spki_hash(os.path.join(work, "state", "cert.pem")),
                          port)
        for protocol in ("h2", "http/1.1"):
            netlog_path = os.path.join(work, f"ws-{protocol.replace('/', '')}.netlog.json")
            report = browser.until_report(protocol, "/ws.html", netlog_path, server)
            if not report.startswith(WANT):
                raise Failure(f"over {protocol}: the page reported {report}, want {WANT}...")
            check_netlog(NetLog(netlog_path), protocol)
            print(f"ok: WebSocket echo over {protocol} "
                  f"({'RFC 8441 extended CONNECT' if protocol == 'h2' else 'RFC 6455 Upgrade'}; "
                  f"extensions: {report[len(WANT) - len('permessage-deflate'):]})")
        server.stop()
        server = None
        return 0
    except Failure as e:
        print(f"FAIL: {e}")
        if server is not None:
            print("--- server log\n" + server.tail())
        return 1
    finally:
        if server is not None:
            server.proc.kill()
            server.proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
