"""A Ray call waits on a threading.Event that the actor's own background thread sets after a loop that never ends.

Scenario
    A ``VocabBuilder`` actor merges token pairs in a background thread started by its
    constructor and sets ``self.done`` (a ``threading.Event``) when the merge loop is finished.
    The driver calls ``vocab()``, which waits on that event and returns the vocabulary.

Mechanism
    The merge loop's exit condition is never met (it stops when no pair occurs more than once,
    but each pass re-adds the merged pair): the thread spins at 100 % CPU and never reaches
    ``self.done.set()``. ``vocab`` waits in ``Event.wait`` on that event; the driver waits in
    ``ray.get`` on ``vocab``. The only thread that works on the same object as the waiter is the
    spinning one.

What misleads
    The waiting method is the one the driver called, and it is idle: it looks like the culprit,
    or like a wait for a call that never came. Nothing is queued on the actor and no other
    process is involved: the setter is a thread of the same actor, and it is busy, not gone.

Expected diagnosis
    ``busy-loop`` in VocabBuilder: the merge thread spins in ``_merge_loop`` (real CPU ~100 %),
    the thread that works on the same object as ``vocab``'s Event.wait; ``vocab`` waits for it.
    Fix the loop's exit condition (or give the wait a timeout that says what it waited for).
"""

import os
import threading

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "busy-loop",
    "culprits": [{"class_name": "VocabBuilder", "rank": None}],
    "notes": "VocabBuilder.vocab waits on self.done (threading.Event); the merge thread that would "
    "set it spins forever in _merge_loop (its exit condition is never met).",
}


@ray.remote(num_cpus=0.25)
class VocabBuilder:
    def __init__(self, corpus: list):
        self.pairs = {}
        for word in corpus:
            for a, b in zip(word, word[1:]):
                self.pairs[a + b] = self.pairs.get(a + b, 0) + 1
        self.merges = 0
        self.done = threading.Event()
        threading.Thread(target=self._merge_loop, name="merger", daemon=True).start()

    def _merge_loop(self) -> None:
        while any(count > 1 for count in self.pairs.values()):
            best = max(self.pairs, key=self.pairs.get)
            self.pairs[best] = self.pairs[best]  # merged, and counted again: never below 2
            self.merges += 1
        self.done.set()

    def vocab(self) -> list:
        self.done.wait()
        return sorted(self.pairs)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    builder = VocabBuilder.remote(["lower", "lowest", "newer", "wider"])
    ray.get(builder.__ray_ready__.remote())  # created: its merge thread runs
    print("READY: waiting for the vocabulary", flush=True)
    print(ray.get(builder.vocab.remote()), flush=True)


if __name__ == "__main__":
    main()
