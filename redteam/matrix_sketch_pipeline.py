"""Healthy: a Ray Data pipeline whose function UDF spends minutes per batch inside one LAPACK call.

Scenario: a matrix-sketch job. `ray.data.range(6, override_num_blocks=6).map_batches(sketch,
batch_size=1, num_cpus=1)`; `sketch` builds a 3600x3600 matrix from the batch's seed and calls
`np.linalg.svd(m, compute_uv=True)` once (single-threaded BLAS: ~1-3 min on this shared machine),
returning the top singular values. The driver consumes with `iter_batches(batch_size=1)` and
prints nothing until the end.
Mechanism (none: healthy): each read->map task sits in one native call (no Python frame change,
no logging); the driver waits in Ray Data's iterator; batches come every minute or two.
Truth: no hang. A right diagnosis is no-hang or inconclusive; a hang naming the map task, the
driver or a Ray Data operator is a false hang.
"""
# redteam-ray-start: --resources='{"rt15c_ms":1}'
# redteam-settle: 25
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import ray  # noqa: E402


def sketch(batch):
    out = []
    for seed in batch["id"]:
        rng = np.random.default_rng(int(seed))
        m = rng.standard_normal((3600, 3600))
        s = np.linalg.svd(m, compute_uv=True)[1]
        out.append(s[:8])
    return {"id": batch["id"], "top": np.stack(out)}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"),
             runtime_env={"env_vars": {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}})
    ds = ray.data.range(6, override_num_blocks=6).map_batches(sketch, batch_size=1, num_cpus=1)
    print("READY sketching", flush=True)
    tops = []
    for b in ds.iter_batches(batch_size=1):
        tops.append(b["top"])
    print("done", len(tops))


if __name__ == "__main__":
    main()
