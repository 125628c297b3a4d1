"""A driver gathers shard results with ray.wait(num_returns=len(refs)); one shard waits on a gate the driver opens after the gather.

Scenario: an evaluation driver submits three `score_shard` tasks and collects them with
`ray.wait(refs, num_returns=len(refs))` (no timeout, to report them in completion order). Shards
0 and 1 finish at once. Shard 2 is the "calibration" shard: it first waits for the Gate actor
(`ray.get(gate.wait.remote())`, a threaded actor whose `wait` blocks on a threading.Event) so that
it starts only once the other shards are done; the Gate is opened by `gate.open.remote()`, which
the driver calls only after its ray.wait returns. Nothing else would open it.

Mechanism: a ray.wait for N results where one of the N (transitively) waits on something the
waiting driver does only after the wait returns (a cycle through the driver's own program order).
Truth: culprit the driver (opens the gate after gathering; the gate and shard 2 are victims).
Fix: call `gate.open.remote()` as soon as shards 0 and 1 are done (ray.wait num_returns=2 first),
or have the calibration shard depend on the other shards' refs instead of a gate.
"""
import os
import threading

import ray


@ray.remote(num_cpus=0.1, max_concurrency=4)
class Gate:
    def __init__(self):
        self.opened = threading.Event()

    def wait(self) -> bool:
        self.opened.wait()
        return True

    def open(self) -> None:
        self.opened.set()


@ray.remote(num_cpus=0.5)
def score_shard(shard: int, gate) -> dict:
    if shard == 2:
        ray.get(gate.wait.remote())
    return {"shard": shard, "acc": 0.9 - shard * 0.01}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    gate = Gate.remote()
    refs = [score_shard.remote(i, gate) for i in range(3)]
    ray.get(refs[:2])
    print("READY gathering", flush=True)
    ready, _ = ray.wait(refs, num_returns=len(refs))
    gate.open.remote()
    print(ray.get(ready))


if __name__ == "__main__":
    main()
