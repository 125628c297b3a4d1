"""Healthy: a task waits in subprocess.run on a shell script that sleeps until a mirror window opens.

Scenario: `sync_mirror` runs the team's shell script with `subprocess.run(["bash", "-c", ...])`:
it echoes "mirror busy, retrying in 240 s", runs `sleep 240`, then copies a file.
Mechanism: the task's thread is idle in `subprocess.run` → `Popen.wait`; its child is bash (not
Python) in wait4 on its own child `sleep` (idle in nanosleep). No CPU, no I/O, no socket.
Truth: healthy (no culprit): `sleep 240` exits, the script copies and exits, run returns.
A hang verdict is wrong.
"""
# redteam-settle: 25
import os
import subprocess

import ray

SCRIPT = 'echo "mirror busy, retrying in 240 s"; sleep 240; cp /etc/hostname "$TMPDIR_OUT/mirror.txt"; echo synced'


@ray.remote(num_cpus=1)
def sync_mirror(out: str) -> int:
    os.makedirs(out, exist_ok=True)
    return subprocess.run(["bash", "-c", SCRIPT], env={**os.environ, "TMPDIR_OUT": out}).returncode


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ref = sync_mirror.remote("/tmp/rt_shell_mirror")
    print("READY: driver -> sync_mirror (bash child in `sleep 240`)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
