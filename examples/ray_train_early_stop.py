"""Ray Train (TorchTrainer, DDP on gloo) where one rank stops early on its own validation loss.

Scenario
    A ``TorchTrainer`` with two workers fine-tunes a small regression model. ``prepare_model``
    wraps it in DistributedDataParallel; each rank trains on its own shard and, to save time,
    checks early stopping after every epoch on *its own* validation shard (patience 2, min delta
    1e-3), the way single-process training code does.

Mechanism
    Rank 1's validation shard is clean: its loss falls under 1e-3 after epoch 5, so rank 1 leaves
    its epoch loop (it prints ``rank 1: early stop at epoch 5 (val_loss 0.00085)``) and its train
    function returns. Rank 0 (noisy shard, still improving) goes on to epoch 6 and calls
    ``loss.backward()``: DDP's backward ends by waiting for the gradient all-reduce of every
    bucket, which rank 1 will never join. Rank 0 waits in ``_engine_run_backward`` at 0% CPU; the TrainController polls both workers
    every second (rank 1 "finished", rank 0 "running") and waits for the group to end; the
    driver waits in ``trainer.fit()``. No error for 30 minutes (TorchConfig's timeout_s).

What misleads
    Rank 0 is in ``loss.backward()`` with no ``all_reduce`` on its stack, which reads as slow
    compute; ``poll_status`` calls FINISH every second, which reads as progress. Wrong: DDP's
    backward ends in the gradient all-reduce (at 0% CPU it is a collective wait), the polls are
    Ray Train's own, and rank 1's train function returned early on its own validation loss.

Expected diagnosis
    ``collective-skipped``: RayTrainWorker rank 0 in ``ddp-wait`` (``loss.backward()``
    line of ``train_func``); RayTrainWorker rank 1 is in no collective, its training thread gone.
    Culprit: RayTrainWorker rank 1 (its log's last line is the early stop). Ranks come from the
    controller's log, since Ray Train sets RANK inside the worker process. Chain: driver →
    TrainController.run → rank 0 → rank 1.
"""

import os
import tempfile

import ray
import ray.train
import torch
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_model

EXPECTED = {
    "verdict": "hang",
    "pattern": "collective-skipped",
    "culprits": [{"class_name": "RayTrainWorker", "rank": 1}],
    "notes": "rank-local early stopping: rank 1 leaves the epoch loop after epoch 5 and its train "
    "function returns; rank 0 waits in loss.backward() for DDP's gradient all-reduce (gloo). "
    "Ray Train's controller polls both workers and waits; the driver waits in trainer.fit().",
    "ready": "early stop at epoch",  # the hang sets in when rank 1 leaves its loop
    "needs": ["ray.train"],  # pip install "debug-hang[train]" (or "ray[train]")
}

CONFIG = {
    "epochs": 50,
    "batch_size": 32,
    "in_features": 8,
    "lr": 0.05,
    "patience": 2,
    "min_delta": 1e-3,
    # Noise in each rank's validation shard: rank 1's is clean, so it plateaus first.
    "val_noise": [0.5, 0.0],
    "seed": 0,
}


def make_shard(rank: int, noise: float, seed: int, n: int, in_features: int):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    x = torch.randn(n, in_features, generator=g)
    y = x.sum(dim=1, keepdim=True) + noise * torch.randn(n, 1, generator=g)
    return x, y


def train_func(config: dict) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(config["seed"])
    rank = ray.train.get_context().get_world_rank()
    model = prepare_model(torch.nn.Linear(config["in_features"], 1))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    x_train, y_train = make_shard(rank, 0.1, seed=1, n=256, in_features=config["in_features"])
    x_val, y_val = make_shard(rank, config["val_noise"][rank], seed=2, n=64, in_features=config["in_features"])
    best, stale = float("inf"), 0
    for epoch in range(config["epochs"]):
        for start in range(0, len(x_train), config["batch_size"]):
            xb = x_train[start : start + config["batch_size"]]
            yb = y_train[start : start + config["batch_size"]]
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            val_loss = torch.nn.functional.mse_loss(model(x_val), y_val).item()
        # Early stopping on this rank's own validation loss (not agreed across ranks).
        if val_loss < best - config["min_delta"]:
            best, stale = val_loss, 0
        else:
            stale += 1
        if stale >= config["patience"] or val_loss < 1e-3:
            print(f"rank {rank}: early stop at epoch {epoch} (val_loss {val_loss:.5f})", flush=True)
            break


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    trainer = TorchTrainer(
        train_func,
        train_loop_config=CONFIG,
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False, resources_per_worker={"CPU": 0.5}),
        run_config=RunConfig(storage_path=tempfile.mkdtemp(prefix="ray_train_early_stop_"), name="early_stop"),
    )
    print("starting TorchTrainer.fit() with 2 DDP workers (gloo)", flush=True)
    result = trainer.fit()
    print(f"training finished: {result.metrics}", flush=True)


if __name__ == "__main__":
    main()
