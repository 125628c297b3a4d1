"""Healthy: a gloo rank waits in a barrier while its peer sleep-polls for a checkpoint that an export task is still computing.

Scenario: two training ranks (Ray actors, gloo on CPU) must resume from the same checkpoint. Rank 1
has nothing to load and enters `dist.barrier()` at once. Rank 0 waits for `<root>/ckpt/DONE`,
written by a separate `export_checkpoint` task (a silent numpy loop, ~7 minutes, that then writes
the file): it checks `os.path.exists` and sleeps 30 s between checks (a polite poll). For minutes:
rank 1 in gloo's barrier (idle, C++), rank 0 in `time.sleep(30)` with nothing changing between two
samples, the export task busy on CPU; no log line.
Mechanism (none: healthy): a collective whose missing rank polls, with long pauses, for a file that
another live task is computing and will write (poll → busy producer).
Truth: no hang. A right diagnosis is no-hang or inconclusive; collective-wait /
poll-never-satisfied / a hang naming either rank is a false hang.
"""
# redteam-settle: 25
import datetime
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.5)
def export_checkpoint(root: str, seconds: float) -> int:
    import numpy as np

    rng = np.random.default_rng(3)
    w = rng.standard_normal((300, 300))
    end = time.time() + seconds
    step = 0
    while time.time() < end:
        w = np.tanh(w @ w.T / 300.0) + 0.01 * rng.standard_normal((300, 300))
        step += 1
    os.makedirs(os.path.join(root, "ckpt"), exist_ok=True)
    np.save(os.path.join(root, "ckpt", "w.npy"), w)
    with open(os.path.join(root, "ckpt", "DONE"), "w") as f:
        f.write(str(step))
    return step


@ray.remote(num_cpus=0.1)
class TrainRank:
    def __init__(self, rank: int, world: int, root: str):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        store = dist.FileStore(os.path.join(root, "store"), world)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=1))
        self.rank, self.root = rank, root

    def resume(self) -> int:
        import torch.distributed as dist

        checks = 0
        if self.rank == 0:
            done = os.path.join(self.root, "ckpt", "DONE")
            while not os.path.exists(done):
                checks += 1
                time.sleep(30)
        dist.barrier()
        return checks


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    root = tempfile.mkdtemp(prefix="resume_")
    exporter = export_checkpoint.remote(root, 420.0)
    ranks = [TrainRank.remote(r, 2, root) for r in range(2)]
    refs = [r.resume.remote() for r in ranks]
    print("READY resuming", flush=True)
    print(ray.get(refs + [exporter]))


if __name__ == "__main__":
    main()
