"""An actor imports a plugin module whose import-time warm-up waits on threads that import it too.

Scenario: Featurizer.featurize imports `_text_plugins` on first use. That module, while it is
being executed (its import lock held by the actor's main thread), warms a vocabulary through a
ThreadPoolExecutor and waits for the results (`list(_POOL.map(...))`). Each pool thread runs
`from _text_plugins import normalise`; the module is still initialising, so importlib makes the
threads wait on the module's import lock (`_ModuleLock.acquire` under `_find_and_load`), which the
main thread holds while it waits on their futures. Python's import deadlock detection only sees
cycles of module locks, so nothing raises.

Mechanism: an import-lock deadlock: the main thread holds a module's import lock and waits on a
future; the threads that would complete the future wait on that import lock.
Truth: culprit Featurizer's main thread (running `_text_plugins` module code, in Future.result);
the pool threads and the driver are victims. A right diagnosis names the import lock (importlib
frames in the pool threads) held by the importing thread. Fix: no thread work at import time
(warm lazily in a function called after import), or import at top of the worker function.
"""
import os

import ray


@ray.remote(num_cpus=0.1)
class Featurizer:
    def featurize(self, docs: list[str]) -> list[list[str]]:
        import _text_plugins

        return [[_text_plugins.normalise(t) for t in d.split()] for d in docs]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    f = Featurizer.remote()
    ref = f.featurize.remote(["Hello World", "Ray Data"])
    print("READY featurizing", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
