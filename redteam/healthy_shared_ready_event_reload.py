"""Healthy: a threaded actor's calls wait on one shared Event that a still-running reload sets later.

Scenario: PolicyServer (max_concurrency=4) keeps its "weights ready" flag in one instance attribute
`self.ready = threading.Event()`. `load_weights(version)` clears it, loads (a slow "download"
in chunks, ~7 min for version 2) and sets it. The driver loads version 1 (FINISHED, the Event set),
serves two act() calls, then starts load_weights(2) - which clears the Event - and sends two more
act() calls: they wait on the same Event, set again once version 2 is loaded.
Mechanism: two executor threads in `Event.wait()` (no timeout) at act's `self.ready.wait()`; a
load_weights call that sets `self.ready` FINISHED (before these waits began), another is RUNNING on a
third executor thread (in `time.sleep` of its download loop) and will set the very Event they wait on.
Driver in ray.get of the act calls.
Truth: healthy (no culprit): the act calls return ~7 min after the reload began. A hang verdict is wrong.
"""
# redteam-settle: 25
import os
import threading
import time

import ray


@ray.remote(num_cpus=0.5, max_concurrency=4)
class PolicyServer:
    def __init__(self):
        self.ready = threading.Event()
        self.weights = None

    def load_weights(self, version, chunks):
        self.ready.clear()
        for i in range(chunks):
            time.sleep(1.0)  # one chunk of the "download"
            if i % 30 == 0:
                print(f"v{version}: chunk {i}/{chunks}", flush=True)
        self.weights = [0.1 * version] * 16
        self.ready.set()
        print(f"weights v{version} loaded on", threading.current_thread().name, flush=True)
        return version

    def act(self, obs):
        self.ready.wait()
        return sum(w * obs for w in self.weights)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    srv = PolicyServer.remote()
    print("loaded", ray.get(srv.load_weights.remote(1, 1)), flush=True)
    print("actions v1", ray.get([srv.act.remote(float(i)) for i in range(2)]), flush=True)
    reload = srv.load_weights.remote(2, 420)
    time.sleep(2.0)
    acts = [srv.act.remote(float(i)) for i in range(2)]
    print("READY: driver -> PolicyServer.act (waits on the shared Event the running reload sets)", flush=True)
    print("actions v2", ray.get(acts), "reload", ray.get(reload), flush=True)


if __name__ == "__main__":
    main()
