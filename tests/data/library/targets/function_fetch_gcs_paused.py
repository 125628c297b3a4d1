"""Reproduction: Ray workers waiting for a function definition that cannot be fetched.

`python function_fetch_gcs_paused.py record` starts a loopback cluster on $DEBUG_HANG_TEST_PORT
(default 6411) and runs this file as a driver (`driver` mode): pooled workers are warmed up with
one function, a second one, `decode`, is exported and run once, then the recorder pauses the
cluster's GCS (SIGSTOP: what an overloaded or partitioned GCS looks like to a worker) and the
driver submits more `decode` calls. The pooled workers that get them have never run `decode`: they
must fetch its pickled definition from the GCS function table, and wait in
fetch_registered_method / _wait_for_function (ray-project/ray#45822). Every worker process is
dumped by debug-hang's node probe into ../function_fetch_gcs_paused/processes.json; then the GCS
is resumed and the cluster stopped.
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


def driver(flag_dir: str) -> None:
    import ray

    ray.init()

    @ray.remote(num_cpus=1)
    def warm_up() -> int:
        time.sleep(0.5)
        return os.getpid()

    @ray.remote(num_cpus=1)
    def decode(shard: int) -> int:
        time.sleep(0.5)
        return shard * 2

    print("pool", ray.get([warm_up.remote() for _ in range(4)]), flush=True)
    print("first", ray.get(decode.remote(0)), flush=True)
    Path(flag_dir, "exported").write_text("1")
    while not Path(flag_dir, "paused").exists():
        time.sleep(0.05)
    refs = [decode.remote(i) for i in range(1, 4)]
    print("done", ray.get(refs), flush=True)


def _pids(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return sorted(int(p) for p in out.stdout.split())


def _children(pid: int) -> list[int]:
    """The raylet's Python children: its workers (their titles are rewritten to ray::..., their
    command lines no longer say default_worker.py)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    kids = []
    for child in out.stdout.split():
        try:
            title = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(b"ray::"):
            kids.append(int(child))
    return sorted(kids)


def record() -> None:
    sys.path.insert(0, str(HERE.parents[3]))
    from debug_hang import localcluster
    from debug_hang.probe.node_probe import probe_node

    port = int(os.environ.get("DEBUG_HANG_TEST_PORT", "6411"))
    cluster = localcluster.start(port, num_cpus=4)
    flags = tempfile.mkdtemp(prefix="fn_fetch_")
    log = open(Path(flags, "driver.out"), "w")
    drv = subprocess.Popen([sys.executable, __file__, "driver", flags], env=cluster.env(), stdout=log,
                           stderr=subprocess.STDOUT, start_new_session=True)
    gcs = _pids(f"gcs_server.*--gcs_server_port={port}")[0]
    raylet = _pids(f"raylet.*--gcs-address=127.0.0.1:{port}")[0]
    try:
        localcluster.wait_for(lambda: Path(flags, "exported").exists() or None, 120, "the first call")
        pooled = _children(raylet)
        os.kill(gcs, signal.SIGSTOP)
        Path(flags, "paused").write_text("1")
        time.sleep(2.0)
        pids = sorted(set(pooled) | set(_children(raylet)))
        probed = probe_node("local", pids, {}, samples=1, children=False)
        out = HERE.parent / "function_fetch_gcs_paused"
        out.mkdir(exist_ok=True)
        how = (f"function_fetch_gcs_paused.py record: GCS (pid {gcs}) SIGSTOPped 2 s before the dump, after "
               f"`decode` was exported and run once; 3 more `decode` calls submitted; pooled workers {pooled}, "
               f"dumped {pids}")
        doc = {"schema": "debug-hang/stacks/v1", "meta": {"how": how}, "processes": probed["processes"]}
        (out / "processes.json").write_text(json.dumps(doc, indent=1) + "\n")
        print("wrote", out / "processes.json", how, "errors:", probed["errors"])
    finally:
        os.kill(gcs, signal.SIGCONT)
        os.killpg(drv.pid, signal.SIGKILL)
        drv.wait(timeout=30)
        localcluster.stop(cluster)
        print(Path(flags, "driver.out").read_text()[-600:])


if __name__ == "__main__":
    if sys.argv[1:2] == ["driver"]:
        driver(sys.argv[2])
    elif sys.argv[1:2] == ["record"]:
        record()
    else:
        raise SystemExit(__doc__)
