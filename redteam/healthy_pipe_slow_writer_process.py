"""Healthy: a reader waits on an os.pipe() whose writer, a forked child, computes for minutes before each frame.

Scenario: a FrameDecoder actor forks a `render` child (multiprocessing, fork context) that renders
frames with numpy (~4 minutes of matrix products per frame, its `block` counter advancing) and
writes each one length-prefixed into an `os.pipe()`; the actor closes its own copy of the write end
and `next_batch` reads frames with `os.read`. Between frames the reader sleeps in the kernel
reading an empty pipe, its stack static, nothing logged.

Mechanism (none: healthy): a pipe read whose write end a live process holds and that process
computes (the healthy twin of a pipe whose writer thread died).
Truth: no hang. A right diagnosis is no-hang or inconclusive; producer-gone or any hang naming
FrameDecoder or the child is a false hang.
"""
# redteam-settle: 25
import multiprocessing as mp
import os

import numpy as np
import ray


def render(w: int, frames: int, blocks: int) -> None:
    a = np.random.default_rng(0).standard_normal((300, 300))
    for _ in range(frames):
        acc = 0.0
        for block in range(blocks):
            acc += float((a @ a.T)[0, 0]) / (block + 1)
        payload = int(acc).to_bytes(8, "little", signed=True) * 128
        os.write(w, len(payload).to_bytes(4, "little") + payload)
    os.close(w)


@ray.remote(num_cpus=1)
class FrameDecoder:
    def __init__(self, frames: int, blocks: int):
        self._r, w = os.pipe()
        self._child = mp.get_context("fork").Process(target=render, args=(w, frames, blocks), name="render", daemon=True)
        self._child.start()
        os.close(w)  # only the child writes

    def next_batch(self, n: int) -> int:
        got = 0
        for _ in range(n):
            size = int.from_bytes(os.read(self._r, 4), "little")
            got += len(os.read(self._r, size))
        return got


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    dec = FrameDecoder.remote(3, 150_000)
    ref = dec.next_batch.remote(3)
    print("READY decoding", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
