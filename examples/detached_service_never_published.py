"""An evaluation job waits on a shared, detached weight server that nobody publishes to.

Scenario
    A long-lived ``WeightServer`` actor (detached, named ``weight_server`` in namespace
    ``rl_services``) is shared by jobs: the training job publishes policy weights to it, evaluation
    jobs ``pull(min_version)`` from it. It was started once by a service job (here: a short
    driver run in a subprocess) and outlives it.

Mechanism
    The evaluation job is launched while no training job runs (the last one crashed). ``pull(1)``
    waits on a ``threading.Event`` that only ``publish`` sets, and nobody publishes. The server
    belongs to another job: Ray files the ``pull`` call under the server's job id, with the
    evaluation driver as its parent, so a view of the evaluation job's own tasks and actors
    shows nothing running at all.

What misleads
    The job's own tasks and actors show nothing RUNNING, so the job looks idle or finished.
    Wrong: its call went to a detached actor of another job; Ray files that task under the
    server's job with this driver as ``parent_task_id``, and the server waits for a ``publish``
    nobody makes.

Expected diagnosis
    ``event-never-set``: WeightServer (owned by the service job) waits in ``Event.wait`` inside
    ``pull``; the chain goes from this job's driver into the other job's actor.
"""

import os
import subprocess
import sys
import textwrap

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "event-never-set",
    "culprits": [{"class_name": "WeightServer", "rank": None}],
    "notes": "the pull goes to a detached actor of another job; no training job publishes, so its "
    "Event is never set. The call is filed under the server's job id.",
}

SERVICE = textwrap.dedent('''
    import os, threading, ray

    @ray.remote(num_cpus=0, max_concurrency=8)
    class WeightServer:
        def __init__(self):
            self.version, self.weights = 0, None
            self.published = threading.Event()

        def publish(self, weights, version):
            self.weights, self.version = weights, version
            self.published.set()
            return version

        def pull(self, min_version):
            while self.version < min_version:
                self.published.wait()
            return self.version, self.weights

    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace="rl_services")
    server = WeightServer.options(name="weight_server", lifetime="detached", get_if_exists=True).remote()
    ray.get(server.__ray_ready__.remote())
    print("weight server up", flush=True)
''')


def main():
    # The service job: starts the detached server (once) and exits.
    subprocess.run([sys.executable, "-c", SERVICE], check=True, timeout=120)
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace="rl_services")
    server = ray.get_actor("weight_server", namespace="rl_services")
    print("READY: evaluating the latest policy (version >= 1)", flush=True)
    version, weights = ray.get(server.pull.remote(1))
    print(f"evaluating policy v{version}", flush=True)


if __name__ == "__main__":
    main()
