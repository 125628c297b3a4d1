"""A healthy rollout stream: a generator task yields one episode every ~7 s, silently.

Scenario
    An RL evaluation driver streams episodes out of a ``simulate_episodes`` generator task
    (``num_returns="streaming"``): each episode steps an external simulator (here ``time.sleep``
    standing in for it) for about 7 s and yields the episode's return. The driver iterates the
    stream and accumulates the returns, printing nothing until the end (25 episodes, ~3 min).

Mechanism
    Nothing is wrong: the generator sleeps between yields and the driver waits for the next
    item in ``ObjectRefGenerator.__next__``. But no task finishes until the stream ends, nothing
    is logged, no byte is written, and every stack sample shows the generator at the same
    ``time.sleep`` line — a window of about a second sees no sign of life.

What misleads
    The generator task sits in a sleep loop and the driver waits on it: exactly the stacks of a
    poll loop for a condition that never comes (``poll-never-satisfied``), which would be called
    a hang. Wrong: the driver is reading a stream from that task (its stack is in
    ``ObjectRefGenerator``), so the sleep paces the items, and each item is progress that no task
    state shows.

Expected diagnosis
    ``inconclusive``: ``stream-paced-producer`` — simulate_episodes sleeps between the items its
    consumer (the driver, in ``ObjectRefGenerator.__next__``) is reading; not called a hang on the
    stacks alone: diagnose again over a window longer than one item.
"""

import os
import time

import ray

EXPECTED = {
    "verdict": "inconclusive",
    # no false alarm either way: a second round of samples may see the next episode (no-hang)
    "verdicts": ["inconclusive", "no-hang"],
    "pattern": None,
    "culprits": [],
    "notes": "healthy: simulate_episodes (streaming) yields an episode every ~7 s; the driver iterates "
    "the ObjectRefGenerator silently; no task finishes, no log line, no disk write in the window.",
}


@ray.remote(num_cpus=0.5, num_returns="streaming")
def simulate_episodes(n: int, step_s: float):
    for episode in range(n):
        time.sleep(step_s)  # the external simulator running one episode
        yield {"episode": episode, "return": float(episode % 5)}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    stream = simulate_episodes.remote(25, 7.0)
    print("READY: driver reads a stream of episodes, one every ~7 s", flush=True)
    total = 0.0
    for ref in stream:
        total += ray.get(ref)["return"]
    print(f"mean return {total / 25:.2f}", flush=True)


if __name__ == "__main__":
    main()
