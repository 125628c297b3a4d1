"""Healthy: a Ray Data UDF actor waits on a named actor that spends minutes building the label map.

Scenario: the label backfill's twin. `ds.map_batches(Labeler, concurrency=1)`; Labeler's `__call__`
fetches the label map with `ray.get(self.registry.label_map.remote())` from the named actor
`curated-registry`, a sync actor whose first `label_map` call builds the map by clustering a
7000x7000 affinity matrix with one `np.linalg.eigh` (single-threaded BLAS, ~1-2 min), then caches it.
The driver iterates `ds.iter_batches` silently.
Mechanism (none: healthy): a UDF in ray.get on an actor that is computing in a native call.
Truth: no hang. Right: no-hang or inconclusive; a hang on the Labeler, the registry or the driver is false.
"""
# redteam-ray-start: --resources='{"rt15c_lc":1}'
# redteam-settle: 25
import os

import numpy as np
import ray


@ray.remote(num_cpus=0.1, runtime_env={"env_vars": {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}})
class CuratedRegistry:
    def __init__(self):
        self._map = None

    def label_map(self):
        if self._map is None:
            rng = np.random.default_rng(3)
            x = rng.standard_normal((7000, 64))
            w = np.linalg.eigh(x @ x.T)[0]
            self._map = {i: f"class-{i}-{w[-1 - i]:.1f}" for i in range(10)}
        return self._map


class Labeler:
    def __init__(self):
        self.registry = ray.get_actor("curated-registry")

    def __call__(self, batch):
        labels = ray.get(self.registry.label_map.remote())
        batch["label"] = np.array([labels[int(x) % 10] for x in batch["id"]])
        return batch


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    registry = CuratedRegistry.options(name="curated-registry").remote()
    ray.get(registry.__ray_ready__.remote())
    ds = ray.data.range(512).map_batches(Labeler, concurrency=1, batch_size=32, num_cpus=0.5)
    print("READY backfilling labels", flush=True)
    n = 0
    for batch in ds.iter_batches(batch_size=32):
        n += len(batch["id"])
    print("labelled", n)


if __name__ == "__main__":
    main()
