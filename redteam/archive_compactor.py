"""Healthy: a driver polls `ray.wait(timeout=10)` in a loop while its tasks sit for minutes in lzma's C compressor.

Scenario: a log-archive compactor. Three `compact` tasks each build ~43 MB of semi-compressible log
text and call `lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)` once (one C call, minutes on this
machine). The driver loops `while pending: done, pending = ray.wait(pending, timeout=10)`; it logs
only when a task finishes (the first after minutes), otherwise polls silently.
Mechanism (none: healthy): a polling loop that makes progress rarely; each task is in one long
native call with no Python frame change.
Truth: no hang. Right: no-hang or inconclusive; a hang on the driver's poll or a task is false.
"""
# redteam-ray-start: --resources='{"rt15c_ac":1}'
# redteam-settle: 25
import lzma
import os
import time

import ray


@ray.remote(num_cpus=1)
def compact(part: int) -> int:
    import random

    rnd = random.Random(part)  # noqa: S311
    words = [f"svc{rnd.randrange(90)} req={rnd.randrange(10**6)} ms={rnd.randrange(900)}" for _ in range(4000)]
    chunks = []
    for i in range(600):
        rnd.shuffle(words)
        chunks.append(("\n".join(words[:3000]) + f"\n# block {i}\n").encode())
    data = b"".join(chunks)
    blob = lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)
    return len(blob)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    pending = [compact.remote(i) for i in range(3)]
    print("READY compacting", flush=True)
    t0 = time.time()
    while pending:
        done, pending = ray.wait(pending, timeout=10)
        for r in done:
            print(f"part compacted to {ray.get(r)} bytes after {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
