"""A dataset publisher holds the repository's flock while it runs a CLI child that takes the same lock.

Scenario: an actor publishes a new dataset version to a shared repository directory. It takes the
repo's exclusive lock (`flock(repo/.lock, LOCK_EX)`, "one publisher at a time") and, inside it,
runs the repo's maintenance CLI (`python -m ... gc`, here an inline child) with subprocess.run.
The CLI, written to be safe when run by hand, takes the same repo lock first — through its own
open(), so a different open file description — and waits for it. The actor waits for the child
to exit; the child waits for the lock the actor holds until the child exits.

Mechanism: a wait-for cycle across a parent and its child: parent in waitpid on the child, child
in flock() on a lock whose holder (/proc/locks) is the parent.
Truth: hang; culprit Publisher.publish — it holds the repo lock across `subprocess.run([... gc])`
(the child's flock is the victim end). Fix: release the lock before running the CLI, or pass the
held lock to the child (e.g. an env var saying the lock is held / inherit the fd) so it skips it.
"""
import fcntl
import os
import subprocess
import sys
import tempfile

import ray

GC_CLI = r"""
import fcntl, os, sys
repo = sys.argv[1]
with open(os.path.join(repo, ".lock"), "w") as lk:
    fcntl.flock(lk, fcntl.LOCK_EX)
    for name in os.listdir(repo):
        if name.endswith(".tmp"):
            os.remove(os.path.join(repo, name))
"""


@ray.remote(num_cpus=0.25)
class Publisher:
    def __init__(self, repo):
        self.repo = repo

    def publish(self, version):
        with open(os.path.join(self.repo, ".lock"), "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            with open(os.path.join(self.repo, f"v{version}.parquet"), "w") as f:
                f.write("rows\n" * 1000)
            subprocess.run([sys.executable, "-c", GC_CLI, self.repo], check=True)
        return version


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    repo = tempfile.mkdtemp(prefix="rt11_repo_")
    pub = Publisher.remote(repo)
    ref = pub.publish.remote(3)
    import time

    time.sleep(6)
    print("READY: Publisher holds repo lock in subprocess.run; the gc child waits in flock", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
