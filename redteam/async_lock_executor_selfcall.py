"""An async actor holds an asyncio.Lock while an executor thread makes a blocking call back into it.

Scenario: a PolicyStore async actor serves policy versions. `refresh()` takes `self._lock`
(asyncio.Lock) and, still holding it, runs a sync legacy loader in the loop's default thread
pool (`await loop.run_in_executor(None, self._load_legacy)`). The legacy loader looks up the
current version through the actor's own handle, `ray.get(self_handle.version.remote())` (it was
written for a separate actor). `version()` is a coroutine that needs `self._lock`: it runs on
the actor's loop (an async actor has free slots) and awaits the lock `refresh()` holds. The
executor thread waits on `version`, `refresh` awaits the executor, `version` awaits `refresh`'s
lock. The driver waits in `ray.get(store.refresh.remote())`.

Mechanism: a cycle inside one async actor through an asyncio.Lock, an executor Future and a
Ray call to itself; the coroutines are invisible to py-spy, the executor thread is in ray.get.
Truth: culprit PolicyStore (refresh holds its lock across a self-call); fix: read the version
before taking the lock or call `self.version` in-process without a handle.
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1)
class PolicyStore:
    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._version = 3
        self._self = None

    def bind(self, handle) -> None:
        self._self = handle

    async def version(self) -> int:
        async with self._lock:
            return self._version

    def _load_legacy(self) -> int:
        current = ray.get(self._self.version.remote())
        return current + 1

    async def refresh(self) -> int:
        async with self._lock:
            loop = asyncio.get_running_loop()
            self._version = await loop.run_in_executor(None, self._load_legacy)
            return self._version


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = PolicyStore.remote()
    ray.get(store.bind.remote(store))
    print("READY: refreshing the policy store", flush=True)
    print(ray.get(store.refresh.remote()), flush=True)


if __name__ == "__main__":
    main()
