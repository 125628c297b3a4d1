"""Ray Train (TorchTrainer, DDP on gloo) where only rank 0 calls ray.train.report.

Scenario
    A ``TorchTrainer`` with two workers trains a small model with DDP. The checkpointing code was
    ported from a single-writer framework: "only rank 0 saves", so the whole block, including
    ``ray.train.report(metrics, checkpoint=...)``, sits under ``if rank == 0:``.

Mechanism
    In Ray Train, ``ray.train.report`` is a barrier: it first agrees on the checkpoint folder
    across all workers through the run's ``SynchronizationActor`` (one
    ``broadcast_from_rank_zero`` call per rank, returned when every rank has called it). After
    epoch 0, rank 0 prints ``rank 0: saving checkpoint for epoch 0`` and waits in
    ``ray.train.report`` for rank 1, which never calls it: rank 1 goes on to epoch 1, where its
    first DDP step waits in a collective for rank 0 (the gradient all-reduce at the end of
    ``loss.backward()``, or the bucket rebuild in DDP's forward). Each rank waits for the other
    through a different mechanism; nothing errors. Ray Train prints the missing ranks only after
    60 s (RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S).

What misleads
    Rank 1 waits in DDP and rank 0 in ``ray.train.report``, which looks like a DDP or network
    problem, and Ray Train prints nothing for 60 s. Wrong: ``ray.train.report`` is a barrier
    across all workers; under ``if rank == 0:`` rank 1 never joins it, and each rank waits for
    the other through a different mechanism.

Expected diagnosis
    ``train-barrier-skipped``: a cycle rank 0 (``ray-get-wait`` in ``ray.train.report``) →
    SynchronizationActor (``train-barrier-wait``: a call from rank 0, none from rank 1) → rank 1
    (``ddp-wait`` in ``loss.backward()`` or DDP's forward) → rank 0. Culprit: RayTrainWorker
    rank 1, the rank that skipped the barrier.
"""

import os
import tempfile

import ray
import ray.train
import torch
from ray.train import Checkpoint, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_model

EXPECTED = {
    "verdict": "hang",
    "pattern": "train-barrier-skipped",
    "culprits": [{"class_name": "RayTrainWorker", "rank": 1}],
    "notes": "`if rank == 0: ray.train.report(...)`: rank 0 waits in the SynchronizationActor's "
    "barrier for rank 1; rank 1 waits in its first DDP step of epoch 1 (backward's gradient "
    "all-reduce) for rank 0. A cycle across two mechanisms; no error.",
    "ready": "saving checkpoint for epoch 0",
    "needs": ["ray.train"],  # pip install "debug-hang[train]" (or "ray[train]")
}

CONFIG = {"epochs": 5, "batch_size": 32, "in_features": 8, "lr": 0.05, "seed": 0}


def train_func(config: dict) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(config["seed"])
    rank = ray.train.get_context().get_world_rank()
    model = prepare_model(torch.nn.Linear(config["in_features"], 1))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    g = torch.Generator().manual_seed(config["seed"] * 100 + rank)
    x_train = torch.randn(128, config["in_features"], generator=g)
    y_train = x_train.sum(dim=1, keepdim=True)
    for epoch in range(config["epochs"]):
        for start in range(0, len(x_train), config["batch_size"]):
            xb, yb = x_train[start : start + config["batch_size"]], y_train[start : start + config["batch_size"]]
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        # Only rank 0 saves (the rule carried over from a single-writer framework).
        if rank == 0:
            print(f"rank 0: saving checkpoint for epoch {epoch}", flush=True)
            with tempfile.TemporaryDirectory() as folder:
                torch.save(model.module.state_dict(), os.path.join(folder, "model.pt"))
                ray.train.report({"epoch": epoch, "loss": loss.item()}, checkpoint=Checkpoint.from_directory(folder))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    trainer = TorchTrainer(
        train_func,
        train_loop_config=CONFIG,
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False, resources_per_worker={"CPU": 0.5}),
        run_config=RunConfig(storage_path=tempfile.mkdtemp(prefix="ray_train_report_rank0_"), name="report_rank0"),
    )
    print("starting TorchTrainer.fit() with 2 DDP workers (gloo)", flush=True)
    result = trainer.fit()
    print(f"training finished: {result.metrics}", flush=True)


if __name__ == "__main__":
    main()
