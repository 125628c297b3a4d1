"""An actor holds the run directory's file lock across a call into an actor that needs it.

Scenario
    Two actors share a run directory on the node's disk. ``CheckpointManager.commit`` takes an
    exclusive ``fcntl.flock`` on ``<run_dir>/.lock`` (so that no other process writes the run
    directory while it renames the checkpoint into place), then asks the ``MetricsWriter`` actor
    to flush the step's metrics into the same run directory and waits for it with ``ray.get``.
    ``MetricsWriter.flush`` takes the same lock before it appends to ``metrics.jsonl``.

Mechanism
    ``fcntl.flock`` locks are held by an open file of a process and are invisible to Ray: the
    State API shows ``commit`` and ``flush`` RUNNING, py-spy shows ``commit`` in ``ray.get`` and
    ``flush`` idle at the ``fcntl.flock(...)`` line (no Python frame for the C call). Only the
    kernel knows: ``/proc/locks`` lists the manager's pid holding a ``FLOCK WRITE`` lock on the
    file's inode and the writer's pid waiting for it (``->``), and the writer's thread sleeps in
    ``locks_lock_inode_wait`` (``/proc/PID/task/TID/wchan``). A cycle: manager → flush (ray.get)
    → writer → manager (file lock). Nothing times out.

What misleads
    ``MetricsWriter`` is idle at an ``fcntl.flock`` line with no Ray wait on its stack, so it
    looks like slow disk I/O or an unknown wait; ``CheckpointManager`` looks like a plain
    ``ray.get`` victim. Wrong: Ray cannot see file locks; ``/proc/locks`` shows the manager's
    pid holding the lock the writer waits for, which closes a cycle.

Expected diagnosis
    ``file-lock-deadlock``: the cycle CheckpointManager → MetricsWriter → CheckpointManager, the
    writer's wait at ``fcntl.flock(fh, fcntl.LOCK_EX)`` on ``<run_dir>/.lock`` held by the
    manager's pid. Fix: release the file lock before calling another process that takes it (or
    pass the work in and do it under the one lock; ``LOCK_NB`` with a bounded retry).
"""

import fcntl
import json
import os
import tempfile
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "file-lock-deadlock",
    "culprits": [{"class_name": "CheckpointManager", "rank": None},
                 {"class_name": "MetricsWriter", "rank": None}],
    "notes": "CheckpointManager.commit holds an exclusive flock on <run_dir>/.lock and waits in ray.get on "
    "MetricsWriter.flush, which blocks in fcntl.flock on the same file: a cycle through an OS file lock "
    "(/proc/locks: holder and waiter pids on one inode).",
}


@ray.remote(num_cpus=0.25)
class MetricsWriter:
    def __init__(self, run_dir: str):
        self.run_dir = run_dir

    def flush(self, step: int, metrics: dict) -> int:
        with open(os.path.join(self.run_dir, ".lock"), "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # the run directory is written under its lock
            with open(os.path.join(self.run_dir, "metrics.jsonl"), "a") as out:
                out.write(json.dumps({"step": step, **metrics}) + "\n")
            fcntl.flock(fh, fcntl.LOCK_UN)
        return step


@ray.remote(num_cpus=0.25)
class CheckpointManager:
    def __init__(self, run_dir: str, writer):
        self.run_dir, self.writer = run_dir, writer

    def commit(self, step: int, state: dict) -> str:
        path = os.path.join(self.run_dir, f"ckpt-{step}.json")
        with open(os.path.join(self.run_dir, ".lock"), "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            with open(path + ".tmp", "w") as out:
                json.dump(state, out)
            os.replace(path + ".tmp", path)
            ray.get(self.writer.flush.remote(step, {"checkpoint": path}))
            fcntl.flock(fh, fcntl.LOCK_UN)
        return path


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    run_dir = tempfile.mkdtemp(prefix="run-")
    writer = MetricsWriter.remote(run_dir)
    manager = CheckpointManager.remote(run_dir, writer)
    print(f"[train] run dir {run_dir}", flush=True)
    ray.get(writer.flush.remote(0, {"loss": 1.0}))  # the writer works on its own
    time.sleep(0.5)
    print("READY: CheckpointManager.commit holds the run dir lock and waits on MetricsWriter.flush", flush=True)
    print(ray.get(manager.commit.remote(1, {"weights": [0.1, 0.2]})), flush=True)


if __name__ == "__main__":
    main()
