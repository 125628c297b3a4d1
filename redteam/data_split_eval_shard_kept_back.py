"""The driver splits a dataset for a trainer and an evaluator, but creates the evaluator only after the trainer returns.

Scenario: `train_split, eval_split = ds.streaming_split(2, equal=True)`. The driver starts a Trainer
actor on `train_split` and waits for it (`ray.get(trainer.fit.remote(train_split))`); only then does
it create the Evaluator for `eval_split` ("evaluate once training is done"). The split coordinator
starts an epoch only when the readers of both splits have asked for it (`start_epoch` is a barrier of
all splits): the Trainer's first `iter_batches` waits in the coordinator for the reader of
`eval_split`, which the driver will create only after the Trainer returns. The coordinator logs that
it is "blocked waiting on other clients"; nothing else.

Mechanism: a streaming_split whose other split is kept back by its creator until the first reader
finishes: all splits must be read concurrently.
Truth: hang; culprit the driver (it holds `eval_split` and waits on the Trainer before handing it to a
reader, `ray.get(trainer.fit.remote(...))`); the Trainer in the barrier is a victim. Fix: start both
readers before waiting on either (or split only what is read concurrently: evaluate on a separate
dataset).
"""
# redteam-settle: 15
# redteam-ray-start: --object-store-memory=300000000 --resources='{"rt14_keptback":1}'
import os

import ray


@ray.remote(num_cpus=0.1)
class Trainer:
    def fit(self, shard) -> int:
        print("READY training on the train split", flush=True)
        steps = 0
        for _batch in shard.iter_batches(batch_size=100):
            steps += 1
        return steps


@ray.remote(num_cpus=0.1)
class Evaluator:
    def evaluate(self, shard) -> int:
        return sum(len(b["id"]) for b in shard.iter_batches(batch_size=100))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = ray.data.range(4_000, override_num_blocks=40).map_batches(lambda b: {"id": b["id"] + 1})
    train_split, eval_split = ds.streaming_split(2, equal=True)
    trainer = Trainer.remote()
    steps = ray.get(trainer.fit.remote(train_split))
    evaluator = Evaluator.remote()
    print(steps, ray.get(evaluator.evaluate.remote(eval_split)))


if __name__ == "__main__":
    main()
