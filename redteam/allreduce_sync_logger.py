"""One gloo rank logs synchronously to a metrics actor whose only slot runs an endless flush loop; the other waits in all_reduce.

Scenario: data-parallel training on two gloo ranks. A MetricsLogger actor (a plain sync actor,
max_concurrency 1) is started by the driver, which then calls `logger.flush_forever.remote()`
("flush to the tracking server every 2 s in the background") — a method that never returns and
logs a heartbeat line every few seconds. Rank 1 is the logging rank: before each step's gradient
all_reduce it does `ray.get(logger.log.remote(step, loss))`. That call is queued behind
flush_forever and never runs. Rank 0 waits in `all_reduce` for rank 1, rank 1 waits in `ray.get`
for the logger, the logger is alive and "working" (sleep + a tiny write every 2 s).

Mechanism: a collective stuck on one rank that is outside the collective: it waits on an actor
call queued behind a never-returning call of that actor (its only concurrency slot).
Truth: culprit the MetricsLogger (flush_forever holds its only slot); rank 1 waits on it, rank 0
waits on rank 1 (both victims). Fix: run the flush loop in a thread of the actor (or
max_concurrency >= 2 / a concurrency group), or log with .remote() without ray.get.
"""
import datetime
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.1)
class MetricsLogger:
    def __init__(self, path: str):
        self.path = path
        self.rows: list[str] = []

    def flush_forever(self) -> None:
        n = 0
        while True:
            time.sleep(2)
            with open(self.path, "a") as fh:
                fh.writelines(self.rows)
            self.rows.clear()
            n += 1
            if n % 5 == 0:
                print(f"metrics flusher alive, {n} flushes", flush=True)

    def log(self, step: int, loss: float) -> None:
        self.rows.append(f"{step}\t{loss}\n")


@ray.remote(num_cpus=0.5)
class Rank:
    def __init__(self, rank: int, path: str, logger):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(hours=1))
        self.rank, self.logger = rank, logger

    def ready(self) -> int:
        return self.rank

    def train(self, steps: int) -> float:
        import torch
        import torch.distributed as dist

        w = torch.zeros(1024)
        loss = 0.0
        for step in range(steps):
            grad = torch.randn(1024) * 0.01
            loss = float(grad.square().sum())
            if self.rank == 1:
                ray.get(self.logger.log.remote(step, loss))
            dist.all_reduce(grad)
            w -= grad / 2
            print(f"rank {self.rank} step {step} done", flush=True)
        return loss


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    d = tempfile.mkdtemp(prefix="ddp_")
    logger = MetricsLogger.remote(os.path.join(d, "metrics.tsv"))
    logger.flush_forever.remote()
    ranks = [Rank.remote(r, os.path.join(d, "store"), logger) for r in range(2)]
    ray.get([r.ready.remote() for r in ranks])
    refs = [r.train.remote(50) for r in ranks]
    print("READY training", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
