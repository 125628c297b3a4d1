"""Healthy: a reader waits on an os.pipe() that a thread of the same actor fills after minutes of numpy work per frame.

Scenario: as pipe_writer_thread_died, a FrameDecoder actor hands frames from a `decode` thread to
`next_batch` through an `os.pipe()`; here the decoder is healthy but slow: each frame takes minutes of
numpy products (its `block` counter advancing) before it is written. The reader sleeps in the kernel
on the empty pipe, its stack static.

Mechanism (none: healthy): an in-process pipe whose writer thread is alive and computing.
Truth: no hang. A right diagnosis is no-hang or inconclusive; producer-gone or any hang naming
FrameDecoder is a false hang.
"""
# redteam-settle: 25
import os
import threading

import numpy as np
import ray


@ray.remote(num_cpus=1, max_concurrency=2)
class FrameDecoder:
    def __init__(self, frames: int, blocks: int):
        self._r, self._w = os.pipe()
        threading.Thread(target=self._decode, args=(frames, blocks), name="decode", daemon=True).start()

    def _decode(self, frames: int, blocks: int) -> None:
        a = np.random.default_rng(0).standard_normal((300, 300))
        for _ in range(frames):
            acc = 0.0
            for block in range(blocks):
                acc += float((a @ a.T)[0, 0]) / (block + 1)
            payload = int(acc).to_bytes(8, "little", signed=True) * 128
            os.write(self._w, len(payload).to_bytes(4, "little") + payload)

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
