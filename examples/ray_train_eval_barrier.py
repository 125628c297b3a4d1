"""Ray Train (TorchTrainer, DDP on gloo): a barrier inside rank 0's evaluation branch.

Scenario
    Two DDP workers train; after every epoch rank 0 evaluates on a held-out set and the code
    means to keep the ranks together afterwards with ``dist.barrier()``. The barrier was
    indented one level too far, into the ``if rank == 0:`` evaluation block.

Mechanism
    After epoch 0, rank 0 evaluates, prints ``rank 0: eval after epoch 0 ...`` and enters
    ``dist.barrier()``; rank 1 skips the block and starts epoch 1, where DDP's backward waits
    for the gradient all-reduce. gloo pairs collectives by call order: rank 0's barrier and rank
    1's all-reduce never match, and both wait (Ray Train's default timeout is 30 minutes). No
    rank finished, no error.

What misleads
    With two ranks there is no majority, and rank 1 in ``loss.backward()`` looks like the slow
    one. Wrong: DDP's collectives run on every rank every step, so the rank in an explicit
    ``dist.barrier()`` - indented into rank 0's evaluation block - is the odd one.

Expected diagnosis
    ``collective-mismatch``: rank 0 in ``barrier`` (called from ``train_func``), rank 1 in
    ``ddp-wait`` (``loss.backward()``). With two ranks there is no majority; DDP's collectives
    run on every rank every step, so the rank in the explicit ``barrier`` is the odd one.
    Culprit: RayTrainWorker rank 0.
"""

import os
import tempfile

import ray
import ray.train
import torch
import torch.distributed as dist
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_model

EXPECTED = {
    "verdict": "hang",
    "pattern": "collective-mismatch",
    "culprits": [{"class_name": "RayTrainWorker", "rank": 0}],
    "notes": "dist.barrier() indented into `if rank == 0:` (evaluation): rank 0 in barrier, rank 1 "
    "in DDP's backward all-reduce of the next epoch; a tie broken by DDP being the common path.",
    "ready": "rank 0: eval after epoch 0",
    "needs": ["ray.train"],  # pip install "debug-hang[train]" (or "ray[train]")
}

CONFIG = {"epochs": 4, "batch_size": 32, "in_features": 8, "lr": 0.05, "seed": 0}


def evaluate(model, x_val, y_val) -> float:
    with torch.no_grad():
        return torch.nn.functional.mse_loss(model(x_val), y_val).item()


def train_func(config: dict) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(config["seed"])
    rank = ray.train.get_context().get_world_rank()
    model = prepare_model(torch.nn.Linear(config["in_features"], 1))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    g = torch.Generator().manual_seed(config["seed"] * 100 + rank)
    x = torch.randn(128, config["in_features"], generator=g)
    y = x.sum(dim=1, keepdim=True)
    x_val, y_val = x[:32], y[:32]
    for epoch in range(config["epochs"]):
        for start in range(0, len(x), config["batch_size"]):
            loss = torch.nn.functional.mse_loss(model(x[start : start + config["batch_size"]]),
                                                y[start : start + config["batch_size"]])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"rank 0: eval after epoch {epoch}: val_loss {evaluate(model, x_val, y_val):.4f}", flush=True)
            dist.barrier()  # meant for all ranks, after the evaluation block


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    trainer = TorchTrainer(
        train_func,
        train_loop_config=CONFIG,
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False, resources_per_worker={"CPU": 0.5}),
        run_config=RunConfig(storage_path=tempfile.mkdtemp(prefix="ray_train_eval_barrier_"), name="eval_barrier"),
    )
    print("starting TorchTrainer.fit() with 2 DDP workers (gloo)", flush=True)
    result = trainer.fit()
    print(f"training finished: {result.metrics}", flush=True)


if __name__ == "__main__":
    main()
