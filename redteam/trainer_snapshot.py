"""A snapshot helper stops the trainer's process with SIGSTOP for a consistent copy and fails before SIGCONT.

Scenario: Trainer.fit runs a numeric loop. A snapshot task freezes the trainer's process
(`os.kill(pid, SIGSTOP)`, the way some checkpoint/CRIU helpers get a consistent image), copies its
state file and resumes it with SIGCONT — but the copy raises (the state file is missing) and the
task fails before SIGCONT. The trainer's process stays stopped (state `T` in /proc/<pid>/stat,
0 % CPU); its stack is frozen mid-loop; the driver waits in ray.get on fit.

Mechanism: a process stopped by a signal (job control), not blocked on anything: nothing inside it
can run; only a SIGCONT from outside resumes it.
Truth: culprit the failed `snapshot` task (stopped Trainer and died before SIGCONT; its FAILED row
has the FileNotFoundError); the Trainer (stopped) and the driver are victims. A right diagnosis
names the stopped state. Fix: SIGCONT in a finally; prefer a cooperative pause.
"""
import os
import signal
import time

import ray


@ray.remote(num_cpus=0.5)
class Trainer:
    def pid(self) -> int:
        return os.getpid()

    def fit(self, steps: int) -> float:
        w = 0.0
        for i in range(steps):
            w += sum(j * 1e-9 for j in range(20_000)) + i * 1e-6
        return w


@ray.remote(num_cpus=0.1, max_retries=0)
def snapshot(pid: int, state_path: str) -> int:
    os.kill(pid, signal.SIGSTOP)
    with open(state_path, "rb") as fh:
        data = fh.read()
    os.kill(pid, signal.SIGCONT)
    return len(data)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    t = Trainer.remote()
    pid = ray.get(t.pid.remote())
    ref = t.fit.remote(10_000_000)
    time.sleep(2)
    try:
        ray.get(snapshot.remote(pid, "/tmp/trainer-state-missing.bin"))
    except ray.exceptions.RayError as e:
        print("snapshot failed:", type(e).__name__, flush=True)
    print("READY training", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
