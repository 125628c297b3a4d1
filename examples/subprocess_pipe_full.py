"""Evaluation actor waits for a scoring subprocess that waits for the actor to read its output.

Scenario
    An ``Evaluator`` actor scores checkpoints by running an external scoring CLI (here a small
    ``python -c`` program, standing in for a BLEU/ROUGE scorer or a compiled metrics binary)
    with ``stdout=subprocess.PIPE``, waits for it with ``proc.wait()`` and only then parses the
    per-example lines it printed. The ``Trainer`` evaluates after every epoch. The first two
    evaluation sets are small; the third, the full validation set, prints a line per example.

Mechanism
    A pipe holds 64 KiB. The scorer prints ~1.5 MB for the full set, so it blocks in the kernel
    writing to a full pipe (``anon_pipe_write``/``pipe_write``); the actor blocks in
    ``Popen.wait`` until the child exits and reads the pipe only after that. Each waits for the
    other; nothing times out. Small sets fit in the pipe and succeed.

What misleads
    Both processes look idle and the child's stack shows only the ``write`` line of a
    harmless loop, so it reads as "the scorer hangs" (``child-process-hang``) and one would debug
    the scorer. Wrong: the kernel wait of the child (wchan) and the pipe's ends in /proc show
    that the child waits for the parent to read; the line to change is the parent's ``wait()``.

Expected diagnosis
    ``pipe-full-deadlock``: the Evaluator (in ``Popen.wait`` inside ``Evaluator._score``) and
    its child (asleep writing its stdout, a pipe whose read end the Evaluator holds) wait on
    each other. Culprit: Evaluator first (fix: ``communicate()``), then the child. The Trainer
    waits in ray.get on the Evaluator; the driver on the Trainer.
"""

import os
import subprocess
import sys

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "pipe-full-deadlock",
    "culprits": [{"class_name": "Evaluator", "rank": None}],
    "notes": "Evaluator._score runs a scorer with stdout=PIPE and calls proc.wait() before reading; "
    "the full validation set prints ~1.5 MB, the scorer blocks writing the full pipe, the "
    "Evaluator blocks in Popen.wait. Eval sets 0-1 are small and succeed. Trainer in ray.get.",
}

SCORER = r"""
import sys
n = int(sys.argv[1])
for i in range(n):
    sys.stdout.write(f"example {i:07d} score {((i * 7919) % 1000) / 1000:.3f} ref_len {i % 97} hyp_len {i % 89}\n")
sys.stdout.write("done\n")
"""

EVAL_SETS = (200, 500, 30000)  # examples per evaluation; the last prints ~1.5 MB


@ray.remote(num_cpus=0.1)
class Evaluator:
    def _score(self, n: int) -> float:
        proc = subprocess.Popen([sys.executable, "-c", SCORER, str(n)], stdout=subprocess.PIPE, text=True)
        proc.wait()  # waits for the scorer to exit before reading what it printed
        lines = proc.stdout.read().splitlines()
        scores = [float(line.split()[3]) for line in lines if line.startswith("example")]
        return sum(scores) / max(1, len(scores))

    def evaluate(self, epoch: int) -> float:
        return self._score(EVAL_SETS[epoch])


@ray.remote(num_cpus=0.1)
class Trainer:
    def __init__(self, evaluator):
        self.evaluator = evaluator

    def fit(self) -> list:
        history = []
        for epoch in range(len(EVAL_SETS)):
            score = ray.get(self.evaluator.evaluate.remote(epoch))
            history.append(score)
            print(f"[trainer] epoch {epoch}: eval score {score:.4f}", flush=True)
        return history


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    evaluator = Evaluator.remote()
    trainer = Trainer.remote(evaluator)
    print("READY: Trainer.fit -> Evaluator.evaluate -> scorer child (epoch 2 prints ~1.5 MB)", flush=True)
    print(f"history: {ray.get(trainer.fit.remote())}", flush=True)


if __name__ == "__main__":
    main()
