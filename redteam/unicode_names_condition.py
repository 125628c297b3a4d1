"""Actor with a unicode/spaces name waits on a threading.Condition nobody notifies.

Mechanism: "Modèle 训练 worker #1 🚀" (named actor) has a ParamCache; get_params() waits on
self.cond.wait_for(lambda: self.version >= 1) with no timeout; publish() is never called (the
driver calls get first and only then would publish). Truth: culprit is that actor... the waiter;
the missing notifier is the driver's call order. Tests name safety in report.md.
"""
import os
import threading

import ray


@ray.remote(num_cpus=0.1, max_concurrency=4)
class ParamCache:
    def __init__(self):
        self.cond = threading.Condition()
        self.version = 0
        self.params = None

    def publish(self, p):
        with self.cond:
            self.params, self.version = p, self.version + 1
            self.cond.notify_all()

    def get_params(self):
        with self.cond:
            self.cond.wait_for(lambda: self.version >= 1)
            return self.params

def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    c = ParamCache.options(name="Modèle 训练 worker #1 🚀 `rm -rf` | <b>x</b>").remote()
    print("READY: driver -> ParamCache.get_params before publish", flush=True)
    p = ray.get(c.get_params.remote())
    ray.get(c.publish.remote({"w": 1}))
    print(p)

if __name__ == "__main__":
    main()
