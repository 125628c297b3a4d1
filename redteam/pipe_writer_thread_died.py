"""A reader thread waits on an os.pipe() whose writer thread died; the write end stays open in the same process.

Scenario: a FrameDecoder actor decodes frames in a `decode` thread and hands them to `next_batch`
through an `os.pipe()` (length-prefixed bytes, a common pattern to wake a select loop). The decoder
hits a malformed frame at index 3, raises and ends (the exception goes to the thread's excepthook:
one traceback line in the worker log), but nobody closes the write end (`self._w`): it stays open in
the actor, so the reader's `os.read(self._r, 4)` never gets end-of-file. The driver waits on
`next_batch`.

Mechanism: a read on a pipe whose only write end is held by the reader's own process, where no
thread writes it (the writer thread is gone): nothing can ever write or close it.
Truth: hang; culprit FrameDecoder's decode thread (died without closing `self._w`, line `raise ValueError`);
the reader at `os.read(self._r, 4)` is its victim. Fix: close the write end in a `finally` of the
writer (the reader then sees EOF), or pass the error through the pipe.
"""
import os
import threading

import ray


@ray.remote(num_cpus=1, max_concurrency=2)
class FrameDecoder:
    def __init__(self, frames: int):
        self._r, self._w = os.pipe()
        threading.Thread(target=self._decode, args=(frames,), name="decode", daemon=True).start()

    def _decode(self, frames: int) -> None:
        for i in range(frames):
            if i == 3:
                raise ValueError(f"malformed frame {i}: bad header")
            payload = bytes([i % 256]) * 1024
            os.write(self._w, len(payload).to_bytes(4, "little") + payload)

    def next_batch(self, n: int) -> int:
        got = 0
        for _ in range(n):
            size = int.from_bytes(os.read(self._r, 4), "little")
            got += len(os.read(self._r, size))
        return got


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    dec = FrameDecoder.remote(100)
    ref = dec.next_batch.remote(10)
    print("READY decoding", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
