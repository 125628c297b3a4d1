"""A task that needs the cluster's only licence waits for its input; an actor created after it takes the licence and waits on the task.

Scenario: the cluster has one unit of a custom resource `rt14_license` (one seat of a licensed
solver SDK). The driver submits `fit.options(resources={"rt14_license": 1}).remote(prep)` whose
argument `prep` is a slow `prepare` task (~10 s): `fit` waits for its argument first and holds
nothing yet. Right after, the driver creates the ReportWriter actor, also with
`resources={"rt14_license": 1}` ("it loads the solver to render the report"), and calls
`writer.write([fit_ref])`, which does `ray.get(refs[0])`. The actor is scheduled at once and takes the
seat; when `prepare` finishes, `fit` is ready to run but the seat is held by the writer, which waits
on `fit`. `fit` stays PENDING_NODE_ASSIGNMENT; no error, no autoscaler message (the request is
feasible: the cluster has one seat).

Mechanism: hold-and-wait on a custom resource: the holder is an actor created after the waiting
task was submitted (scheduled before it because the task's arguments were not ready), and it waits on
that task.
Truth: hang; culprit the ReportWriter (holds the only rt14_license while in `ray.get(refs[0])` on
fit). Fix: create the writer after `fit` finished, do not reserve the licence for the writer's
lifetime (num resources only where the solver runs), or give the cluster a second seat. `fit` and
the driver are victims.
"""
# redteam-ray-start: --resources='{"rt14_license":1}'
import os
import time

import numpy as np
import ray


@ray.remote(num_cpus=1)
def prepare(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 64))
    end = time.time() + 10
    while time.time() < end:
        x = np.tanh(x @ rng.standard_normal((64, 64)) / 8.0)
    return x


@ray.remote(num_cpus=1)
def fit(x: np.ndarray) -> dict:
    w, *_ = np.linalg.lstsq(x, x[:, 0], rcond=None)
    return {"weights": w.tolist(), "rows": len(x)}


@ray.remote(num_cpus=0.1)
class ReportWriter:
    def write(self, refs) -> str:
        model = ray.get(refs[0])
        return f"report: {model['rows']} rows"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    prep = prepare.remote(20_000)
    fit_ref = fit.options(resources={"rt14_license": 1}).remote(prep)
    writer = ReportWriter.options(resources={"rt14_license": 1}).remote()
    report = writer.write.remote([fit_ref])
    ray.wait([prep], timeout=120)
    time.sleep(3)
    print("READY model fitted, writing report", flush=True)
    print(ray.get(report))


if __name__ == "__main__":
    main()
