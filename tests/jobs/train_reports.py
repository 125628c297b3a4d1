"""A healthy Ray Train run that reports every epoch, with one long quiet epoch (for the watcher).

Two TorchTrainer workers (gloo, no collective in the loop) call ray.train.report once per
epoch; epoch QUIET_EPOCH takes QUIET seconds with no report and no print, while the Ray Train
controller keeps polling its workers (RayTrainWorker.poll_status tasks keep finishing: not progress).
Usage: python train_reports.py [EPOCHS] [QUIET_SECONDS]
"""

import os
import sys
import tempfile
import time

import ray
import ray.train
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def train_func(config: dict) -> None:
    for epoch in range(config["epochs"]):
        time.sleep(config["quiet"] if epoch == config["epochs"] - 2 else 1.0)
        ray.train.report({"epoch": epoch, "loss": 1.0 / (epoch + 1)})


def main() -> None:
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    quiet = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    trainer = TorchTrainer(
        train_func,
        train_loop_config={"epochs": epochs, "quiet": quiet},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False, resources_per_worker={"CPU": 0.5}),
        run_config=RunConfig(storage_path=tempfile.mkdtemp(prefix="train_reports_"), name="train_reports"),
    )
    print("READY: starting fit()", flush=True)
    result = trainer.fit()
    print(f"DONE: {result.metrics}", flush=True)


if __name__ == "__main__":
    main()
