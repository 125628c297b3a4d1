"""Healthy: rank 0 waits in all_reduce while rank 1 downloads its shard from a throttled HTTP store.

Scenario: an object-store stand-in (a ShardStore actor running `http.server.ThreadingHTTPServer`)
is rate-limited: its handler sends 32 KiB then sleeps 0.5 s (~64 KiB/s) for a 12 MiB shard. Two
gloo ranks (Ray actors) each fetch their shard before the first step; rank 0's shard is tiny and
it enters `dist.all_reduce` at once; rank 1 is in `urllib.request.urlopen(...).read()` (socket
recv) for ~3 minutes. Any dump: rank 0 in gloo (idle, C++), rank 1 in recv, the store's handler
thread in `time.sleep(0.5)`; no log line. Bytes flow twice a second.

Mechanism (none: healthy): a collective whose missing rank is in slow I/O that progresses (a
throttled download from a live server), two hops: all_reduce → recv → throttled sender.
Truth: no hang. A right answer is no-hang or inconclusive naming rank 1's download; hang
(collective-wait on rank 0, io-wait on rank 1, or the store as culprit) is a false hang.
"""
# redteam-settle: 25
import datetime
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.1)
class ShardStore:
    def start(self):
        import http.server
        import threading

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                size = 4096 if self.path.endswith("/0") else 12 << 20
                self.send_response(200)
                self.send_header("Content-Length", str(size))
                self.end_headers()
                sent = 0
                while sent < size:
                    n = min(32 << 10, size - sent)
                    self.wfile.write(b"\x01" * n)
                    sent += n
                    time.sleep(0.5)

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        return self.srv.server_address[1]


@ray.remote(num_cpus=0.5)
class Rank:
    def __init__(self, rank, path):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(hours=1))
        self.rank = rank

    def train(self, port):
        import urllib.request

        import torch
        import torch.distributed as dist

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/shard/{self.rank}", timeout=600) as resp:
            data = resp.read()
        t = torch.tensor([float(len(data))])
        dist.all_reduce(t)
        return float(t)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = ShardStore.remote()
    port = ray.get(store.start.remote())
    path = os.path.join(tempfile.mkdtemp(prefix="rt12_dl_"), "store")
    ranks = [Rank.remote(r, path) for r in range(2)]
    ray.get([r.__ray_ready__.remote() for r in ranks])
    refs = [r.train.remote(port) for r in ranks]
    print("READY: driver -> Rank.train x2 (rank 1 downloads 12 MiB at ~64 KiB/s)", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
