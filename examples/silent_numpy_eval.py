"""A healthy trainer whose evaluation, after 40 logged steps, is minutes of silent numpy work.

Scenario
    A ``Trainer`` actor fits a two-layer classifier with numpy: 40 short SGD steps, each logged
    (``step N loss X``), then a full evaluation on a large held-out set — thousands of batches
    of matrix products, a softmax and an argmax each — that prints nothing until it ends, minutes
    later. The driver waits in ``ray.get`` on ``Trainer.fit``. The job ends successfully.

Mechanism
    Nothing is wrong. The evaluation burns a core in numpy under ``Trainer.evaluate``: no bytes
    written, no log line, no task finishing for minutes. Its thread is ``(active+gil)`` in job
    code in every sample, but it is never at the same place for long: the loop goes from one
    batch to the next (``for i in range(...)``: its index advances), through the matrix-product
    lines, the job's ``softmax`` and numpy's ``argmax``.

What misleads
    A silent log after steady ``step N`` lines, a busy thread in job code at 100 % CPU and a
    driver blocked on it: the shape of a ``busy-loop`` hang, and a one-second window cannot tell
    a loop that never ends from one that is long. Wrong: the loop iterates, its stack moves, and
    its state advances between samples — a computation, not a hang.

Expected diagnosis
    ``no-hang`` (the trainer computes: its stack moves between samples) or ``inconclusive`` with
    what was seen — never ``hang``.
"""

import os

import numpy as np
import ray

EXPECTED = {
    "verdict": "no-hang",
    "verdicts": ["no-hang", "inconclusive"],
    "pattern": None,
    "culprits": [],
    "ready": "step 39 loss",
    "notes": "healthy: Trainer.fit logs 40 SGD steps, then Trainer.evaluate runs ~3 min of silent numpy "
    "batches (matmul, softmax, argmax); the driver waits in ray.get on fit.",
}

DIM, HIDDEN, CLASSES = 512, 512, 10
TRAIN_STEPS = 40
EVAL_BATCHES = 3000
BATCH = 1024
# One BLAS thread: the machine's other cores are not this job's (and py-spy reads one thread).
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


@ray.remote(num_cpus=0.1, runtime_env={"env_vars": ONE_THREAD})
class Trainer:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.w1 = self.rng.standard_normal((DIM, HIDDEN)) * 0.05
        self.w2 = self.rng.standard_normal((HIDDEN, CLASSES)) * 0.05
        self.true_w = self.rng.standard_normal((DIM, CLASSES))

    def _batch(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        x = self.rng.standard_normal((n, DIM))
        return x, (x @ self.true_w).argmax(axis=1)

    def fit(self) -> dict:
        for step in range(TRAIN_STEPS):
            x, y = self._batch(128)
            h = np.tanh(x @ self.w1)
            p = softmax(h @ self.w2)
            loss = float(-np.log(p[np.arange(len(y)), y] + 1e-9).mean())
            grad = p
            grad[np.arange(len(y)), y] -= 1.0
            self.w2 -= 0.1 * h.T @ grad / len(y)
            print(f"step {step} loss {loss:.4f}", flush=True)
        return {"accuracy": self.evaluate()}

    def evaluate(self) -> float:
        correct = 0
        for _batch_no in range(EVAL_BATCHES):
            x, y = self._batch(BATCH)
            h = np.tanh(x @ self.w1)
            p = softmax(h @ self.w2)
            correct += int((np.argmax(p, axis=1) == y).sum())
        return correct / (EVAL_BATCHES * BATCH)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    trainer = Trainer.remote(0)
    print("READY: fit logs 40 steps, then evaluates for minutes without a line", flush=True)
    print(ray.get(trainer.fit.remote()), flush=True)


if __name__ == "__main__":
    main()
