"""A fine-tuning job whose GPU actor stays pending: a detached model cache from an earlier job holds the GPUs.

Scenario: the job's preamble runs a "cache warm-up" script (a separate driver, so a separate
Ray job) that creates the detached actor "model-cache" in namespace "serving" with num_gpus=2
and exits. That job is SUCCEEDED; its detached actor lives on, holding both GPUs of the cluster.
The fine-tuning job then creates Finetuner(num_gpus=1), which stays PENDING_CREATION; the driver
waits in ray.get on Finetuner.fit().

Mechanism: a resource wait whose holder is a detached actor of a finished job (another job id,
another namespace): the cluster has 2 GPUs, both held; demand {GPU: 1} pending.
Truth: culprit the detached ModelCache actor ("model-cache", namespace "serving", job 01, finished)
holding GPU 2/2. Fix: give the cache num_gpus=0 (it only holds bytes) or kill it
(ray.kill(ray.get_actor("model-cache", namespace="serving"))), or do not make it detached.
"""
# redteam-ray-start: --num-gpus=2
import os
import subprocess
import sys

import ray


@ray.remote(num_gpus=1, num_cpus=1)
class Finetuner:
    def fit(self, epochs: int) -> float:
        return 0.1 * epochs


def main():
    env = {k: v for k, v in os.environ.items() if k != "RAY_JOB_CONFIG_JSON_ENV_VAR"}  # its own job, not this submission
    subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_model_cache_job.py")],
                   check=True, timeout=120, env=env)
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ft = Finetuner.remote()
    ref = ft.fit.remote(3)
    print("READY finetuner submitted", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
