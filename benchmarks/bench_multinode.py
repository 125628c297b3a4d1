#!/usr/bin/env python3
"""Benchmark: the whole diagnosis of a hang spread over many loopback nodes, one probe per node.

Starts a private loopback cluster of --nodes nodes (ray.cluster_utils.Cluster: the head plus
nodes added from Python; GCS on --port, dashboard on 8300+(port-6400) as localcluster.start(port)
would, dashboard agents on 52000+4*(port-6400)+i (past 4 nodes: port+1's slots), temp dir
/tmp/rdh_bench_mn_<port>; it kills only its own processes and never runs `ray stop`). Each node
has 1 CPU and a custom resource `n<i>`. One job: --actors actors (num_cpus=0, pinned round-robin
to the nodes by their resource) each blocked in `ray.get` on one poller actor on the head, whose
method never returns (the shape of `bench_diagnose.py --poller`), plus the driver: actors + 2
processes. Once every call runs and is older than the diagnosis'
fresh-task window, it measures in the same run:

  (a) scripts/diagnose_ray_hang.sh ADDRESS OUT, as a user runs it (fresh interpreter), --repeat
      times: wall time (median), phase times (diagnosis.json `collection.timings`), and each
      node's own probe time (stacks.json `meta.probe_seconds`): the max per node against their
      sum shows the probes running in parallel;
  (b) collect_stacks in-process on the same targets (2 samples 1 s apart, as the diagnosis):
      the local fast path (every node's raylet runs here), the same with one probe at a time
      (max_in_flight=1, the sequential reference), the same with the py-spy bound per probe only
      (as before the process-wide MAX_PARALLEL_DUMPS: 8 nodes x 8 dumps at once), and the forced
      ray-task path (one pinned helper task per node, as for remote nodes), cold (driver connect
      included) and warm;
  (c) a bare sequential `py-spy dump --pid PID` of every process.

Load average and available memory are read before and after. Not a test: the numbers depend
on the machine and its load. Progress goes to stderr; a table (or --json) to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from debug_hang.collect.address import ClusterAddress  # noqa: E402
from debug_hang.localcluster import kill_by_cmdline, submit_job  # noqa: E402
from debug_hang.pipeline import FRESH_TASK_S  # noqa: E402
from debug_hang.probe.pyspy import DumpOptions, find_pyspy  # noqa: E402
from debug_hang.timeouts import Deadline  # noqa: E402

JOB = '''
import os, threading, ray
ray.init()

@ray.remote(num_cpus=0, resources={"n0": 0.001})
class Poller:
    def wait(self):
        threading.Event().wait()  # never set: every caller waits on it

@ray.remote(num_cpus=0)
class Worker:
    def run(self, poller):
        return ray.get(poller.wait.remote())

nodes, n = int(os.environ["BENCH_NODES"]), int(os.environ["BENCH_ACTORS"])
poller = Poller.remote()
workers = [Worker.options(resources={f"n{i % nodes}": 0.001}).remote() for i in range(n)]
refs = [w.run.remote(poller) for w in workers]
print("READY", flush=True)
ray.get(refs)
'''


def log(message: str) -> None:
    print(f"[bench_multinode] {message}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench_multinode.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=6480, help="GCS port of the private cluster, 6400-7399 (default 6480)")
    p.add_argument("--nodes", type=int, default=8, help="loopback nodes, the head included (default 8)")
    p.add_argument("--actors", type=int, default=96, help="blocked actors, round-robin over the nodes (default 96)")
    p.add_argument("--repeat", type=int, default=5, help="timed runs of the script (default 5)")
    p.add_argument("--in-process-repeat", type=int, default=3,
                   help="timed runs of each in-process collection path (default 3)")
    p.add_argument("--settle", type=float, default=60.0,
                   help="seconds to wait once the job is hung, before timing: starting ~100 workers on "
                   "2 cores leaves the 1-minute load average high for a while (default 60)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    return p


def mem_available_gib() -> float:
    with open("/proc/meminfo", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return round(int(line.split()[1]) / 2**20, 1)
    return -1.0


def load() -> float:
    return round(os.getloadavg()[0], 1)


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(2.0)
    raise SystemExit(f"bench_multinode.py: timed out after {timeout_s:.0f}s waiting for {what}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.nodes < 1 or args.actors < 1 or args.repeat < 1:
        raise SystemExit("bench_multinode.py: --nodes, --actors and --repeat must be positive")
    pyspy = find_pyspy()
    if pyspy is None:
        raise SystemExit("bench_multinode.py: py-spy not found")
    tmp = f"/tmp/rdh_bench_mn_{args.port}"
    markers = (tmp.encode(), f"127.0.0.1:{args.port}".encode(), f"--gcs_server_port={args.port}".encode())
    kill_by_cmdline(markers)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    os.environ.update(RAY_TMPDIR=tmp, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
    from ray.cluster_utils import Cluster

    if not 6400 <= args.port < 7400:
        raise SystemExit("bench_multinode.py: --port must be in 6400-7399 (the other ports are derived from it)")
    dashboard_port, agent = 8300 + args.port - 6400, 52000 + 4 * (args.port - 6400)
    mem_before = mem_available_gib()
    log(f"starting {args.nodes} loopback nodes on 127.0.0.1:{args.port} (temp dir {tmp}); "
        f"{mem_before} GiB available, load {load()}")
    common = dict(num_cpus=1, node_ip_address="127.0.0.1", object_store_memory=80 * 2**20)
    cluster = Cluster(initialize_head=True, shutdown_at_exit=False, head_node_args=dict(
        common, gcs_server_port=args.port, resources={"n0": 1}, dashboard_host="127.0.0.1",
        dashboard_port=dashboard_port, include_dashboard=True, dashboard_agent_listen_port=agent))
    try:
        for i in range(1, args.nodes):
            # One at a time: nodes of one session pick their file names by looking at what exists.
            cluster.add_node(**common, resources={f"n{i}": 1}, dashboard_agent_listen_port=agent + i)
        # The in-process driver prints cluster warnings to stdout: keep stdout for the figures.
        with contextlib.redirect_stdout(sys.stderr):
            figures = run(args, dashboard_port, pyspy, tmp, mem_before)
    finally:
        import ray

        ray.shutdown()
        try:
            cluster.shutdown()  # type: ignore[no-untyped-call]
        except Exception:  # noqa: BLE001 - the sweep below finishes the job
            pass
        kill_by_cmdline(markers)
    print(json.dumps(figures, indent=1) if args.json else render(figures))
    return 0


def run(args: argparse.Namespace, dashboard_port: int, pyspy: str, tmp: str, mem_before: float) -> dict[str, Any]:
    from ray.job_submission import JobSubmissionClient

    from debug_hang.collect.state import DashboardClient

    dashboard = f"http://127.0.0.1:{dashboard_port}"
    gcs = f"127.0.0.1:{args.port}"
    workdir = Path(tempfile.mkdtemp(dir=tmp))
    (workdir / "poller_job.py").write_text(JOB)
    client = JobSubmissionClient(dashboard)
    log(f"submitting {args.actors} actors blocked on one poller over {args.nodes} nodes")
    sub = submit_job(client, entrypoint="python poller_job.py", runtime_env={
        "working_dir": str(workdir), "env_vars": {"BENCH_NODES": str(args.nodes), "BENCH_ACTORS": str(args.actors)}})
    state = DashboardClient(dashboard)

    def running() -> int:
        rows = state.list_state("tasks", [("state", "=", "RUNNING")], detail=False).rows
        return sum(1 for t in rows if t.get("name") == "Worker.run")

    wait_for(lambda: client.get_job_status(sub).is_terminal() or running() >= args.actors, 900,
             f"all {args.actors} Worker.run calls RUNNING")
    if client.get_job_status(sub).is_terminal():
        raise SystemExit(f"bench_multinode.py: the job ended: {client.get_job_logs(sub)[-2000:]}")
    log(f"every call running; load {load()}; settling {args.settle:.0f}s")
    # Older than the diagnosis' fresh-task window, as a real hang is, and past the workers' start-up.
    time.sleep(max(FRESH_TASK_S + 1, args.settle))
    mem_job = mem_available_gib()
    log(f"hung: {mem_before - mem_job:.1f} GiB taken by the cluster and job; load {load()}")

    figures: dict[str, Any] = {"nodes": args.nodes, "actors": args.actors, "cores": os.cpu_count(),
                               "mem_available_gib": {"before": mem_before, "hung": mem_job}}
    figures["script"] = time_script(gcs, args.repeat)
    figures["in_process"] = time_in_process(args, gcs, dashboard, sub)
    job = next(j for j in state.get("/api/jobs/") if j.get("submission_id") == sub)
    figures["bare_pyspy"] = time_bare(pyspy, figures["script"]["pids"])
    del figures["script"]["pids"]
    figures["driver_pid"] = (job.get("driver_info") or {}).get("pid")
    client.stop_job(sub)
    return figures


def time_script(gcs: str, repeat: int) -> dict[str, Any]:
    """(a): the script, `repeat` times; phase times and per-node probe times of each run."""
    env = {**os.environ, "RAY_ADDRESS": gcs}
    load_before = load()
    walls: list[float] = []
    phases: list[dict[str, float]] = []
    per_node: list[dict[str, float]] = []
    verdicts: set[str] = set()
    pids: set[int] = set()
    paths: set[str] = set()
    errors: list[int] = []
    for i in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            start = time.monotonic()
            proc = subprocess.run([str(ROOT / "scripts" / "diagnose_ray_hang.sh"), gcs, out],
                                  capture_output=True, text=True, env=env, timeout=300, check=False)
            walls.append(time.monotonic() - start)
            if proc.returncode != 0:
                raise SystemExit(f"bench_multinode.py: the script failed ({proc.returncode}): {proc.stderr[-1500:]}")
            doc = json.loads((Path(out) / "diagnosis.json").read_text())
            stacks = json.loads((Path(out) / "stacks.json").read_text())
        verdicts.add(doc["verdict"])
        phases.append(doc["collection"].get("timings") or {})
        meta = stacks.get("meta") or {}
        per_node.append({k: float(v) for k, v in (meta.get("probe_seconds") or {}).items()})
        paths.update((meta.get("paths") or {}).values())
        errors.append(len(doc["collection"]["errors"]))
        pids = {p["pid"] for p in stacks["processes"]}
        log(f"script run {i + 1}: {walls[-1]:.2f}s, stacks phase {phases[-1].get('stacks')}s, "
            f"{len(pids)} processes, per-node max {max(per_node[-1].values(), default=0):.2f}s "
            f"sum {sum(per_node[-1].values()):.2f}s, verdict {doc['verdict']}")
    names = list(dict.fromkeys(k for ph in phases for k in ph))
    return {
        "runs_s": [round(w, 2) for w in walls], "median_s": round(statistics.median(walls), 2),
        "phase_medians_s": {k: round(statistics.median(ph.get(k, 0.0) for ph in phases), 2) for k in names},
        "per_node_probe_s": _per_node_summary(per_node), "verdicts": sorted(verdicts), "paths": sorted(paths),
        "processes": len(pids), "errors": errors, "pids": sorted(pids),
        "load_before": load_before, "load_after": load(),
    }


def _per_node_summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    """Median over runs of: the slowest node's probe, the sum over nodes, and their ratio."""
    maxes = [max(r.values(), default=0.0) for r in runs]
    sums = [sum(r.values()) for r in runs]
    return {"nodes": statistics.median(len(r) for r in runs), "max_median_s": round(statistics.median(maxes), 2),
            "sum_median_s": round(statistics.median(sums), 2),
            "min_median_s": round(statistics.median(min(r.values(), default=0.0) for r in runs), 2)}


def time_in_process(args: argparse.Namespace, gcs: str, dashboard: str, sub: str) -> dict[str, Any]:
    """(b): collect_stacks on the job's targets: local, local one probe at a time, forced ray-task."""
    from debug_hang.collect import stacks as stacks_module
    from debug_hang.collect.stacks import collect_stacks, select_targets
    from debug_hang.collect.state import DashboardClient

    state = DashboardClient(dashboard)
    job = next(j for j in state.get("/api/jobs/") if j.get("submission_id") == sub)
    actors = state.list_state("actors", [("job_id", "=", job["job_id"])]).rows
    tasks = state.list_state("tasks", [("job_id", "=", job["job_id"])]).rows
    nodes = state.list_state("nodes", []).rows
    targets = select_targets(job, actors, tasks, nodes)
    address = ClusterAddress("127.0.0.1", args.port)
    expected = len(targets)

    def collect(max_in_flight: int = 32) -> tuple[float, Any]:
        start = time.monotonic()
        coll = collect_stacks(address, targets, DumpOptions(), Deadline(120), samples=2, interval_s=1.0,
                              max_in_flight=max_in_flight)
        seconds = time.monotonic() - start
        dumped = {(p.node_id, p.pid) for p in coll.processes}
        assert len(dumped) >= expected and not coll.errors, (len(dumped), expected, coll.errors[:3])
        return seconds, coll

    def series(label: str, n: int, max_in_flight: int = 32) -> dict[str, Any]:
        load_before = load()
        walls, per_node = [], []
        for _ in range(n):
            seconds, coll = collect(max_in_flight)
            walls.append(seconds)
            per_node.append(dict(coll.probe_seconds))
        log(f"{label}: {[round(w, 2) for w in walls]} s, paths {sorted(set(coll.paths.values()))}")
        return {"runs_s": [round(w, 2) for w in walls], "median_s": round(statistics.median(walls), 2),
                "per_node_probe_s": _per_node_summary(per_node), "load_before": load_before, "load_after": load()}

    out: dict[str, Any] = {"targets": expected}
    out["local"] = series("local fast path", args.in_process_repeat)
    out["local_one_at_a_time"] = series("local, max_in_flight=1", 1, max_in_flight=1)
    # As before the process-wide dump bound: each local probe its own 8 dumps, 64 at once here.
    from debug_hang.probe import pyspy as pyspy_module

    bounded = pyspy_module._SLOTS
    pyspy_module._SLOTS = pyspy_module.DumpSlots(10_000)
    try:
        out["local_unbounded_dumps"] = series("local, no process-wide dump bound", args.in_process_repeat)
    finally:
        pyspy_module._SLOTS = bounded
    real = getattr(stacks_module, "local_raylets")  # noqa: B009 - patched below
    setattr(stacks_module, "local_raylets", lambda: {})  # noqa: B010 - force the ray-task path
    try:
        cold = series("ray-task path, cold (driver connect included)", 1)
        out["ray_task_cold_s"] = cold["median_s"]
        out["ray_task"] = series("ray-task path, warm", args.in_process_repeat)
    finally:
        setattr(stacks_module, "local_raylets", real)  # noqa: B010
    return out


def time_bare(pyspy: str, pids: list[int]) -> dict[str, Any]:
    """(c): one bare `py-spy dump` per process, sequentially."""
    times = []
    for pid in pids:
        start = time.monotonic()
        subprocess.run([pyspy, "dump", "--pid", str(pid)], capture_output=True, timeout=60, check=False)
        times.append(time.monotonic() - start)
    return {"processes": len(pids), "sum_s": round(sum(times), 2),
            "mean_ms": round(1000 * statistics.mean(times), 1) if times else 0.0}


def render(f: dict[str, Any]) -> str:
    s, ip = f["script"], f["in_process"]
    pn = s["per_node_probe_s"]
    lines = [
        f"{s['processes']} processes ({f['actors']} actors blocked on one poller + the poller + the driver) "
        f"over {f['nodes']} loopback nodes, {f['cores']} cores; memory available "
        f"{f['mem_available_gib']['before']} GiB before, {f['mem_available_gib']['hung']} GiB with the job",
        "",
        f"{'figure':62} {'value':>10}  load before -> after",
        f"{'(a) script, address -> report (median of ' + str(len(s['runs_s'])) + ')':62} {s['median_s']:>9.2f}s  "
        f"{s['load_before']} -> {s['load_after']}   runs {s['runs_s']}",
        f"{'    phases (medians)':62} {json.dumps(s['phase_medians_s'])}",
        f"{'    per-node probe: slowest node / sum over nodes (medians)':62} {pn['max_median_s']:>9.2f}s  "
        f"/ {pn['sum_median_s']:.2f}s over {pn['nodes']:.0f} nodes (fastest {pn['min_median_s']:.2f}s); "
        f"paths {s['paths']}, verdicts {s['verdicts']}, errors per run {s['errors']}",
    ]
    for key, label in (("local", "(b) collect_stacks, local fast path"),
                       ("local_one_at_a_time", "(b) collect_stacks, local, one probe at a time"),
                       ("local_unbounded_dumps", "(b) local, dumps bounded per probe only (as before)"),
                       ("ray_task", "(b) collect_stacks, forced ray-task path, warm")):
        row = ip[key]
        lines.append(f"{label + ' (median of ' + str(len(row['runs_s'])) + ')':62} {row['median_s']:>9.2f}s  "
                     f"{row['load_before']} -> {row['load_after']}   per-node max {row['per_node_probe_s']['max_median_s']}s, "
                     f"sum {row['per_node_probe_s']['sum_median_s']}s")
    lines.append(f"{'(b) collect_stacks, forced ray-task path, cold':62} {ip['ray_task_cold_s']:>9.2f}s")
    b = f["bare_pyspy"]
    lines.append(f"{'(c) bare py-spy dump, sequential, ' + str(b['processes']) + ' processes':62} {b['sum_s']:>9.2f}s  "
                 f"mean {b['mean_ms']} ms")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
