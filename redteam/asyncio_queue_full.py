"""Two-stage async pipeline: tokenizer puts into a bounded asyncio.Queue whose consumer coroutine died.

Mechanism: Stage actor (async) runs a background consumer task that drains self.q (maxsize=4) and
forwards to an Embedder; the consumer raised on item 3 (KeyError), its asyncio task ended silently.
feed() awaits q.put() forever once 4 items pile up. Driver in ray.get(feed). Truth: culprit is the
Stage actor (its dead consumer coroutine); fix: supervise the task / check task.exception().
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1)
class Embedder:
    def embed(self, x):
        return {"id": x["id"], "vec": [len(x["text"])]}

@ray.remote(num_cpus=0.1)
class Stage:
    def __init__(self, emb):
        self.emb = emb
        self.q = asyncio.Queue(maxsize=4)
        self.out = []
        self.consumer = None

    async def _consume(self):
        while True:
            item = await self.q.get()
            meta = {"lang": "en"} if item["id"] != 3 else {}
            item["lang"] = meta["lang"]  # KeyError on id 3: the task dies silently
            self.out.append(await self.emb.embed.remote(item))

    async def feed(self, n):
        if self.consumer is None:
            self.consumer = asyncio.get_running_loop().create_task(self._consume())
        for i in range(n):
            await self.q.put({"id": i, "text": "x" * i})
            if i == 10:
                print("READY queued 10", flush=True)
        return len(self.out)

def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    st = Stage.remote(Embedder.remote())
    print("READY: driver -> Stage.feed (asyncio.Queue maxsize 4, consumer died)", flush=True)
    print(ray.get(st.feed.remote(100)))

if __name__ == "__main__":
    main()
