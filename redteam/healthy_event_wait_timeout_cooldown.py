"""Healthy: an actor's method waits in Event.wait(timeout=240), an interruptible cooldown nobody sets.

Scenario: a Harvester actor polls an upstream feed in rounds. Between rounds it waits on
`self.wake.wait(timeout=240)`: the usual interruptible sleep (a `shutdown()` call would set the
event to end it early; nobody calls it). After the timeout it harvests the next round.
Mechanism: the method's thread is idle in `Event.wait` → `Condition.wait` with a 240 s timeout,
no thread or process can set the event, nothing is logged after "cooling down 240 s".
Truth: healthy (no culprit): the wait ends by its timeout 240 s after it began; the call returns.
A hang verdict is wrong.
"""
# redteam-settle: 25
import os
import threading

import ray


@ray.remote(num_cpus=1)
class Harvester:
    def __init__(self):
        self.wake = threading.Event()

    def harvest(self, rounds: int) -> int:
        got = 0
        for r in range(rounds):
            got += r + 1
            print(f"round {r}: harvested; cooling down 240 s", flush=True)
            self.wake.wait(timeout=240)
        return got


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    h = Harvester.remote()
    ref = h.harvest.remote(2)
    print("READY: driver -> Harvester.harvest (Event.wait(timeout=240) cooldown)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
