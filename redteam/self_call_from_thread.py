"""An actor's warm-up thread calls its own actor handle while the method that started it joins it.

Mechanism: Server (sync, max_concurrency=1) runs start() on its only execution slot: it starts a
"warmup" thread and joins it (wait until warm). The warm-up thread calls
ray.get(self_handle.load_weights.remote()): that call is queued behind start(), which waits in
Thread.join for the warm-up thread. Cycle inside one actor across Ray's call queue. Driver in
ray.get(start).
Truth: culprit Server.start/_warmup (a thread of the actor calling the actor through its handle
while the actor's only slot waits for it); fix: call self.load_weights() directly, or don't join.
"""
import os
import threading

import ray


@ray.remote(num_cpus=0.1)
class Server:
    def __init__(self):
        self.weights = None

    def load_weights(self):
        self.weights = [0.0] * 10
        return True

    def _warmup(self, me):
        ray.get(me.load_weights.remote())

    def start(self, me):
        t = threading.Thread(target=self._warmup, args=(me,), name="warmup")
        t.start()
        t.join()
        return self.weights is not None


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    s = Server.remote()
    print("READY: driver -> Server.start (joins a thread that calls Server.load_weights)", flush=True)
    print(ray.get(s.start.remote(s)))


if __name__ == "__main__":
    main()
