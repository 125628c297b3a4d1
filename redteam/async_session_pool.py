"""An async actor's cached async generator holds an asyncio.Lock across its yields.

Scenario: SessionStore is an async actor. `_rows(table)` is an async generator that takes the
store's connection lock (`async with self.conn_lock:`) and yields rows. `preview(table)` takes the
first rows with `__anext__()` and caches the generator in `self.cursors` so a later call can
continue. The driver previews table "users" (returns), then calls `count("orders")`, which awaits
the same lock — held by the suspended generator that nothing resumes. The loop is idle; the
awaiting coroutine has no stack in py-spy.

Mechanism: an asyncio lock held by a suspended (cached) async generator: an await nothing in the
process will ever complete.
Truth: culprit SessionStore (its cached `_rows` generator holds conn_lock; `count` awaits it);
the driver is a victim. Fix: take the lock per fetch, not across yields, or `aclose()` cursors
before other queries.
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1)
class SessionStore:
    def __init__(self):
        self.conn_lock = asyncio.Lock()
        self.cursors: dict[str, object] = {}
        self.tables = {"users": list(range(100)), "orders": list(range(1000))}

    async def _rows(self, table: str):
        async with self.conn_lock:
            for row in self.tables[table]:
                await asyncio.sleep(0)
                yield row

    async def preview(self, table: str, n: int) -> list[int]:
        cur = self.cursors.setdefault(table, self._rows(table))
        return [await cur.__anext__() for _ in range(n)]

    async def count(self, table: str) -> int:
        async with self.conn_lock:
            return len(self.tables[table])


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = SessionStore.remote()
    print(ray.get(store.preview.remote("users", 5)), flush=True)
    ref = store.count.remote("orders")
    print("READY counting", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
