"""Reproduction: a Ray Train worker killed mid-step; the controller side is dumped.

`python ray_train_worker_killed.py record [--v1]` starts a loopback cluster on
$DEBUG_HANG_TEST_PORT (default 6411), runs this file as a driver (`driver` mode): a TorchTrainer
with 2 gloo workers that all_reduce every step; once both ranks train, rank 1's worker process is
SIGKILLed (the OOM killer's way), and every other actor and the driver are dumped by debug-hang's
node probe just before and just after the kill into ../ray_train_worker_killed[_v1]/
{before,after}_kill.json (Ray Train notices the death within a second and fails the run: the
dumps show the controller side waiting on the workers before it does). With --v1 the legacy Ray
Train (RAY_TRAIN_V2_ENABLED=0: BackendExecutor inside a Tune trial, the form of
ray-project/ray#22349) runs instead of the v2 TrainController. The cluster is stopped at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def train_func(config: dict[str, str]) -> None:
    import ray.train
    import torch
    import torch.distributed as dist

    rank = ray.train.get_context().get_world_rank()
    Path(config["piddir"], f"rank{rank}.pid").write_text(str(os.getpid()))
    weights = torch.zeros(8)
    for step in range(100000):
        grad = torch.ones(8) * (rank + 1)
        dist.all_reduce(grad)  # the step's gradient sync
        weights -= 0.01 * grad
        time.sleep(0.2)
        if step % 10 == 9:
            ray.train.report({"step": step, "w0": float(weights[0])})


def driver(piddir: str) -> None:
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    ray.init()
    trainer = TorchTrainer(train_func, train_loop_config={"piddir": piddir},
                           scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
                           torch_config=TorchConfig(backend="gloo"),
                           run_config=RunConfig(name="worker_killed", storage_path=piddir))
    trainer.fit()


def record(v1: bool) -> None:
    sys.path.insert(0, str(HERE.parents[3]))
    from debug_hang import localcluster
    try:
        from debug_hang.probe.node_probe import probe_node  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from debug_hang.node_probe import probe_node  # type: ignore[import-not-found,no-redef,unused-ignore]

    port = int(os.environ.get("DEBUG_HANG_TEST_PORT", "6411"))
    cluster = localcluster.start(port, num_cpus=4)
    piddir = tempfile.mkdtemp(prefix="rt_killed_")
    env = cluster.env()
    env["RAY_TRAIN_V2_ENABLED"] = "0" if v1 else "1"
    env["GLOO_SOCKET_IFNAME"] = "lo"
    log = open(Path(piddir, "driver.out"), "w")
    drv = subprocess.Popen([sys.executable, __file__, "driver", piddir], env=env, stdout=log,
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        localcluster.wait_for(lambda: all(Path(piddir, f"rank{r}.pid").exists() for r in (0, 1)) or None,
                              180, "both ranks to start")
        time.sleep(3.0)
        victim = int(Path(piddir, "rank1.pid").read_text())
        from ray.util.state import list_actors

        actors = list_actors(address=cluster.dashboard, filters=[("state", "=", "ALIVE")], limit=100)
        pids = sorted({drv.pid, *(a.pid for a in actors if a.pid and a.pid != victim)})
        before = probe_node("local", pids, {}, samples=1, children=False)
        os.kill(victim, signal.SIGKILL)
        probed = probe_node("local", pids, {}, samples=1, children=False)
        names = {a.pid: a.class_name for a in actors}
        out = HERE.parent / ("ray_train_worker_killed_v1" if v1 else "ray_train_worker_killed")
        out.mkdir(exist_ok=True)
        how = (f"ray_train_worker_killed.py record{' --v1' if v1 else ''}: rank 1 (pid {victim}) SIGKILLed "
               f"just before the dump; actors {sorted(names.items())}; driver pid {drv.pid}")
        for name, got, when in (("before_kill", before, "just before the kill"), ("after_kill", probed, "just after it")):
            doc = {"schema": "debug-hang/stacks/v1", "meta": {"how": f"{how} (this dump: {when})"},
                   "processes": got["processes"]}
            (out / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print("wrote", out, how)
    finally:
        os.killpg(drv.pid, signal.SIGKILL)
        drv.wait(timeout=30)
        localcluster.stop(cluster)


if __name__ == "__main__":
    if sys.argv[1:2] == ["driver"]:
        driver(sys.argv[2])
    elif sys.argv[1:2] == ["record"]:
        record("--v1" in sys.argv)
    else:
        raise SystemExit(__doc__)
