"""A separate driver (its own job) for finetune_after_cache_warmup.py: warms a detached model cache, exits."""
import os

import ray


@ray.remote(num_gpus=2, num_cpus=0.1)
class ModelCache:
    def __init__(self):
        self.models = {"llama-7b": b"x" * 1024}

    def names(self) -> list[str]:
        return list(self.models)


if __name__ == "__main__":
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace="serving")
    cache = ModelCache.options(name="model-cache", lifetime="detached").remote()
    print("cache warm:", ray.get(cache.names.remote()), flush=True)
