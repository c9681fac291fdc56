#!/usr/bin/env python3
"""Prints N ports (default 1) for servers that shell tests start, one line, space-separated.

Each is below the kernel's ephemeral range (so no client's connect() or bind(0) elsewhere on
the machine can hold it) and free on 127.0.0.1 for both TCP and UDP right now; the same rule as
tests/support/server_port.h.
"""
import random
import socket
import sys


def free(kind, port):
    s = socket.socket(socket.AF_INET, kind)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    high = ephemeral_low - 1
    low = high - 10000 if high > 12000 else 1024
    picked = []
    for _ in range(1000):
        if len(picked) == count:
            break
        port = random.randint(low, high)
        if port in picked:
            continue
        if free(socket.SOCK_DGRAM, port) and free(socket.SOCK_STREAM, port):
            picked.append(port)
    if len(picked) < count:
        sys.exit("server_ports.py: no free ports found")
    print(*picked)


if __name__ == "__main__":
    main()
