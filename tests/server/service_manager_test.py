#!/usr/bin/env python3
"""petrel-server under a service manager.

  - sd_notify, as systemd's Type=notify listens for it: a UNIX datagram socket named by
    $NOTIFY_SOCKET (a path, and the abstract namespace with '@') gets READY=1 with MAINPID once
    the server accepts — a request made right then is answered — and STOPPING=1 on SIGTERM;
  - --user: as root, ports 80 and 443 are bound and then every thread of the process runs as
    `nobody` (uid and gid in /proc/PID/task/*/status), serving h1, h2 and h3; a user that does
    not exist, and a --qlog-dir the user cannot write, are refused with a message naming them;
  - docs/petrel-server.service passes `systemd-analyze verify` without a warning.

The --user part needs root and a private network namespace (`unshare -n`, for ports 80/443);
without them it is skipped with a note, and the rest still runs.

Usage: service_manager_test.py PETREL-SERVER
"""
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
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
GTLSCLIENT = "/usr/bin/gtlsclient"


class Failure(Exception):
    pass


def free_ports(count):
    out = subprocess.run([sys.executable, os.path.join(REPO, "tests", "support", "server_ports.py"),
                          str(count)], check=True, capture_output=True, text=True, timeout=60)
    return [int(p) for p in out.stdout.split()]


def curl(url, *flags):
    r = subprocess.run(["curl", "-sS", "-k", "--max-time", "20", *flags, url],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise Failure(f"curl {' '.join(flags)} {url}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def h3_hello(work, port):
    if not os.access(GTLSCLIENT, os.X_OK):
        return
    out = os.path.join(work, f"h3-{port}")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    r = subprocess.run([GTLSCLIENT, "-q", "--exit-on-all-streams-close", "--download", out,
                        "127.0.0.1", str(port), f"https://localhost:{port}/hello"],
                       capture_output=True, text=True, timeout=60)
    body = open(os.path.join(out, "hello")).read() if r.returncode == 0 else ""
    if "hello from petrel" not in body:
        raise Failure(f"h3 /hello on {port}: exit {r.returncode}, body {body!r}")


class Notifications:
    """A UNIX datagram socket standing in for the service manager's."""

    def __init__(self, work, abstract):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"petrel-notify-{os.getpid()}-{time.monotonic_ns()}"
            self.sock.bind("\0" + name)
            self.env_value = "@" + name
        else:
            path = os.path.join(work, f"notify-{time.monotonic_ns()}.sock")
            self.sock.bind(path)
            os.chmod(path, 0o777)  # as systemd's: a server that dropped root still sends
            self.env_value = path

    def next(self, timeout=30):
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096)
        except socket.timeout:
            raise Failure(f"no notification within {timeout} s")
        return dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)

    def close(self):
        self.sock.close()


def start(binary, work, args, env=None):
    log = open(os.path.join(work, "server.log"), "w")
    return subprocess.Popen([binary, *args], stdout=log, stderr=subprocess.STDOUT,
                            env=env or os.environ.copy())


def log_tail(work):
    with open(os.path.join(work, "server.log")) as f:
        return "".join(f.readlines()[-15:])


def stop(proc, work):
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise Failure("petrel-server did not stop on SIGTERM")
    if rc != 0:
        raise Failure(f"petrel-server exited {rc}:\n{log_tail(work)}")


def check_notify(binary, work, abstract):
    https, http = free_ports(2)
    notify = Notifications(work, abstract)
    env = os.environ.copy()
    env["NOTIFY_SOCKET"] = notify.env_value
    proc = start(binary, work, ["--https-port", str(https), "--http-port", str(http),
                                "--workers", "1"], env)
    try:
        ready = notify.next()
        if ready.get("READY") != "1" or ready.get("MAINPID") != str(proc.pid):
            raise Failure(f"first notification: {ready}, want READY=1 and MAINPID={proc.pid}")
        if "listening on" not in ready.get("STATUS", ""):
            raise Failure(f"READY's STATUS: {ready.get('STATUS')!r}")
        # READY=1 means accepting: no retry, no wait.
        if "hello from petrel" not in curl(f"http://127.0.0.1:{http}/hello"):
            raise Failure("no answer right after READY=1")
        proc.send_signal(signal.SIGTERM)
        stopping = notify.next()
        if stopping.get("STOPPING") != "1":
            raise Failure(f"after SIGTERM: {stopping}, want STOPPING=1")
        if proc.wait(timeout=30) != 0:
            raise Failure(f"exit status {proc.returncode}:\n{log_tail(work)}")
    finally:
        if proc.poll() is None:
            proc.kill()
        notify.close()
    print(f"ok: sd_notify READY=1 and STOPPING=1 ({'abstract' if abstract else 'path'} socket)")


def refused(binary, args, want):
    r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)
    if r.returncode == 0 or want not in r.stdout + r.stderr:
        raise Failure(f"petrel-server {' '.join(args)}: exit {r.returncode}, output "
                      f"{(r.stdout + r.stderr).strip()!r}, want {want!r}")


def thread_ids(pid):
    """{(uid line, gid line)} over every thread of the process."""
    seen = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/status") as f:
            status = f.read()
        uid = re.search(r"^Uid:\s+(.*)$", status, re.M).group(1).split()
        gid = re.search(r"^Gid:\s+(.*)$", status, re.M).group(1).split()
        seen.add((tuple(uid), tuple(gid)))
    return seen


def check_user(binary, work):
    import pwd
    nobody = pwd.getpwnam("nobody")
    notify = Notifications(work, abstract=False)
    env = os.environ.copy()
    env["NOTIFY_SOCKET"] = notify.env_value
    env["PETREL_STATE_DIR"] = os.path.join(work, "state")
    proc = start(binary, work, ["--https-port", "443", "--http-port", "80", "--workers", "2",
                                "--listen", "127.0.0.1", "--user", "nobody"], env)
    try:
        try:
            ready = notify.next()
        except Failure as e:
            raise Failure(f"--user nobody: {e}:\n{log_tail(work)}")
        if ready.get("READY") != "1":
            raise Failure(f"--user nobody: {ready}:\n{log_tail(work)}")
        ids = thread_ids(proc.pid)
        want = ((str(nobody.pw_uid),) * 4, (str(nobody.pw_gid),) * 4)
        if ids != {want}:
            raise Failure(f"threads run as {ids}, want every one as {want}")
        if "hello from petrel" not in curl("http://127.0.0.1:80/hello", "--http1.1"):
            raise Failure("h1 on port 80")
        if "hello from petrel" not in curl("https://127.0.0.1:443/hello", "--http2"):
            raise Failure("h2 on port 443")
        h3_hello(work, 443)
        stop(proc, work)
    finally:
        if proc.poll() is None:
            proc.kill()
        notify.close()
    print("ok: --user nobody: ports 80 and 443 bound as root, every thread as nobody")
    qlog = os.path.join(work, "qlog-root-only")
    os.makedirs(qlog, mode=0o755)
    ports = free_ports(2)
    refused(binary, ["--https-port", str(ports[0]), "--http-port", str(ports[1]), "--listen",
                     "127.0.0.1", "--user", "nobody", "--qlog-dir", qlog],
            f"--qlog-dir {qlog} is not writable by nobody")
    print("ok: --user with a --qlog-dir the user cannot write is refused")


def check_unit():
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        print("note: no systemd-analyze here; the unit file is not verified")
        return
    with open(os.path.join(REPO, "docs", "petrel-server.service")) as f:
        unit = f.read()
    with tempfile.TemporaryDirectory() as d:
        # verify wants the ExecStart binary to exist.
        path = os.path.join(d, "petrel-server.service")
        with open(path, "w") as f:
            f.write(unit.replace("/usr/local/bin/petrel-server", os.path.abspath(sys.argv[1])))
        r = subprocess.run([analyze, "verify", path], capture_output=True, text=True, timeout=60)
    output = (r.stdout + r.stderr).strip()
    if r.returncode != 0 or output:
        raise Failure(f"systemd-analyze verify: exit {r.returncode}: {output}")
    print("ok: docs/petrel-server.service verifies")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    in_netns = os.environ.get("PETREL_SERVICE_NETNS") == "1"
    if not in_netns and os.geteuid() == 0 and shutil.which("unshare"):
        # Ports 80 and 443 for --user: in a network namespace of our own, as real root.
        probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            os.environ["PETREL_SERVICE_NETNS"] = "1"
            os.execvp("unshare", ["unshare", "-n", "sh", "-c",
                                  'ip link set lo up && exec "$0" "$@"', sys.executable,
                                  os.path.abspath(__file__), binary])
    work = tempfile.mkdtemp(prefix="petrel-service-")
    os.chmod(work, 0o755)
    os.environ.setdefault("PETREL_STATE_DIR", os.path.join(work, "state"))
    try:
        check_notify(binary, work, abstract=False)
        check_notify(binary, work, abstract=True)
        refused(binary, ["--user", "no-such-user-petrel"], "--user: no such user")
        print("ok: --user with no such user is refused")
        if in_netns:
            check_user(binary, work)
        else:
            print("note: --user on ports 80/443 needs root and `unshare -n`; skipped")
        check_unit()
        return 0
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
