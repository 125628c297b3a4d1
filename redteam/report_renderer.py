"""A ThreadPoolExecutor whose initializer waits on an Event the submitter sets only after collecting results.

Scenario: ReportRenderer.render() builds a `ThreadPoolExecutor(max_workers=2,
initializer=self._wait_fonts)`: each worker thread first waits for `self.fonts_ready` (a
threading.Event, "the font cache must be loaded before any page renders"). render() submits the
pages, collects `[f.result() for f in futs]`, and only after that calls `self._load_fonts()`,
which sets the event. Both worker threads sit in the initializer's `Event.wait()`, no page task
ever starts, and the caller waits on a Future that will never be set.
Mechanism: set-order deadlock inside one process through an executor's initializer (the pool's
threads block before taking work; the setter runs after the wait).
Truth: hang; culprit ReportRenderer, `render`'s `[f.result() for f in futs]` (line 43) before
`self._load_fonts()` (line 44); fix: load the fonts (set the event) before submitting/collecting,
or do not block in an initializer.
Driver in ray.get(render).
"""
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import ray


@ray.remote(num_cpus=0.1)
class ReportRenderer:
    def __init__(self):
        self.fonts_ready = threading.Event()
        self.fonts = {}

    def _wait_fonts(self):
        self.fonts_ready.wait()

    def _load_fonts(self):
        self.fonts = {"serif": 1, "mono": 2}
        self.fonts_ready.set()

    def _page(self, i):
        return f"page {i} in {sorted(self.fonts)}"

    def render(self, n):
        pool = ThreadPoolExecutor(max_workers=2, initializer=self._wait_fonts)
        futs = [pool.submit(self._page, i) for i in range(n)]
        pages = [f.result() for f in futs]
        self._load_fonts()
        return len(pages)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    r = ReportRenderer.remote()
    ref = r.render.remote(6)
    time.sleep(2)
    print("READY: driver -> ReportRenderer.render (pool threads wait in initializer)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
