"""A healthy pure-Python Monte Carlo chain: one busy loop, a counter advancing, no output.

Scenario
    A ``Sampler`` actor runs a Metropolis chain in pure Python (its own linear congruential
    generator, no numpy) until it has accepted ``target`` proposals, then returns the mean; the
    driver waits in ``ray.get`` and prints the result. It runs for minutes and logs one line when
    it starts, nothing after. The job ends successfully.

Mechanism
    Nothing is wrong. ``Sampler.run_chain`` is ``while accepted < target:`` — the loop changes
    what it tests: ``accepted`` grows at every accepted proposal (and ``proposals`` at every
    round). Its thread is ``(active+gil)`` at 100 % CPU in the lines of that one loop in every
    sample; no callee, no I/O, no log line, no task finishing.

What misleads
    Same function, same loop, full CPU, nothing written, a driver blocked on it: the stack of a
    spin. Wrong to call it a hang: the loop advances its own exit condition (its counter moves
    between samples), a computation that ends.

Expected diagnosis
    ``no-hang`` (its loop goes round, its counter advances) or ``inconclusive`` with what was seen
    — never ``hang``.
"""

import math
import os

import ray

EXPECTED = {
    "verdict": "no-hang",
    "verdicts": ["no-hang", "inconclusive"],
    "pattern": None,
    "culprits": [],
    "ready": "chain started",
    "notes": "healthy: Sampler.run_chain is a pure-Python `while accepted < target` loop (LCG + Metropolis "
    "step) running for minutes without output; the driver waits in ray.get.",
}

TARGET = 60_000_000
MOD = 1 << 64


@ray.remote(num_cpus=0.1)
class Sampler:
    def __init__(self, seed: int):
        self.seed = seed

    def run_chain(self, target: int) -> float:
        print(f"chain started: {target} proposals to accept", flush=True)
        state = self.seed
        x, total = 0.0, 0.0
        accepted = proposals = 0
        while accepted < target:
            state = (state * 6364136223846793005 + 1442695040888963407) % MOD
            step = ((state >> 11) / 9007199254740992.0 - 0.5) * 2.0
            state = (state * 6364136223846793005 + 1442695040888963407) % MOD
            u = (state >> 11) / 9007199254740992.0
            y = x + step
            proposals += 1
            if u < math.exp(0.5 * (x * x - y * y)):
                x = y
                accepted += 1
                total += x
        return total / accepted


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    sampler = Sampler.remote(7)
    print(f"mean {ray.get(sampler.run_chain.remote(TARGET)):.4f}", flush=True)


if __name__ == "__main__":
    main()
