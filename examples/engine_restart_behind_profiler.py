"""An inference engine dies and Ray restarts it, but an actor queued meanwhile took its accelerator.

Scenario
    An inference service runs one ``Engine`` actor that takes both of the node's accelerators
    (``resources={"accelerator": 2}``; the custom resource stands in for GPUs) and is made fault
    tolerant the usual way: ``max_restarts=3`` and ``max_task_retries=-1`` so that callers ride
    through a restart. After warm-up the driver also starts a ``KernelProfiler`` actor
    (``{"accelerator": 1}``) "to profile kernels when an accelerator is free"; it is queued,
    since the engine holds both. On its third request the engine's worker exits (its memory
    watchdog: RSS above the limit).

Mechanism
    Ray restarts the engine, which asks for both accelerators again. The profiler's creation
    was queued before the restart: it is placed first on the freed accelerators, profiles once
    and then sits idle, holding one accelerator for good. The restarted engine needs two, one is
    free: it stays ``RESTARTING`` forever, and the driver's retried request waits in ``ray.get``
    (the call is ``PENDING_NODE_ASSIGNMENT``). ``ray status`` shows ``1.0/2.0 accelerator`` and
    a pending ``{'accelerator': 2.0}`` demand; no error, no event. The State API keeps the
    engine's old pid, whose process is gone.

What misleads
    The engine is ``RESTARTING`` with a failed call behind it: a crash loop, or a restart that
    is just slow ("diagnose again in a few seconds"). Wrong: it died once and cannot be placed
    again, because an actor created after its first placement took half of what it needs and
    never gives it back. Nothing about the engine itself is stuck.

Expected diagnosis
    ``idle-actor-holds-resources``: the driver waits in ``ray.get`` for ``Engine.infer``; the
    engine is being restarted and waits for ``{accelerator: 2}``; the culprit is the idle
    ``KernelProfiler`` holding ``{accelerator: 1}``. Fix: do not start side actors on the
    serving accelerators (or give them ``num_gpus``/resources only while they run, and kill
    them when done); reserve the engine's resources in a placement group that survives its
    restarts.
"""

import os
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "idle-actor-holds-resources",
    "culprits": [{"class_name": "KernelProfiler", "rank": None}],
    "notes": "Engine ({accelerator: 2}, max_restarts=3) dies on its 3rd request; the KernelProfiler "
    "({accelerator: 1}) queued before the restart is placed first and idles; the restart needs 2 of the "
    "node's 2 accelerators, 1 is free: RESTARTING forever, the driver's retried infer pending.",
}

RSS_LIMIT_REQUESTS = 3  # the watchdog's stand-in: the worker exits on this request


@ray.remote(resources={"accelerator": 2}, num_cpus=0, max_restarts=3, max_task_retries=-1)
class Engine:
    def __init__(self) -> None:
        self.served = 0

    def infer(self, batch: list) -> list:
        self.served += 1
        if self.served >= RSS_LIMIT_REQUESTS:
            print(f"[engine] RSS above limit after {self.served} requests: exiting", flush=True)
            os._exit(1)
        return [x * 2 for x in batch]


@ray.remote(resources={"accelerator": 1}, num_cpus=0)
class KernelProfiler:
    def profile(self) -> dict:
        start = time.perf_counter()
        total = sum(i * i for i in range(200_000))
        print(f"[profiler] kernels profiled in {time.perf_counter() - start:.3f}s", flush=True)
        return {"checksum": total}


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    engine = Engine.remote()
    for i in range(RSS_LIMIT_REQUESTS - 1):
        print(f"request {i}: {ray.get(engine.infer.remote([i, i + 1]))}", flush=True)
    profiler = KernelProfiler.remote()  # queued: the engine holds both accelerators
    report = profiler.profile.remote()  # its report goes to the log
    third = engine.infer.remote([2, 3])  # the engine's watchdog exits on it
    ray.get(report)  # the profiler is placed once the engine's worker is gone, and profiles
    time.sleep(8)  # and then idles, longer than a pause between two calls
    print("READY: the engine's restart waits for an accelerator", flush=True)
    print(f"request 2: {ray.get(third)}", flush=True)


if __name__ == "__main__":
    main()
