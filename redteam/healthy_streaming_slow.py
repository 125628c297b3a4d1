"""Healthy: the driver consumes a slow streaming generator; one item every ~7 s, no log lines.

Mechanism: simulate_episodes is a generator task (num_returns="streaming") that sleeps ~7 s per
episode (an external simulator) and yields a result; the driver iterates it, accumulates without
printing, 25 episodes (~175 s). No task finishes until the end. Truth: no hang (items stream).
"""
import os
import time

import ray


@ray.remote(num_cpus=0.5, num_returns="streaming")
def simulate_episodes(n):
    for i in range(n):
        time.sleep(7)
        yield {"episode": i, "return": float(i)}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    gen = simulate_episodes.remote(25)
    print("READY: driver consumes a generator yielding every 7 s", flush=True)
    total = 0.0
    for ref in gen:
        total += ray.get(ref)["return"]
    print(total)


if __name__ == "__main__":
    main()
