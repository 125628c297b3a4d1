"""Lost wake-up: a loader thread notifies a Condition before the serving call waits on it; the wait has no predicate.

Scenario: PolicyServer.__init__ starts a loader thread that loads weights, sets
`self.weights`, and calls `self.cond.notify_all()` under the Condition. `act()` does `with
self.cond: self.cond.wait()` ("wait until the weights are loaded") without checking
`self.weights` first and without a timeout. The driver waits until the loader has finished
(`loaded()` returns True: the thread has exited) and only then calls `act()`: the notification
happened before anyone waited and is lost; the state it announced (`self.weights` set) is already
true, but nothing will notify again.

Mechanism: a lost wake-up: Condition.wait without a predicate loop, after the one notify.
Truth: culprit PolicyServer.act (waits without testing the state; the notifier thread is gone,
having done its job). Fix: `self.cond.wait_for(lambda: self.weights is not None)` (or an
Event), and a timeout.
"""
import os
import threading

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class PolicyServer:
    def __init__(self):
        self.cond = threading.Condition()
        self.weights = None
        self.loader = threading.Thread(target=self._load, name="weights-loader")
        self.loader.start()

    def _load(self) -> None:
        w = [i * 0.001 for i in range(100000)]
        with self.cond:
            self.weights = w
            self.cond.notify_all()

    def loaded(self) -> bool:
        self.loader.join()
        return self.weights is not None

    def act(self, obs: float) -> float:
        with self.cond:
            self.cond.wait()
        return obs * self.weights[1]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    server = PolicyServer.remote()
    ray.get(server.loaded.remote())
    ref = server.act.remote(0.5)
    print("READY acting", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
