"""Healthy: an async actor awaits an asyncio subprocess (create_subprocess_exec) that computes for minutes.

Scenario: an async evaluation service runs each scoring job in a separate interpreter (isolation
from the model's native libraries) via `asyncio.create_subprocess_exec(...)` and
`await proc.communicate()`. The scorer child runs ~5 minutes of pure-Python dynamic programming
(edit distances over a corpus) and prints one JSON line at the end. Meanwhile the actor's event
loop is idle in select, the awaiting coroutine is suspended, nothing logs and no task finishes;
the driver waits in ray.get.

Mechanism: an asyncio wait on a child process's pipes (the loop's child watcher / pidfd) while that
child is alive and busy (100 % CPU, its Python stack advancing).
Truth: healthy (no hang); the score returns after ~5 min. A right answer is no-hang, or
inconclusive naming the child's computation; "hang" is a false hang.
"""
import asyncio
import os
import sys
import time

import ray

SCORER = r"""
import json, random, time
random.seed(7)
words = ["".join(random.choice("acgt") for _ in range(60)) for _ in range(400)]
def dist(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]
t0 = time.monotonic(); total = 0; pairs = 0
while time.monotonic() - t0 < 300:
    a, b = random.choice(words), random.choice(words)
    total += dist(a, b); pairs += 1
print(json.dumps({"pairs": pairs, "mean": total / pairs}))
"""


@ray.remote(num_cpus=0.5)
class EvalService:
    async def score(self, name):
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", SCORER,
                                                    stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        return name, out.decode().strip()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    svc = EvalService.remote()
    ref = svc.score.remote("run-42")
    time.sleep(8)
    print("READY: EvalService.score awaits an asyncio subprocess computing ~5 min", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
