#!/usr/bin/env python3
"""Benchmark: full stack collection of a job's processes, batched vs. the seed's per-process path.

Starts a private 2-node loopback cluster (ray.cluster_utils.Cluster; ports from --port, temp
dir /tmp/rdh_bench_<port>), submits a job whose driver creates N actors (default 32), half on each
node (custom resources), each blocked forever in `Stuck.block`, and measures in the same run:

  (a) debug_hang.collect.collect_stacks on the job's targets (State API -> select_targets), one
      sample per process: the local fast path (py-spy straight from this machine) and the forced
      ray-task path (one pinned helper task per node), cold (driver connect included) and warm;
  (b) the seed's path: one `ray job submit --working-dir <repo> -- python
      scripts/run_on_each_ray_node.py -n NODE "py-spy dump --pid PID"` per process, sequential, on
      a subset (--seed-subset, default 8) and extrapolated to all processes (said so in the output);
  (c) the bare cost: `py-spy dump --pid PID` run locally once per process, sequentially.

It prints a table on stdout (--json for the figures as JSON); progress goes to stderr. It kills
only its own cluster's processes. Not a test: the numbers depend on the machine and its load.
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from debug_hang.collect.address import ClusterAddress  # noqa: E402
from debug_hang.localcluster import kill_by_cmdline, submit_job  # noqa: E402
from debug_hang.probe.pyspy import MAX_PARALLEL_DUMPS, DumpOptions, find_pyspy  # noqa: E402
from debug_hang.timeouts import Deadline  # noqa: E402

JOB_SCRIPT = '''
import os, threading, ray
ray.init()

@ray.remote(num_cpus=0)
class Stuck:
    def ready(self):
        return os.getpid()

    def block(self):
        threading.Event().wait()

n = int(os.environ["BENCH_ACTORS"])
actors = [Stuck.options(resources={"bench_a" if i % 2 == 0 else "bench_b": 0.001}).remote()
          for i in range(n)]
ray.get([a.ready.remote() for a in actors])
refs = [a.block.remote() for a in actors]
print("READY", flush=True)
ray.get(refs)  # the driver hangs too
'''


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench_collect.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=6460,
                   help="GCS port of the private cluster (dashboard = port+2000, agents 52000+port-6400+i)")
    p.add_argument("--actors", type=int, default=32, help="blocked actors, split over the 2 nodes (default 32)")
    p.add_argument("--seed-subset", type=int, default=8,
                   help="processes timed through the seed's one-job-per-process path (default 8)")
    p.add_argument("--repeat", type=int, default=3, help="repetitions of each batched measurement (default 3)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    return p


def kill_ours(markers: tuple[bytes, ...]) -> None:
    kill_by_cmdline(markers)


def wait_for(predicate: Any, timeout_s: float, what: str) -> Any:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(1.0)
    raise SystemExit(f"bench_collect.py: timed out after {timeout_s:.0f}s waiting for {what}")


def timed(fn: Any) -> tuple[float, Any]:
    start = time.monotonic()
    value = fn()
    return time.monotonic() - start, value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    pyspy = find_pyspy()
    if pyspy is None:
        raise SystemExit("bench_collect.py: py-spy not found")
    tmp = f"/tmp/rdh_bench_{args.port}"
    markers = (tmp.encode(), f"127.0.0.1:{args.port}".encode(), f"--gcs_server_port={args.port}".encode())
    kill_ours(markers)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    os.environ.update(RAY_TMPDIR=tmp, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
    from ray.cluster_utils import Cluster

    dashboard_port, agent = args.port + 2000, 52000 + (args.port - 6400)
    log(f"starting a 2-node cluster on 127.0.0.1:{args.port} (temp dir {tmp})")
    cluster = Cluster(initialize_head=True, shutdown_at_exit=False, head_node_args=dict(
        gcs_server_port=args.port, num_cpus=2, resources={"bench_a": 1}, node_ip_address="127.0.0.1",
        dashboard_host="127.0.0.1", dashboard_port=dashboard_port, include_dashboard=True,
        dashboard_agent_listen_port=agent, object_store_memory=100 * 2**20))
    try:
        second = cluster.add_node(num_cpus=2, resources={"bench_b": 1}, node_ip_address="127.0.0.1",
                                  dashboard_agent_listen_port=agent + 1, object_store_memory=100 * 2**20)
        head = cluster.head_node
        assert head is not None
        # The in-process driver prints cluster warnings to stdout: keep stdout for the figures.
        with contextlib.redirect_stdout(sys.stderr):
            figures = run(args, head.node_id, second.node_id, dashboard_port, pyspy, tmp)
    finally:
        import ray

        ray.shutdown()
        try:
            cluster.shutdown()  # type: ignore[no-untyped-call]
        except Exception:  # noqa: BLE001 - the sweep below finishes the job
            pass
        kill_ours(markers)
    print(json.dumps(figures, indent=1) if args.json else render(figures))
    return 0


def run(args: argparse.Namespace, head: str, second: str, dashboard_port: int, pyspy: str,
        tmp: str) -> dict[str, Any]:
    from ray.job_submission import JobSubmissionClient

    from debug_hang.collect import stacks as collect
    from debug_hang.collect.stacks import collect_stacks, select_targets
    from debug_hang.collect.state import DashboardClient

    dashboard = f"http://127.0.0.1:{dashboard_port}"
    address = ClusterAddress("127.0.0.1", args.port)
    workdir = Path(tempfile.mkdtemp(dir=tmp))
    (workdir / "stuck_job.py").write_text(JOB_SCRIPT)
    client = JobSubmissionClient(dashboard)
    log(f"submitting a job with {args.actors} blocked actors")
    sub = submit_job(client, entrypoint="python stuck_job.py",
                            runtime_env={"working_dir": str(workdir), "env_vars": {"BENCH_ACTORS": str(args.actors)}})
    wait_for(lambda: "READY" in client.get_job_logs(sub) or client.get_job_status(sub).is_terminal(),
             600, "the job's actors to start")
    assert not client.get_job_status(sub).is_terminal(), client.get_job_logs(sub)[-2000:]
    time.sleep(2.0)

    state = DashboardClient(dashboard)
    job = next(j for j in state.get("/api/jobs/") if j.get("submission_id") == sub)
    actors = state.list_state("actors", [("job_id", "=", job["job_id"])]).rows
    tasks = state.list_state("tasks", [("job_id", "=", job["job_id"])]).rows
    targets = select_targets(job, actors, tasks)
    stuck = [t for t in targets if t.role == "actor"]
    log(f"{len(targets)} targets ({len(stuck)} actors: {sum(t.node_id == head for t in stuck)} on the head, "
        f"{sum(t.node_id == second for t in stuck)} on the second node; the driver)")
    options = DumpOptions()

    def batched() -> Any:
        return collect_stacks(address, targets, options, Deadline(120), samples=1, children=True)

    def check(coll: Any, path: str) -> None:
        dumped = {p.pid for p in coll.processes}
        missing = [t.pid for t in targets if t.pid not in dumped]
        assert not missing and not coll.errors, (missing, coll.errors)
        assert set(coll.paths.values()) == {path}, coll.paths
        assert sum(any(f.function == "Stuck.block" for th in p.threads for f in th.frames)
                   for p in coll.processes) == args.actors

    local_s = []
    for _ in range(args.repeat):
        seconds, coll = timed(batched)
        check(coll, "local")
        local_s.append(seconds)
    log(f"(a) batched, local fast path: {[round(s, 3) for s in local_s]} s")

    real_local_raylets = getattr(collect, "local_raylets")  # noqa: B009 - patched below
    setattr(collect, "local_raylets", lambda: {})  # noqa: B010 - force the ray-task path
    try:
        task_s = []
        for _ in range(args.repeat + 1):  # the first run includes connecting the driver
            seconds, coll = timed(batched)
            check(coll, "ray-task")
            task_s.append(seconds)
    finally:
        setattr(collect, "local_raylets", real_local_raylets)  # noqa: B010
    log(f"(a) batched, ray-task path: {[round(s, 3) for s in task_s]} s (first includes connect)")

    bare = []
    for t in targets:
        seconds, proc = timed(lambda t=t: subprocess.run([pyspy, "dump", "--pid", str(t.pid)],
                                                         capture_output=True, timeout=60, check=False))
        assert proc.returncode == 0, proc.stderr[-500:]
        bare.append(seconds)
    log(f"(c) bare py-spy dump: mean {statistics.mean(bare) * 1000:.1f} ms over {len(bare)} processes")

    subset = stuck[: args.seed_subset]
    ray_bin = str(Path(sys.executable).parent / "ray")
    seed = []
    for t in subset:
        argv = [ray_bin, "job", "submit", "--address", dashboard, "--working-dir", str(ROOT), "--",
                "python", "scripts/run_on_each_ray_node.py", "-n", str(t.node_id),
                f"py-spy dump --pid {t.pid}"]
        seconds, proc = timed(lambda argv=argv: subprocess.run(argv, capture_output=True, text=True,
                                                               timeout=300, cwd=ROOT, check=False))
        assert proc.returncode == 0 and "Stuck.block" in proc.stdout, proc.stdout[-1500:] + proc.stderr[-1500:]
        seed.append(seconds)
        log(f"(b) seed path, pid {t.pid}: {seconds:.2f} s")
    client.stop_job(sub)

    n = len(targets)
    seed_mean = statistics.mean(seed)
    return {
        "processes": n, "actors": args.actors, "nodes": 2, "cpus": os.cpu_count(),
        "batched_local_s": {"runs": local_s, "median": statistics.median(local_s)},
        "batched_ray_task_s": {"cold": task_s[0], "warm_runs": task_s[1:],
                               "warm_median": statistics.median(task_s[1:])},
        "bare_pyspy_s": {"mean": statistics.mean(bare), "max": max(bare), "sum": sum(bare)},
        "seed_s": {"measured_processes": len(seed), "runs": seed, "mean": seed_mean,
                   "extrapolated_total": seed_mean * n},
        "parallelism": {"configured": MAX_PARALLEL_DUMPS, "cores": os.cpu_count()},
    }


def render(f: dict[str, Any]) -> str:
    n = f["processes"]
    seed_total = f["seed_s"]["extrapolated_total"]
    bare_sum = f["bare_pyspy_s"]["sum"]
    rows = [
        ("batched, local fast path (median)", f["batched_local_s"]["median"]),
        ("batched, ray-task path, warm (median)", f["batched_ray_task_s"]["warm_median"]),
        ("batched, ray-task path, cold (incl. connect)", f["batched_ray_task_s"]["cold"]),
    ]
    lines = [f"{n} processes ({f['actors']} blocked actors over 2 nodes + the driver), "
             f"{f['cpus']} cores, one dump per process", ""]
    lines.append(f"{'path':48} {'wall s':>8} {'vs seed':>8} {'vs bare/P (P=cores)':>20} {'vs bare/P (P=8)':>16}")
    for name, seconds in rows:
        lines.append(f"{name:48} {seconds:8.3f} {seed_total / seconds:7.0f}x "
                     f"{seconds / (bare_sum / f['parallelism']['cores']):19.2f}x "
                     f"{seconds / (bare_sum / f['parallelism']['configured']):15.2f}x")
    lines.append(f"{'seed: one ray job submit per process':48} {seed_total:8.1f}  (mean {f['seed_s']['mean']:.2f} s "
                 f"measured on {f['seed_s']['measured_processes']} processes, x{n} extrapolated)")
    lines.append(f"{'bare py-spy dump, sequential sum':48} {bare_sum:8.3f}  (mean "
                 f"{f['bare_pyspy_s']['mean'] * 1000:.1f} ms, max {f['bare_pyspy_s']['max'] * 1000:.1f} ms)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
