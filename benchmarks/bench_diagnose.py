#!/usr/bin/env python3
"""Time the whole diagnosis (address → report) on real hung examples.

Starts a loopback cluster (own ports, temp dir; killed afterwards, never `ray stop`), submits each
example, waits until it is hung, then times `scripts/diagnose_ray_hang.sh` as a user runs it (fresh
interpreter) and `diagnose.run()` in-process, REPEAT times each. Prints a table (or --json).

--poller N instead submits one job of N actors blocked in `ray.get` on one poller actor (N + 2
processes with the driver) and times, in the same run: the script REPEAT times (median, with the
median of each phase from diagnosis.json `collection.timings`) and a bare sequential
`py-spy dump --pid PID` of the same processes, and the seed's path (one `ray job submit` of
run_on_each_ray_node.py per process) on --seed-subset of them, extrapolated to all; the load
average is read before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

from debug_hang import localcluster  # noqa: E402
from debug_hang.pipeline import FRESH_TASK_S, Options, run  # noqa: E402

DEFAULT_EXAMPLES = ["producer_never_produces", "actor_call_cycle", "gloo_skipped_allreduce"]

POLLER_JOB = '''
import os, threading, ray
ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))

@ray.remote(num_cpus=0)
class Poller:
    def wait(self):
        threading.Event().wait()  # never set: every caller waits on it

@ray.remote(num_cpus=0)
class Worker:
    def run(self, poller):
        return ray.get(poller.wait.remote())

poller = Poller.remote()
workers = [Worker.remote() for _ in range({n})]
refs = [w.run.remote(poller) for w in workers]
print("READY", flush=True)
ray.get(refs)
'''


def bench_poller(cluster: localcluster.LocalCluster, n: int, repeat: int, seed_subset: int = 4) -> dict[str, object]:
    """The whole diagnosis of N actors blocked on one poller, beside bare py-spy of the same processes."""
    from ray.job_submission import JobSubmissionClient

    from debug_hang.probe.pyspy import find_pyspy

    client = JobSubmissionClient(cluster.dashboard)
    with tempfile.TemporaryDirectory() as jobdir:
        (Path(jobdir) / "poller.py").write_text(POLLER_JOB.format(n=n))
        sub = localcluster.submit_job(client, entrypoint="python poller.py", runtime_env={"working_dir": jobdir})
        localcluster.wait_for(lambda: "READY" in client.get_job_logs(sub), 180, "poller job READY")
        localcluster.wait_for(lambda: _running_calls(cluster) >= n, 180, "every Worker.run call running")
        time.sleep(FRESH_TASK_S + 1)  # older than the diagnosis' fresh-task window, as a real hang is
        load_before = os.getloadavg()[0]
        script, phases, pids, verdicts = [], [], [], set()
        for i in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                start = time.monotonic()
                subprocess.run([str(ROOT / "scripts" / "diagnose_ray_hang.sh"), cluster.gcs, tmp],
                               check=True, capture_output=True, env=as_installed(cluster.env()), timeout=300)
                script.append(time.monotonic() - start)
                doc = json.loads((Path(tmp) / "diagnosis.json").read_text())
                verdicts.add(doc["verdict"])
                phases.append(doc["collection"].get("timings") or {})
                stacks = json.loads((Path(tmp) / "stacks.json").read_text())
                pids = sorted({p["pid"] for p in stacks["processes"]})
                nodes = {p["pid"]: p.get("node_id") for p in stacks["processes"]}
                blocked = sorted({p["pid"] for p in stacks["processes"] if "Worker.run" in str(p.get("title"))})
            print(f"poller run {i + 1}: script {script[-1]:.2f}s {phases[-1]}", file=sys.stderr)
        pyspy = find_pyspy()
        bare = []
        for pid in pids:
            start = time.monotonic()
            subprocess.run([str(pyspy), "dump", "--pid", str(pid)], capture_output=True, timeout=30, check=False)
            bare.append(time.monotonic() - start)
        seed = seed_path(cluster, [(pid, nodes[pid]) for pid in blocked[:seed_subset]])
        client.stop_job(sub)
    names = list(dict.fromkeys(k for ph in phases for k in ph))
    median = statistics.median(script)
    seed_total = statistics.mean(seed) * len(pids) if seed else None
    return {"processes": len(pids), "script_median_s": round(statistics.median(script), 2),
            "script_runs_s": [round(x, 2) for x in script],
            "phase_medians_s": {k: round(statistics.median(ph.get(k, 0.0) for ph in phases), 2) for k in names},
            "bare_pyspy_sequential_s": round(sum(bare), 2), "verdicts": sorted(verdicts),
            "seed_path_s": {"measured_processes": len(seed), "runs": [round(x, 2) for x in seed],
                            "extrapolated_total": round(seed_total, 1) if seed_total else None,
                            "speedup_vs_script_median": round(seed_total / median) if seed_total else None},
            "loadavg_before": round(load_before, 1), "loadavg_after": round(os.getloadavg()[0], 1)}


def as_installed(env: dict[str, str]) -> dict[str, str]:
    """The script's environment as a user's: Python caches compiled modules (an installed package
    has them from pip; a checkout writes them on its first run), unless this shell forbids it."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


def seed_path(cluster: localcluster.LocalCluster, targets: list[tuple[int, str | None]]) -> list[float]:
    """The seed's way, timed: one `ray job submit` running run_on_each_ray_node.py per process."""
    ray_bin = str(Path(sys.executable).parent / "ray")
    runs = []
    for pid, node_id in targets:
        argv = [ray_bin, "job", "submit", "--address", cluster.dashboard, "--working-dir", str(ROOT), "--",
                "python", "scripts/run_on_each_ray_node.py", "-n", str(node_id), f"py-spy dump --pid {pid}"]
        start = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT, env=cluster.env(), check=False)
        runs.append(time.monotonic() - start)
        if proc.returncode != 0 or "Worker.run" not in proc.stdout:
            raise RuntimeError(f"seed path failed for pid {pid}: {(proc.stdout + proc.stderr)[-800:]}")
        print(f"seed path, pid {pid}: {runs[-1]:.2f}s", file=sys.stderr)
    return runs


def _running_calls(cluster: localcluster.LocalCluster) -> int:
    from debug_hang.collect.state import DashboardClient

    rows = DashboardClient(cluster.dashboard).list_state("tasks", [("state", "!=", "FINISHED")], detail=False).rows
    return sum(1 for t in rows if t.get("name") == "Worker.run" and str(t.get("state")).startswith("RUNNING"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("examples", nargs="*", default=DEFAULT_EXAMPLES, help="examples to time")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per example and path (default 3)")
    p.add_argument("--port", type=int, default=6470, help="GCS port of the benchmark cluster (default 6470)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--poller", type=int, metavar="N", help="time N actors blocked on one poller instead")
    p.add_argument("--seed-subset", type=int, default=4, metavar="K",
                   help="with --poller: processes also dumped the seed's way (one `ray job submit` each), "
                        "extrapolated to all (default 4; 0 skips)")
    args = p.parse_args()
    cluster = localcluster.start(args.port, num_cpus=4)
    rows = []
    if args.poller:
        try:
            print(json.dumps(bench_poller(cluster, args.poller, args.repeat, args.seed_subset), indent=1))
        finally:
            localcluster.stop(cluster)
        return 0
    try:
        for example in args.examples:
            job = localcluster.submit_example(cluster, example)
            script, inproc, verdicts, rounds, extra = [], [], set(), set(), []
            for i in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp:
                    start = time.monotonic()
                    subprocess.run([str(ROOT / "scripts" / "diagnose_ray_hang.sh"), cluster.gcs, tmp, "--job-id",
                                    str(job.job_id)], check=True, capture_output=True, env=as_installed(cluster.env()),
                                   timeout=300)
                    script.append(time.monotonic() - start)
                    verdicts.add(json.loads((Path(tmp) / "diagnosis.json").read_text())["verdict"])
                start = time.monotonic()
                diag = run(Options(address=cluster.gcs, job_id=job.job_id))
                inproc.append(time.monotonic() - start)
                verdicts.add(diag.verdict)
                rounds.add(int(diag.sampling.get("rounds") or 1))
                # The second round of samples (analyse/sampling.py), when the answer depended on it:
                # its samples and the task listing and analysis after it.
                extra.append(float(diag.timings.get("more_samples", 0.0)))
                print(f"{example} run {i + 1}: script {script[-1]:.2f}s, in-process {inproc[-1]:.2f}s", file=sys.stderr)
            localcluster.stop_job(cluster, job)
            rows.append({"example": example, "script_median_s": round(statistics.median(script), 2),
                         "in_process_median_s": round(statistics.median(inproc), 2),
                         "processes": len({(p.node_id, p.pid) for p in diag.collection.processes}),
                         "verdicts": sorted(verdicts), "rounds": sorted(rounds),
                         "second_round_median_s": round(statistics.median(extra), 2)})
    finally:
        localcluster.stop(cluster)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'example':<26} {'script s':>9} {'in-process s':>13} {'2nd round s':>12} {'processes':>10}  verdicts")
        for r in rows:
            print(f"{r['example']:<26} {r['script_median_s']:>9.2f} {r['in_process_median_s']:>13.2f} "
                  f"{r['second_round_median_s']:>12.2f} {r['processes']:>10}  {','.join(r['verdicts'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
