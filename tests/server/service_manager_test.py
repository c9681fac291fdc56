#!/usr/bin/env python3
"""petrel-server under a service manager.

  - sd_notify, as systemd's Type=notify listens for it: a UNIX datagram socket named by
    $NOTIFY_SOCKET (a path, and the abstract namespace with '@') gets READY=1 with MAINPID once
    the server accepts — a request made right then is answered — and STOPPING=1 on SIGTERM;
  - --user: as root, ports 80 and 443 are bound and then every thread of the process runs as
    `nobody` (uid and gid in /proc/PID/task/*/status), serving h1, h2 and h3; a user that does
    not exist, and a --qlog-dir the user cannot write, are refused with a message naming them;
  - socket activation (LISTEN_FDS/LISTEN_PID, as systemd's .socket units hand them over): with
    a listening TCP socket per port and a bound UDP socket, held open by this test so that the
    server could not bind those ports itself, it serves h1, h2 and h3 on exactly those sockets
    (their inodes among /proc/PID/fd), two TCP loops sharing each; SIGHUP keeps them; a
    socket for an address the configuration does not serve is refused, naming it;
  - docs/petrel-server.service and .socket pass `systemd-analyze verify` without a warning.

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


def activated(binary, work, sockets, args):
    """petrel-server started the way a service manager starts it: `sockets` as fds 3, 4, ...
    with LISTEN_FDS and LISTEN_PID (the pid of the bash that execs it)."""
    high = []
    for i, sock in enumerate(sockets):  # out of the way of 3.. first, then into place
        os.dup2(sock.fileno(), 50 + i)
        high.append(50 + i)
    moves = " ".join(f"{3 + i}<&{fd} {fd}<&-" for i, fd in enumerate(high))
    script = f'exec {moves}; export LISTEN_PID=$$ LISTEN_FDS={len(sockets)}; exec "$@"'
    log = open(os.path.join(work, "server.log"), "w")
    try:
        return subprocess.Popen(["bash", "-c", script, "bash", binary, *args], stdout=log,
                                stderr=subprocess.STDOUT, pass_fds=high)
    finally:
        for fd in high:
            os.close(fd)


def check_socket_activation(binary, work):
    https, http, other = free_ports(3)
    tcp_tls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp_clear = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sockets = [tcp_tls, tcp_clear, udp]
    try:
        tcp_tls.bind(("127.0.0.1", https))
        tcp_tls.listen(128)
        tcp_clear.bind(("127.0.0.1", http))
        tcp_clear.listen(128)
        udp.bind(("127.0.0.1", https))
        proc = activated(binary, work, sockets,
                         ["--https-port", str(https), "--http-port", str(http), "--workers", "2"])
        try:
            want = f"listening on 127.0.0.1: http {http} (h1, h2c), https {https}"
            deadline = time.monotonic() + 30
            while want not in open(os.path.join(work, "server.log")).read():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise Failure(f"socket activation: no {want!r}:\n{log_tail(work)}")
                time.sleep(0.05)
            inodes = set()
            for fd in os.listdir(f"/proc/{proc.pid}/fd"):
                try:
                    inodes.add(os.readlink(f"/proc/{proc.pid}/fd/{fd}"))
                except OSError:
                    pass
            for sock in sockets:
                inode = f"socket:[{os.fstat(sock.fileno()).st_ino}]"
                if inode not in inodes:
                    raise Failure(f"socket activation: the server does not hold {sock}")
            for _ in range(2):  # the second time after a SIGHUP reload
                if "hello from petrel" not in curl(f"http://127.0.0.1:{http}/hello", "--http1.1"):
                    raise Failure("socket activation: h1")
                if "hello from petrel" not in curl(f"https://127.0.0.1:{https}/hello", "--http2"):
                    raise Failure("socket activation: h2")
                h3_hello(work, https)
                proc.send_signal(signal.SIGHUP)
                deadline = time.monotonic() + 30
                while "SIGHUP, reloaded" not in open(os.path.join(work, "server.log")).read():
                    if time.monotonic() > deadline:
                        raise Failure(f"socket activation: SIGHUP:\n{log_tail(work)}")
                    time.sleep(0.05)
            stop(proc, work)
        finally:
            if proc.poll() is None:
                proc.kill()
        print("ok: socket activation: h1, h2, h3 on the handed-over sockets, kept by SIGHUP")
        # A socket the configuration does not serve: refused, naming it.
        stray = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        stray.bind(("127.0.0.1", other))
        stray.listen(16)
        proc = activated(binary, work, [stray],
                         ["--https-port", str(https), "--http-port", str(http),
                          "--listen", "127.0.0.1"])
        stray.close()
        rc = proc.wait(timeout=30)
        want = f"(TCP 127.0.0.1:{other}) is no listen address and port of this configuration"
        if rc == 0 or want not in log_tail(work):
            raise Failure(f"a stray socket: exit {rc}, want {want!r}:\n{log_tail(work)}")
        print("ok: socket activation: a socket for no configured address is refused")
    finally:
        for sock in sockets:
            sock.close()


def check_unit():
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        print("note: no systemd-analyze here; the unit files are not verified")
        return
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name in ("petrel-server.service", "petrel-server.socket"):
            with open(os.path.join(REPO, "docs", name)) as f:
                unit = f.read()
            # verify wants the ExecStart binary to exist.
            paths.append(os.path.join(d, name))
            with open(paths[-1], "w") as f:
                f.write(unit.replace("/usr/local/bin/petrel-server", os.path.abspath(sys.argv[1])))
        r = subprocess.run([analyze, "verify", *paths], capture_output=True, text=True, timeout=60)
    output = (r.stdout + r.stderr).strip()
    if r.returncode != 0 or output:
        raise Failure(f"systemd-analyze verify: exit {r.returncode}: {output}")
    print("ok: docs/petrel-server.service and docs/petrel-server.socket verify")


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
        check_socket_activation(binary, work)
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
