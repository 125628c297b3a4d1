"""Healthy: rank 1 waits in a gloo barrier while rank 0 writes a sharded checkpoint of many fsync'd files.

Scenario: at the end of an epoch rank 0 saves a "distributed checkpoint" as 60,000 small shard
files (`torch.save` of a 1 KiB tensor each, `f.flush(); os.fsync(f.fileno())`, then an atomic
`os.replace`), plus a zlib-compressed index every 100 files; rank 1 has nothing to save and waits
in `dist.barrier()`. The writer's Python line changes constantly but the call (`save_checkpoint`)
lasts minutes with no log line; rank 1 is idle in C++ for as long. The driver waits in ray.get.

Mechanism (none: healthy): a collective whose missing rank does bounded, progressing file I/O
(write + fsync + rename, the directory grows).
Truth: no hang. A right answer is no-hang or inconclusive naming rank 0's writes; a hang
(collective-wait / rank 1 stuck) is a false hang.
"""
# redteam-settle: 25
import datetime
import os
import tempfile
import zlib

import ray


@ray.remote(num_cpus=0.5)
class Rank:
    def __init__(self, rank, path):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(hours=1))
        self.rank = rank

    def save_checkpoint(self, root, n_files):
        import torch
        import torch.distributed as dist

        if self.rank == 0:
            os.makedirs(root, exist_ok=True)
            index = []
            for i in range(n_files):
                t = torch.randn(256)
                tmp = os.path.join(root, f".shard_{i:05d}.pt.tmp")
                with open(tmp, "wb") as f:
                    torch.save(t, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, os.path.join(root, f"shard_{i:05d}.pt"))
                index.append((i, float(t.sum())))
                if i % 100 == 99:
                    blob = zlib.compress(repr(index).encode() * 40, 9)
                    with open(os.path.join(root, "index.z"), "wb") as f:
                        f.write(blob)
                        os.fsync(f.fileno())
        dist.barrier()
        return self.rank


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    base = tempfile.mkdtemp(prefix="rt12_ckpt_")
    ranks = [Rank.remote(r, os.path.join(base, "store")) for r in range(2)]
    ray.get([r.__ray_ready__.remote() for r in ranks])
    refs = [r.save_checkpoint.remote(os.path.join(base, "ckpt"), 60000) for r in ranks]
    print("READY: driver -> Rank.save_checkpoint x2 (rank 0 writes 60000 fsync'd files)", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
