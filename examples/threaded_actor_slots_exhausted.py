"""A threaded actor whose every thread waits on a call to itself: no thread is left to run it.

Scenario
    A ``Featurizer`` actor (``max_concurrency=2``) serves ``featurize`` requests; each one asks
    the actor itself, through its own handle, for the vocabulary (``vocab``) and waits with
    ``ray.get``. The driver sends two requests at once and waits for both.

Mechanism
    The actor runs at most two calls at once. Both threads run ``featurize``, each blocked in
    ``ray.get`` on a ``vocab`` call to the same actor; those calls are queued
    (SUBMITTED_TO_WORKER, no worker pid) until a thread comes free, and no thread ever does: the
    two running calls wait for the queued ones, which wait for a slot the running ones hold. A
    cycle inside one actor, across Ray's call queue.

What misleads
    "The actor is threaded, so a self-call can run": only while a slot is free. Here every slot
    is held by a waiter, and nothing on the stacks computes.

Expected diagnosis
    ``actor-call-cycle`` (self-call): both threads of Featurizer wait in ``ray.get`` on
    ``Featurizer.vocab`` calls queued on the same actor, and no thread of it is free or running
    other work. Culprit: Featurizer. The driver is a victim.
"""

import os

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "actor-call-cycle",
    "culprits": [{"class_name": "Featurizer", "rank": None}],
    "notes": "Featurizer (max_concurrency=2): two featurize calls hold both threads, each in "
    "ray.get(self_handle.vocab.remote()); the vocab calls are queued behind them forever.",
}


@ray.remote(num_cpus=0.1, max_concurrency=2)
class Featurizer:
    def __init__(self):
        self.me = ray.get_runtime_context().current_actor
        self.words = {w: i for i, w in enumerate("the a of to in and is it".split())}

    def vocab(self) -> dict:
        return dict(self.words)

    def featurize(self, text: str) -> list:
        words = ray.get(self.me.vocab.remote())
        return [words.get(w, -1) for w in text.split()]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    f = Featurizer.remote()
    refs = [f.featurize.remote(text) for text in ("the cat is in the hat", "a tale of two cities")]
    print("READY: two Featurizer.featurize calls hold both threads, each waiting on Featurizer.vocab", flush=True)
    print(ray.get(refs), flush=True)


if __name__ == "__main__":
    main()
