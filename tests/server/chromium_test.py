#!/usr/bin/env python3
"""petrel-server against a real browser: Debian's Chromium, headless.

Over HTTP/3 (QUIC forced for the origin, the server's self-signed certificate pinned by the hash
of its public key):
  - the demo site's index page says it came over HTTP/3, and Chromium's net log shows one QUIC
    session that finished its handshake and received the response's HEADERS and DATA; by
    127.0.0.1 and by `localhost` (which Chromium's QUIC sends to ::1 alone: the server's default
    listen addresses must include it);
  - a page with 100 images: all load, every response came over h3, and the net log shows them
    multiplexed on one QUIC session, each on a stream of its own (Chromium may also open a
    session it never uses; that one must carry nothing);
  - a 10 MiB download: the page hashes what it got with SHA-256 and reports it; it must match.
The same pages over HTTP/2 and HTTP/1.1, for comparison (their load times are printed, never
asserted). Pages report their result either in the DOM (--dump-dom) or, for the asynchronous
download, by requesting /report/<result>, which the server's access log records.

Usage: chromium_test.py PETREL-SERVER
Environment: PETREL_CHROMIUM (default: Debian's /usr/lib/chromium/chromium, else `chromium`).
Exits 77 (skipped) only when no Chromium is installed or it cannot start at all.
"""
import base64
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
RUN_TIMEOUT = 120  # seconds for one browser run
DOWNLOAD_BYTES = 10 * 1024 * 1024
IMAGES = 100
# A 1x1 GIF.
GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")


class Failure(Exception):
    pass


def find_chromium():
    explicit = os.environ.get("PETREL_CHROMIUM")
    if explicit:
        return explicit
    if os.access("/usr/lib/chromium/chromium", os.X_OK):
        return "/usr/lib/chromium/chromium"
    return shutil.which("chromium")


def cannot_start(chromium, work):
    """Why Chromium cannot run here (a headless about:blank fails), or None if it can."""
    try:
        probe = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                f"--user-data-dir={work}/probe", "--dump-dom", "about:blank"],
                               capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except OSError as e:
        return f"Chromium ({chromium}) cannot start here: {e}"
    if probe.returncode != 0 or "<html" not in probe.stdout:
        return (f"Chromium ({chromium}) cannot start here, exit {probe.returncode}:\n"
                + browser_errors(probe.stderr))
    return None


def free_ports(count):
    out = subprocess.run([sys.executable, os.path.join(HERE, "..", "support", "server_ports.py"),
                          str(count)], check=True, capture_output=True, text=True, timeout=60)
    return [int(p) for p in out.stdout.split()]


def spki_hash(cert_path):
    """base64(SHA-256(SubjectPublicKeyInfo)): what --ignore-certificate-errors-spki-list takes."""
    pem = subprocess.run(["openssl", "x509", "-in", cert_path, "-pubkey", "-noout"], check=True,
                         capture_output=True, timeout=30).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pem, check=True,
                         capture_output=True, timeout=30).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def write_site(root):
    """many.html (100 images) and download.html (hashes a 10 MiB file). Returns its SHA-256."""
    os.makedirs(os.path.join(root, "img"))
    for i in range(IMAGES):
        with open(os.path.join(root, "img", f"{i}.gif"), "wb") as f:
            f.write(GIF)
    images = "".join(f'<img src="img/{i}.gif" alt="">' for i in range(IMAGES))
    # Runs in the load event, so --dump-dom sees its result.
    with open(os.path.join(root, "many.html"), "w") as f:
        f.write("""<!doctype html><html><head><meta charset="utf-8"><title>many</title></head>
<body><p id="result">pending</p>""" + images + """
<script>
window.addEventListener('load', () => {
  const images = Array.from(document.images);
  const loaded = images.filter(i => i.complete && i.naturalWidth === 1).length;
  const protocols = {};
  for (const e of performance.getEntriesByType('resource'))
    protocols[e.nextHopProtocol] = (protocols[e.nextHopProtocol] || 0) + 1;
  const page = performance.getEntriesByType('navigation')[0];
  document.getElementById('result').textContent = JSON.stringify({
    loaded, images: images.length, page: page.nextHopProtocol, protocols,
    ms: Math.round(page.loadEventStart)});
});
</script></body></html>
""")
    data = os.urandom(DOWNLOAD_BYTES)
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(data)
    with open(os.path.join(root, "download.html"), "w") as f:
        f.write("""<!doctype html><html><head><meta charset="utf-8"><title>download</title></head>
<body><script>
async function run() {
  const start = performance.now();
  const res = await fetch('big.bin', {cache: 'no-store'});
  const body = await res.arrayBuffer();
  const ms = Math.round(performance.now() - start);
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', body));
  const hex = Array.from(digest, b => b.toString(16).padStart(2, '0')).join('');
  const entry = performance.getEntriesByName(res.url)[0];
  const protocol = entry ? entry.nextHopProtocol : 'none';
  await fetch(`/report/status-${res.status}-bytes-${body.byteLength}-sha256-${hex}` +
              `-protocol-${protocol}-ms-${ms}`);
}
run().catch(e => fetch('/report/error-' + encodeURIComponent(String(e))));
</script></body></html>
""")
    return hashlib.sha256(data).hexdigest()


class Server:
    """petrel-server as a child process, TLS on `port` (TCP and UDP), access log to a file."""

    def __init__(self, binary, work, name, port, extra):
        self.log_path = os.path.join(work, f"{name}.log")
        self.access_path = os.path.join(work, f"{name}.access.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "--https-port", str(port), "--http-port", "0", "--workers", "1",
             "--access-log", "common", "--access-log-file", self.access_path] + extra,
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failure(f"{name}: petrel-server exited at start:\n{self.tail()}")
            with open(self.log_path) as f:
                if "listening on" in f.read():
                    return
            time.sleep(0.05)
        raise Failure(f"{name}: petrel-server did not start:\n{self.tail()}")

    def tail(self):
        with open(self.log_path) as f:
            return "".join(f.readlines()[-20:])

    def access_lines(self):
        try:
            with open(self.access_path) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise Failure("petrel-server did not stop on SIGTERM")
        self.log.close()
        if rc != 0:
            raise Failure(f"petrel-server exited {rc}:\n{self.tail()}")


class Browser:
    """One headless Chromium run with its own profile and net log."""

    def __init__(self, chromium, work, spki, port):
        self.chromium = chromium
        self.work = work
        self.spki = spki
        self.port = port
        self.runs = 0

    def args(self, protocol, netlog, host="127.0.0.1"):
        self.runs += 1
        profile = os.path.join(self.work, f"profile-{self.runs}")
        args = [self.chromium, "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
                f"--ignore-certificate-errors-spki-list={self.spki}",
                f"--log-net-log={netlog}", "--net-log-capture-mode=Everything"]
        if protocol == "h3":
            args += ["--enable-quic", f"--origin-to-force-quic-on={host}:{self.port}"]
        else:
            args += ["--disable-quic"]
            if protocol == "http/1.1":
                args += ["--disable-http2"]
        return args

    def dump_dom(self, protocol, path, netlog, host="127.0.0.1"):
        url = f"https://{host}:{self.port}{path}"
        out_path = os.path.join(self.work, f"chromium-{self.runs + 1}.out")
        err_path = os.path.join(self.work, f"chromium-{self.runs + 1}.err")
        with open(out_path, "w") as out, open(err_path, "w") as err:
            proc = start_browser(self.args(protocol, netlog, host) + ["--dump-dom", url], out,
                                 err)
        try:
            rc = proc.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Failure(f"chromium did not finish {url} ({protocol}) in {RUN_TIMEOUT} s")
        finally:
            end_browser(proc)
        with open(err_path) as f:
            stderr = f.read()
        if rc != 0 or "Page load failed" in stderr:
            raise Failure(f"chromium failed on {url} ({protocol}), exit {rc}:\n"
                          + browser_errors(stderr))
        with open(out_path) as f:
            return f.read()

    def until_report(self, protocol, path, netlog, server):
        """Opens `path` and waits for the page's /report/ request in the server's access log."""
        seen = len(server.access_lines())
        url = f"https://127.0.0.1:{self.port}{path}"
        err_path = os.path.join(self.work, f"chromium-{self.runs + 1}.err")
        with open(err_path, "w") as err:
            proc = start_browser(self.args(protocol, netlog) + [url], subprocess.DEVNULL, err)
        try:
            deadline = time.monotonic() + RUN_TIMEOUT
            while time.monotonic() < deadline:
                for line in server.access_lines()[seen:]:
                    m = re.search(r'"GET /report/(\S+) ', line)
                    if m:
                        return m.group(1)
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
            with open(err_path) as f:
                raise Failure(f"no report from {url} ({protocol}):\n" + browser_errors(f.read()))
        finally:
            # SIGTERM lets Chromium close its net log properly.
            proc.send_signal(signal.SIGTERM)
            end_browser(proc)


def start_browser(args, stdout, stderr):
    """Chromium in a process group of its own, so that end_browser can wait for all of it."""
    return subprocess.Popen(args, stdout=stdout, stderr=stderr, start_new_session=True)


def end_browser(proc):
    """Waits for the browser and then for every process it started: its network service writes
    the net log and may still be finishing it after the browser process is gone. Bounded: what
    is left after 30 s is killed."""
    deadline = time.monotonic() + 30
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def browser_errors(stderr):
    lines = [l for l in stderr.splitlines() if "dbus" not in l and "DBus" not in l]
    return "\n".join(lines[-15:])


class NetLog:
    """Chromium's net log: events with numeric types, resolved through its constants."""

    def __init__(self, path):
        with open(path) as f:
            text = f.read()
        # Finished: the writer closed the log. An unfinished one (the network service stopped
        # before it was done, as on a loaded machine) has the events up to where it stopped.
        self.finished = True
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = NetLog.parse_unfinished(text)
            self.finished = False
        constants = data["constants"]
        event_names = {v: k for k, v in constants["logEventTypes"].items()}
        source_names = {v: k for k, v in constants["logSourceType"].items()}
        self.events = []
        for e in data["events"]:
            self.events.append({
                "type": event_names.get(e["type"], str(e["type"])),
                "source_type": source_names.get(e["source"]["type"], ""),
                "source": e["source"]["id"],
                "phase": e.get("phase"),
                "time": int(e.get("time", "0")),
                "params": e.get("params", {}),
            })

    @staticmethod
    def parse_unfinished(text):
        """A net log its writer did not finish: the constants on the first line, then one event
        per line; whatever follows the last complete event is left out."""
        lines = text.split("\n")
        data = json.loads(lines[0].rstrip().rstrip(",") + "}")
        data["events"] = []
        for line in lines[2:]:
            try:
                data["events"].append(json.loads(line.rstrip().rstrip(",")))
            except json.JSONDecodeError:
                break
        return data

    def of_type(self, name):
        return [e for e in self.events if e["type"] == name]

    def quic_sessions(self, port, host="127.0.0.1"):
        """Source ids of QUIC sessions to host:port."""
        return sorted({e["source"] for e in self.of_type("QUIC_SESSION")
                       if e["phase"] == 1 and e["params"].get("host") == host
                       and e["params"].get("port") == port})

    def quic_peer_addresses(self, port):
        """Where Chromium sent QUIC datagrams for that port (UDP_CONNECT addresses)."""
        return sorted({e["params"]["address"] for e in self.of_type("UDP_CONNECT")
                       if e["params"].get("address", "").endswith(f":{port}")})


def check_h3_netlog(netlog, port, requests, host="127.0.0.1"):
    """The requests went over QUIC sessions to host:port, each of which did the handshake and
    carried HEADERS and DATA both ways; the server closed none of them; `requests` responses had
    status 200. Usually one session carries everything (Chromium may open another that it never
    uses, a preconnect); on a loaded machine Chromium sometimes starts a second one while the
    first is still busy and uses both, which is the browser's choice, not the server's. Returns
    the events of the sessions that carried requests."""
    sessions = netlog.quic_sessions(port, host)
    used = [s for s in sessions
            if any(e["source"] == s and e["type"] == "HTTP3_HEADERS_SENT" for e in netlog.events)]
    if not used:
        raise Failure(f"no QUIC session to {host}:{port} carried a request; sessions {sessions}")
    mine = [e for e in netlog.events if e["source"] in used]
    for session in used:
        names = {e["type"] for e in mine if e["source"] == session}
        for needed in ("QUIC_SESSION_CRYPTO_HANDSHAKE_COMPLETE", "HTTP3_SETTINGS_RECEIVED",
                       "HTTP3_HEADERS_RECEIVED", "HTTP3_DATA_FRAME_RECEIVED"):
            if needed not in names:
                raise Failure(f"QUIC session {session}'s net log has no {needed}")
    for e in netlog.events:
        if (e["source"] in sessions and e["type"] == "QUIC_SESSION_CLOSED"
                and e["params"].get("from_peer")):
            raise Failure(f"the server closed a QUIC session: {e['params']}")
    statuses = [e for e in mine if e["type"] == "HTTP3_HEADERS_DECODED"
                and ":status: 200" in e["params"].get("headers", [])]
    if len(statuses) < requests:
        raise Failure(f"want {requests} responses with status 200 on the QUIC sessions, "
                      f"got {len(statuses)}")
    if len(used) > 1:
        print(f"note: Chromium carried the requests to {host}:{port} on {len(used)} QUIC "
              "sessions in this run")
    return mine


def max_open_requests(session_events):
    """The most requests the session had sent and not yet seen a response head for."""
    open_now = peak = 0
    for e in sorted(session_events, key=lambda e: e["time"]):
        if e["type"] == "HTTP3_HEADERS_SENT":
            open_now += 1
            peak = max(peak, open_now)
        elif e["type"] == "HTTP3_HEADERS_DECODED":
            open_now -= 1
    return peak


def data_bytes_by_stream(session_events):
    """DATA payload bytes per (session, stream): stream ids repeat across sessions."""
    totals = {}
    for e in session_events:
        if e["type"] == "HTTP3_DATA_FRAME_RECEIVED":
            key = (e["source"], e["params"]["stream_id"])
            totals[key] = totals.get(key, 0) + e["params"]["payload_length"]
    return totals


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def check_localhost(browser, work, port):
    """https://localhost:PORT/ with QUIC forced says HTTP/3."""
    netlog_path = os.path.join(work, "demo-localhost.netlog.json")
    dom = browser.dump_dom("h3", "/", netlog_path, host="localhost")
    if 'id="protocol">HTTP/3</strong>' not in dom:
        raise Failure(f"https://localhost:{port}/ with QUIC forced does not say HTTP/3:\n"
                      f"{dom[:600]}")
    netlog = NetLog(netlog_path)
    check_h3_netlog(netlog, port, 1, host="localhost")
    print("ok: https://localhost/ over h3 (Chromium sent QUIC to "
          f"{', '.join(netlog.quic_peer_addresses(port))})")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    server_bin = sys.argv[1]
    chromium = find_chromium()
    if not chromium:
        print("SKIP: Chromium is not installed (scripts/install-deps.sh installs Debian's "
              "chromium)")
        return SKIP
    work = tempfile.mkdtemp(prefix="petrel-chromium-")
    # Chromium leaves directories of its own in the temporary directory: keep them in `work`,
    # which goes at the end.
    os.makedirs(os.path.join(work, "tmp"))
    os.environ["TMPDIR"] = os.path.join(work, "tmp")
    servers = []
    try:
        why = cannot_start(chromium, work)
        if why:
            print(f"SKIP: {why}")
            return SKIP

        os.environ["PETREL_STATE_DIR"] = os.path.join(work, "state")
        demo_port, site_port = free_ports(2)
        demo = Server(server_bin, work, "demo", demo_port, [])
        servers.append(demo)
        spki = spki_hash(os.path.join(work, "state", "cert.pem"))
        root = os.path.join(work, "root")
        want_sha = write_site(root)
        site = Server(server_bin, work, "site", site_port, ["--root", root])
        servers.append(site)

        # The demo site's index page, over each protocol.
        browser = Browser(chromium, work, spki, demo_port)
        for protocol, says in (("h3", "HTTP/3"), ("h2", "HTTP/2"), ("http/1.1", "HTTP/1.1")):
            netlog_path = os.path.join(work, f"demo-{protocol.replace('/', '')}.netlog.json")
            dom = browser.dump_dom(protocol, "/", netlog_path)
            if f'id="protocol">{says}</strong>' not in dom:
                raise Failure(f"the demo page over {protocol} does not say {says}:\n{dom[:600]}")
            netlog = NetLog(netlog_path)
            if protocol == "h3":
                mine = check_h3_netlog(netlog, demo_port, 1)
                body = sum(data_bytes_by_stream(mine).values())
                if body < 500:
                    raise Failure(f"the index page's DATA in the net log is {body} bytes")
            elif netlog.quic_sessions(demo_port):
                raise Failure(f"Chromium used QUIC with --disable-quic ({protocol})")
            print(f"ok: demo index page over {protocol} says {says}")
        if not any(re.search(r'"GET / HTTP/3" 200 ', l) for l in demo.access_lines()):
            raise Failure("the demo server's access log has no HTTP/3 request for /")
        # By name: Chromium sends QUIC for localhost to ::1 alone, which the server's default
        # listen addresses (loopback on both families) include.
        if not ipv6_loopback():
            print("note: no IPv6 loopback here; https://localhost/ over h3 not checked")
        else:
            check_localhost(browser, work, demo_port)

        # 100 images on one page.
        browser = Browser(chromium, work, spki, site_port)
        load_ms = {}
        for protocol in ("h3", "h2", "http/1.1"):
            netlog_path = os.path.join(work, f"many-{protocol.replace('/', '')}.netlog.json")
            dom = browser.dump_dom(protocol, "/many.html", netlog_path)
            m = re.search(r'<p id="result">(.*?)</p>', dom)
            if not m or m.group(1) == "pending":
                raise Failure(f"many.html over {protocol} did not finish:\n{dom[:400]}")
            result = json.loads(m.group(1).replace("&quot;", '"'))
            if result["loaded"] != IMAGES or result["images"] != IMAGES:
                raise Failure(f"many.html over {protocol}: {result}")
            if result["page"] != protocol or result["protocols"] != {protocol: IMAGES}:
                raise Failure(f"many.html over {protocol} used other protocols: {result}")
            load_ms[protocol] = result["ms"]
            if protocol == "h3":
                mine = check_h3_netlog(NetLog(netlog_path), site_port, IMAGES + 1)
                streams = {(e["source"], e["params"]["stream_id"]) for e in mine
                           if e["type"] == "HTTP3_HEADERS_DECODED"}
                if len(streams) < IMAGES + 1:
                    raise Failure(f"want {IMAGES + 1} request streams on the QUIC sessions, the "
                                  f"net log has {len(streams)}")
                # How many were open at once depends on Chromium's pace: printed, not asserted.
                print(f"ok: many.html over h3: {IMAGES} images, {len(streams)} request streams, "
                      f"up to {max_open_requests(mine)} open at once in this run")
            else:
                print(f"ok: many.html over {protocol}: {IMAGES} images")

        # 10 MiB, hashed by the page.
        download_ms = {}
        for protocol in ("h3", "h2", "http/1.1"):
            netlog_path = os.path.join(work, f"download-{protocol.replace('/', '')}.netlog.json")
            before = len(site.access_lines())
            report = browser.until_report(protocol, "/download.html", netlog_path, site)
            want = (f"status-200-bytes-{DOWNLOAD_BYTES}-sha256-{want_sha}-protocol-"
                    f"{protocol}-ms-")
            if not report.startswith(want):
                raise Failure(f"download over {protocol}: the page reported {report}, want "
                              f"{want}<ms>")
            download_ms[protocol] = int(report[len(want):])
            if protocol == "h3":
                netlog = NetLog(netlog_path)
                mine = check_h3_netlog(netlog, site_port, 2)
                largest = max(data_bytes_by_stream(mine).values())
                # A log cut short holds the DATA frames up to its end: at most the whole (the
                # page's SHA-256 above has shown every byte arrived).
                if largest != DOWNLOAD_BYTES and (netlog.finished or largest > DOWNLOAD_BYTES):
                    raise Failure(f"the net log's DATA frames for the download add up to "
                                  f"{largest} bytes, want {DOWNLOAD_BYTES}")
                if not netlog.finished:
                    print(f"note: the download's net log was left unfinished; its DATA frames "
                          f"add up to {largest} of {DOWNLOAD_BYTES} bytes")
            got = [l for l in site.access_lines()[before:] if '"GET /big.bin ' in l]
            if len(got) != 1:
                raise Failure(f"want one GET /big.bin in the access log, got {got}")
            print(f"ok: 10 MiB over {protocol}, SHA-256 as sent")

        print("for comparison (ms, one run, not asserted): "
              + "; ".join(f"{p}: page of {IMAGES} images {load_ms[p]}, 10 MiB {download_ms[p]}"
                          for p in ("h3", "h2", "http/1.1")))
        for server in servers:
            server.stop()
        servers.clear()
        return 0
    except Failure as e:
        print(f"FAIL: {e}")
        for server in servers:
            print(f"--- {server.log_path}:\n{server.tail()}")
        return 1
    finally:
        for server in servers:
            if server.proc.poll() is None:
                server.proc.kill()
        if os.environ.get("PETREL_KEEP_WORK"):
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
