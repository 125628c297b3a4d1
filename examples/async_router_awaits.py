"""An async router actor awaits a generation engine that waits for weights nobody loads.

Scenario
    Rollout generation for RL fine-tuning: the driver sends prompts to an async
    ``InferenceRouter`` actor (``max_concurrency=64``), which spreads them over two
    ``GenerationEngine`` actors with ``await engine.generate.remote(prompt)``. Each engine loads
    its weights in ``load_weights(version)``; ``generate`` waits until weights are loaded
    (a "not ready yet" guard polling every 50 ms). The router pushes the policy's weights to its
    engines in ``sync_weights()``, which the training loop calls after every optimizer step.

Mechanism
    The driver calls ``router.sync_weights.remote()`` only after the first training step, but
    asks for the first rollouts *before* it (the usual "generate, then train, then sync" order
    was rearranged when warm-up rollouts were added). Engine 1 was started with
    ``preload=False`` (the config for elastic engines), so it has no weights yet and its
    ``generate`` polls forever; engine 0 preloaded and answers. The router's coroutine for
    engine 1 awaits forever; the async actor's stack shows nothing but an idle event loop; the
    driver waits in ``ray.get`` on the router.

What misleads
    The router's stack shows only an idle event loop (``select``), so it looks idle - the end of
    the chain, or nothing to do with the hang. Wrong: its ``generate_batch`` is RUNNING and
    awaits the engine calls it submitted; following its child tasks leads to engine 1 polling
    for weights that were never loaded.

Expected diagnosis
    ``poll-never-satisfied`` in GenerationEngine (engine 1) at the ``time.sleep`` line of the
    "not ready" guard. Chain: driver → InferenceRouter.generate_batch (an async actor awaiting
    the engine call it made: followed through the task it submitted) → GenerationEngine.
"""

import asyncio
import os
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "poll-never-satisfied",
    "culprits": [{"class_name": "GenerationEngine", "rank": None}],
    "notes": "engine 1 started with preload=False never gets load_weights (sync_weights is "
    "called only after the first train step, rollouts come before it); its generate polls "
    "forever. The async InferenceRouter awaits it (no wait on its own stack).",
}


@ray.remote(num_cpus=0.25)
class GenerationEngine:
    def __init__(self, engine_id: int, preload: bool):
        self.engine_id = engine_id
        self.weights_version = 0 if preload else None

    def load_weights(self, version: int) -> int:
        self.weights_version = version
        return version

    def generate(self, prompt: str) -> str:
        # Not ready yet: wait for the first load_weights.
        while self.weights_version is None:
            time.sleep(0.05)
        return f"{prompt} -> completion by engine {self.engine_id} (weights v{self.weights_version})"


@ray.remote(num_cpus=0.25, max_concurrency=64)
class InferenceRouter:
    def __init__(self, engines: list):
        self.engines = engines
        self.version = 0

    async def sync_weights(self) -> int:
        self.version += 1
        await asyncio.gather(*[e.load_weights.remote(self.version) for e in self.engines])
        return self.version

    async def generate_batch(self, prompts: list) -> list:
        calls = [self.engines[i % len(self.engines)].generate.remote(p) for i, p in enumerate(prompts)]
        return list(await asyncio.gather(*calls))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    engines = [GenerationEngine.remote(0, preload=True), GenerationEngine.remote(1, preload=False)]
    router = InferenceRouter.remote(engines)
    prompts = [f"prompt-{i}" for i in range(8)]
    print("READY: warm-up rollouts before the first weight sync", flush=True)
    rollouts = ray.get(router.generate_batch.remote(prompts))  # hangs: engine 1 has no weights
    print(f"got {len(rollouts)} rollouts", flush=True)
    ray.get(router.sync_weights.remote())


if __name__ == "__main__":
    main()
