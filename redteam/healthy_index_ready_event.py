"""Healthy: a query waits on an Event that the actor's index-building thread sets after minutes of pure-Python work.

Scenario: a RetrievalIndex actor builds an inverted index of a synthetic corpus in a background
thread started by its constructor (tokenize, count document frequencies: pure Python, 4-5 minutes
here, no logs) and sets `self.ready` (a threading.Event) when done. The driver immediately calls
`search()`, which waits on `self.ready` and then answers. The builder's loop counters
(`doc_id`, `self.n_tokens`) advance the whole time.

Mechanism (none: healthy): an Event whose only setter is a busy thread that is making progress
and will finish (the healthy twin of an Event set after a loop that never ends).
Truth: no hang. A right diagnosis is no-hang or inconclusive; busy-loop / event-never-set / a
hang naming RetrievalIndex is a false hang.
"""
# redteam-settle: 25
import os
import threading

import ray


@ray.remote(num_cpus=1, max_concurrency=2)
class RetrievalIndex:
    def __init__(self, n_docs: int):
        self.ready = threading.Event()
        self.df: dict[str, int] = {}
        self.n_tokens = 0
        threading.Thread(target=self._build, args=(n_docs,), name="index-builder", daemon=True).start()

    def _build(self, n_docs: int) -> None:
        for doc_id in range(n_docs):
            words = [f"w{(doc_id * 31 + k * 17) % 5003}" for k in range(60)]
            self.n_tokens += len(words)
            for w in set(words):
                self.df[w] = self.df.get(w, 0) + 1
        self.ready.set()

    def search(self, term: str) -> int:
        self.ready.wait()
        return self.df.get(term, 0)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    index = RetrievalIndex.remote(4_000_000)
    ref = index.search.remote("w42")
    print("READY index building", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
