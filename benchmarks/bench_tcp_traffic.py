"""What the node probe's socket-traffic readings (socket_peers.reading_sockets, loop_sockets:
the kernel's tcp_info by sock_diag) add per node.

Opens `--sockets` idle loopback TCP connections in this process (a busy node's many connections:
the sock_diag dump walks them all), blocks one thread in `recv` on one of them and registers another
in an epoll, then times the two readings. Prints the median of `--repeat` runs, in milliseconds.

    python benchmarks/bench_tcp_traffic.py [--sockets 2000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import select
import socket
import statistics
import threading
import time

from debug_hang.probe.socket_peers import loop_sockets, reading_sockets


def _timed(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - start) * 1000)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sockets", type=int, default=2000, help="idle loopback connections to open (default 2000)")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 3 * args.sockets + 64)), hard))
    srv = socket.create_server(("127.0.0.1", 0), backlog=args.sockets + 8)
    pairs = []
    for _ in range(args.sockets):
        client = socket.create_connection(srv.getsockname())
        pairs.append((client, srv.accept()[0]))
    client, server = pairs[0]
    reader = threading.Thread(target=client.recv, args=(10,), daemon=True)
    reader.start()
    time.sleep(0.2)
    proc = {"pid": os.getpid(), "threads": [{"os_thread_id": reader.native_id,
                                             "frames": [{"function": "fetch", "code": "data = sock.recv(10)"}]}]}
    ep = select.epoll()
    ep.register(pairs[1][0].fileno(), select.EPOLLIN)
    nr = {"x86_64": "232", "aarch64": "22"}.get(platform.machine(), "232")
    calls = {os.getpid(): {"1": [nr, hex(ep.fileno()), "0x0", "0x1", "0xffffffff"]}}
    assert reading_sockets([proc]) and loop_sockets(calls, platform.machine())
    print(f"{2 * args.sockets} TCP sockets on the node (loopback, both ends)")
    print(f"reading_sockets (one thread in recv): {_timed(lambda: reading_sockets([proc]), args.repeat):.1f} ms")
    print(f"loop_sockets (one loop in epoll_wait): {_timed(lambda: loop_sockets(calls, platform.machine()), args.repeat):.1f} ms")
    server.sendall(b"x")


if __name__ == "__main__":
    main()
