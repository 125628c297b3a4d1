"""Serve tokenizer deployment: requests hold an asyncio.Lock while awaiting a vocab that load needs the lock to set.

Scenario: a text-generation stack. Three RolloutWorker actors send prompts to the Serve
deployment Tokenizer through a DeploymentHandle and wait on `.result()`. Tokenizer lazily waits
for its vocabulary: __call__ takes self._lock ("one tokenization at a time while the vocab may
change") and, inside it, awaits self._vocab_ready. The driver sends a warm-up request, then pushes
the vocab a moment later with handle.load_vocab.remote(...), and load_vocab also takes self._lock before setting
the event -- it waits on the lock forever. All requests queue on the lock behind the first one.

Mechanism: a Serve replica stuck on an asyncio.Lock held across an await: the awaited
asyncio.Event's only setter (load_vocab) is itself waiting for that lock. Nothing of this is
visible to py-spy (the replica's loop is idle); Serve's replica metrics/logs show requests
in flight and none finishing.
Truth: culprit the Tokenizer replica (__call__ awaits _vocab_ready while holding _lock).
Fix: wait for the vocab outside the lock (or set the event without the lock).
"""
# redteam-ray-start: --resources='{"serve_tok":1}'
import asyncio
import os
import time

import ray
from ray import serve


@serve.deployment(num_replicas=1, max_ongoing_requests=16, ray_actor_options={"num_cpus": 0.1})
class Tokenizer:
    def __init__(self):
        self._lock = asyncio.Lock()
        self._vocab_ready = asyncio.Event()
        self.vocab: dict[str, int] = {}

    async def load_vocab(self, words: list[str]) -> int:
        async with self._lock:
            self.vocab = {w: i for i, w in enumerate(words)}
            self._vocab_ready.set()
        return len(self.vocab)

    async def _encode(self, text: str) -> list[int]:
        await self._vocab_ready.wait()
        return [self.vocab.get(w, 0) for w in text.split()]

    async def __call__(self, text: str) -> list[int]:
        async with self._lock:
            return await self._encode(text)


@ray.remote(num_cpus=0.1)
class RolloutWorker:
    def __init__(self):
        self.tok = serve.get_deployment_handle("Tokenizer", app_name="tokenizer")

    def generate(self, prompts: list[str]) -> int:
        n = 0
        for p in prompts:
            n += len(self.tok.remote(p).result())
        return n


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    handle = serve.run(Tokenizer.bind(), name="tokenizer", route_prefix=None)
    warmup = handle.remote("warm up the tokenizer")
    workers = [RolloutWorker.remote() for _ in range(3)]
    refs = [w.generate.remote([f"prompt {i} from worker {j}" for i in range(5)]) for j, w in enumerate(workers)]
    time.sleep(3)
    vocab_ref = handle.load_vocab.remote(["prompt", "from", "worker"] + [str(i) for i in range(10)])
    print("READY vocab pushed, rollouts running", flush=True)
    print(ray.get(refs), vocab_ref.result(), warmup.result())


if __name__ == "__main__":
    main()
