"""A method joins its worker thread before setting the Event the worker waits for to start.

Scenario: Exporter.export (a sync actor) starts an `upload` thread that first waits for
`self.go` ("the manifest is written") and then uploads. The method writes the manifest, and a
refactor moved `self.go.set()` after `t.join()` ("signal the end once the upload is done"): the
main thread waits in Thread.join for a thread that waits in Event.wait for the joiner.
Mechanism: a thread joined that waits on the joiner: a two-thread cycle, join -> event, inside one
process; nothing else runs job code.
Truth: hang; culprit Exporter, the joining thread's `t.join()` (line before `self.go.set()`);
the upload thread is the victim. Fix: set the event before joining (join with a timeout).
Driver in ray.get(export).
"""
import os
import threading

import ray


@ray.remote(num_cpus=0.1)
class Exporter:
    def __init__(self):
        self.go = threading.Event()
        self.sent = 0

    def _upload(self, rows):
        self.go.wait()
        for _ in rows:
            self.sent += 1

    def export(self, n):
        rows = list(range(n))
        t = threading.Thread(target=self._upload, args=(rows,), name="upload")
        t.start()
        manifest = {"rows": n}
        t.join()
        self.go.set()
        return manifest, self.sent


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ex = Exporter.remote()
    ref = ex.export.remote(1000)
    print("READY: driver -> Exporter.export (joins upload before setting go)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
