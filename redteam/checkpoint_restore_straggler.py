"""Healthy: rank 0 waits in a gloo barrier while rank 1 restores its shard from a throttled store (read, sleep, read…).

Scenario: after a restart each rank restores its optimizer shard, then `dist.barrier()`. Rank
0's shard is cached locally (instant); rank 1 streams its 300 MB shard from a throttled object
store: it reads 1 MB chunks and sleeps 0.5 s between them (the store's client-side rate limit),
about 2.5 min in all, silently, then joins the barrier. Any dump shows rank 0 in `barrier` and rank
1 in `time.sleep` inside its restore loop (the chunk counter and bytes read advance).

Mechanism (none: healthy): a collective waiting for a straggler that is paced by I/O, not
blocked and not busy on CPU.
Truth: no hang. A right diagnosis says no-hang or inconclusive; collective-skipped /
collective-mismatch / throttled-sleep as a hang is a false hang.
"""
# redteam-settle: 25
import datetime
import os
import tempfile
import time

import ray

CHUNK = 1 << 20


@ray.remote(num_cpus=0.5)
class Rank:
    def __init__(self, rank: int, world: int, path: str):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=1))
        self.rank = rank

    def ready(self) -> int:
        return self.rank

    def _restore(self, shard_path: str, chunks: int) -> int:
        got = 0
        with open(shard_path, "rb") as f:
            for _ in range(chunks):
                f.seek(0)
                got += len(f.read(CHUNK))
                time.sleep(0.5)
        return got

    def restore(self, shard_path: str, chunks: int) -> int:
        import torch.distributed as dist

        got = self._restore(shard_path, chunks) if self.rank == 1 else 0
        dist.barrier()
        return got


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    tmp = tempfile.mkdtemp(prefix="restore_")
    shard = os.path.join(tmp, "optim-shard-1.bin")
    with open(shard, "wb") as f:
        f.write(os.urandom(CHUNK))
    ranks = [Rank.remote(r, 2, os.path.join(tmp, "store")) for r in range(2)]
    ray.get([r.ready.remote() for r in ranks])
    refs = [r.restore.remote(shard, 300) for r in ranks]
    print("READY restoring", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
