"""Serve: a sync handler holds a threading.Lock across a call to the deployment it composes, which calls back into that lock.

Scenario: a text service. `Gateway` (sync `def predict`, run in the replica's thread pool) guards its
vocabulary with `self._lock` and, inside `with self._lock:`, calls the composed `Model` deployment:
`self.model.predict.remote(ids).result()`. `Model.predict` (async) first asks the gateway for the
vocabulary size through a handle to the Gateway deployment: `await gw.vocab_size.remote()`.
`Gateway.vocab_size` (sync) takes `with self._lock:` too. A client actor sends one request.

Mechanism: Gateway's request thread holds `_lock` and waits on Model's response; Model's request
awaits Gateway.vocab_size, which runs in another thread of the same Gateway replica and blocks on
`_lock`: a cycle through a lock and two Serve requests (no slot is short: max_ongoing_requests is 5).
Truth: hang. Culprit: Gateway.predict, line `return self.model.predict.remote(ids).result()`
(the sub-request made while `self._lock` is held). Fix: read what is needed under the lock, release
it, then call the Model (never hold a lock across a handle call that can come back).
"""
# redteam-ray-start: --resources='{"rt15c_gw":1}'
import os
import threading

import ray
from ray import serve


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.1})
class Model:
    def __init__(self):
        self.gw = None

    async def predict(self, ids):
        if self.gw is None:
            self.gw = serve.get_deployment_handle("Gateway", app_name="textsvc")
        n = await self.gw.vocab_size.remote()
        return [i % n for i in ids]


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.1})
class Gateway:
    def __init__(self, model):
        self.model = model
        self._lock = threading.Lock()
        self._vocab = {w: i for i, w in enumerate("the a of to and in is it".split())}

    def vocab_size(self) -> int:
        with self._lock:
            return len(self._vocab)

    def predict(self, text: str):
        with self._lock:
            ids = [self._vocab.setdefault(w, len(self._vocab)) for w in text.split()]
            return self.model.predict.remote(ids).result()


@ray.remote(num_cpus=0.1)
class Client:
    def ask(self, text):
        h = serve.get_deployment_handle("Gateway", app_name="textsvc")
        return h.predict.remote(text).result()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    serve.run(Gateway.bind(Model.bind()), name="textsvc", route_prefix=None)
    c = Client.remote()
    ref = c.ask.remote("the model of the service")
    print("READY request sent", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
