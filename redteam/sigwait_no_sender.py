"""A task waits in signal.sigwait for SIGUSR1 that its sender never sends (the sender targets its own pid).

Scenario: an export task (`export_when_told`) blocks SIGUSR1 and waits for it with
`signal.sigwait({SIGUSR1})`: an orchestrator is meant to signal it when the upstream table is sealed.
The orchestrator actor (`Sealer.seal`) seals the table and then sends the signal with
`os.kill(os.getpid(), SIGUSR1)` — its *own* pid (a copy-paste from a local test that ran both in one
process), with SIGUSR1 ignored there (`signal.SIG_IGN`), so nothing happens. The seal call FINISHED;
the driver waits on the export.

Mechanism: a wait for a signal that no live process will send: the only sender already ran and its
signal went to another process (itself).
Truth: hang; culprit Sealer.seal's `os.kill(os.getpid(), …)` line (the waiter is its victim). Fix: pass
the waiter's pid (or use an Event/ObjectRef instead of a signal).
"""
import os
import signal

import ray


@ray.remote(num_cpus=1)
def export_when_told(table: str) -> str:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    print(f"export of {table} waits for the seal signal (pid {os.getpid()})", flush=True)
    signal.sigwait({signal.SIGUSR1})
    return f"exported {table}"


@ray.remote(num_cpus=1)
class Sealer:
    def __init__(self):
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)

    def seal(self, table: str) -> str:
        os.kill(os.getpid(), signal.SIGUSR1)  # meant: the export task's pid
        return f"sealed {table}"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    export = export_when_told.remote("events_2026_12")
    sealer = Sealer.remote()
    print(ray.get(sealer.seal.remote("events_2026_12")), flush=True)
    print("READY exporting", flush=True)
    print(ray.get(export))


if __name__ == "__main__":
    main()
