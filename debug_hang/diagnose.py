"""The whole diagnosis: cluster → job → blocked processes → stacks → graph → root cause → report.

Every phase is bounded by one deadline; a failed phase is recorded and the next one still runs
on what there is. The output folder holds the phase outputs, `stacks.json`, `report.md` and
`diagnosis.json` (schema `debug-hang/diagnosis/v1`), all rendered from one `Diagnosis`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from debug_hang.address import ClusterAddress, check_reachable, parse_address, resolve_dashboard
from debug_hang.collect import Collection, collect_stacks, select_targets
from debug_hang.errors import DeadlineError, NotFoundError
from debug_hang.evidence import Evidence, NodeEvidence, gather
from debug_hang.graph import GraphInputs, WaitGraph, build_graph
from debug_hang.model import Process, process_from_dict, stacks_to_dict
from debug_hang.patterns import ProcessVerdict, catalog, match_process
from debug_hang.pyspy import DumpOptions
from debug_hang.raytrain import POLLING_TASKS, worker_ranks
from debug_hang.rootcause import RootCause, chains, root_causes
from debug_hang.state import (
    DashboardClient,
    Snapshot,
    available_resources,
    node_totals,
    running_jobs,
    take_snapshot,
)
from debug_hang.timeouts import DEFAULT_DEADLINE_S, Deadline

DIAGNOSIS_SCHEMA = "debug-hang/diagnosis/v1"
# A wait on a task younger than this is not yet evidence of a hang (a healthy step in flight).
FRESH_TASK_S = 5.0


@dataclass
class Options:
    address: str | None = None
    job_id: str | None = None
    output_dir: Path | None = None
    deadline_s: float = DEFAULT_DEADLINE_S
    samples: int = 2
    interval_s: float = 1.0
    native: bool = False
    nonblocking: bool = False
    locals: bool = False


@dataclass
class Diagnosis:
    """The one data model both report.md and diagnosis.json are rendered from."""

    address: str
    job_id: str | None
    job_choice: str
    other_jobs: list[dict[str, Any]]
    verdict: str
    summary: str
    snapshot: Snapshot | None
    collection: Collection
    verdicts: list[ProcessVerdict]
    graph: WaitGraph
    causes: list[RootCause]
    progress: list[str] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    evidence: Evidence | None = None

    def chain_keys(self) -> list[str]:
        """Graph keys of every node on a reported chain, culprits first."""
        keys: list[str] = [c.key for cause in self.causes for c in cause.culprits]
        for chain in chains(self.graph, self.causes):
            keys += [node.key for node, _ in chain]
        return list(dict.fromkeys(keys))

    def to_json(self) -> dict[str, Any]:
        """diagnosis.json, contract v1 (references/diagnosis.schema.json)."""
        cat = catalog()
        root = []
        for cause in self.causes:
            first = cause.culprits[0]
            fix = cat[cause.pattern].fix if cause.pattern in cat else ""
            root.append({
                "pattern": cause.pattern,
                "summary": cause.summary,
                "culprit": {
                    "kind": first.kind if first.kind != "driver" else "process",
                    "class_name": first.class_name, "task_name": first.task_name,
                    "actor_id": first.actor_id, "task_id": first.task_id, "pid": first.pid,
                    "node_id": first.node_id, "rank": first.rank,
                },
                "culprits": [{"kind": c.kind, "class_name": c.class_name, "pid": c.pid,
                              "actor_id": c.actor_id, "node_id": c.node_id, "rank": c.rank,
                              "name": c.name} for c in cause.culprits],
                "confidence": round(cause.confidence, 2),
                "evidence": cause.evidence,
                "fix": fix,
            })
        chain_json = [
            [{"kind": n.kind, "name": n.name, "pid": n.pid, "node_id": n.node_id,
              "pattern": n.pattern, "state": n.state, "waits_on": why} for n, why in chain]
            for chain in chains(self.graph, self.causes)
        ]
        errors = [{"node_id": e.get("node_id"), "pid": e.get("pid"), "error": str(e.get("error")),
                   "kind": e.get("kind")} for e in self.collection.errors + self.errors]
        return {
            "schema": DIAGNOSIS_SCHEMA,
            "address": self.address,
            "job_id": self.job_id,
            "verdict": self.verdict,
            "summary": self.summary,
            "root_causes": root,
            "chains": chain_json,
            "collection": {
                "nodes": self.collection.nodes,
                "processes": len({(p.node_id, p.pid) for p in self.collection.processes}),
                "stacks": len(self.collection.processes),
                "seconds": round(self.seconds, 2),
                "errors": errors,
            },
        }


def pick_job(jobs: list[dict[str, Any]], job_id: str | None, own_job: str | None = None) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    """Choose the job to diagnose and say why; raises NotFoundError listing what exists."""
    if job_id:
        for job in jobs:
            if job_id in (job.get("job_id"), job.get("submission_id")):
                return job, f"job {job_id} was given with --job-id", [j for j in jobs if j is not job]
        known = ", ".join(f"{j.get('job_id')} ({j.get('status')})" for j in jobs) or "none"
        raise NotFoundError(f"no job {job_id!r} in this cluster; jobs: {known}")
    running = [j for j in running_jobs(jobs) if j.get("job_id") != own_job and j.get("job_id")]
    if not running:
        known = ", ".join(f"{j.get('job_id')} ({j.get('status')})" for j in jobs) or "none"
        raise NotFoundError(f"no RUNNING job to diagnose; jobs: {known}. Pass --job-id to pick one")
    choice = running[0]
    why = ("the only RUNNING job" if len(running) == 1 else
           f"the most recently started of {len(running)} RUNNING jobs (pass --job-id to choose another)")
    return choice, why, [j for j in jobs if j is not choice]


def detect_progress(before: list[dict[str, Any]], after: list[dict[str, Any]], since_ms: float) -> list[str]:
    """Tasks that finished between two task listings: evidence the job moves.

    Only completions count: at the onset of a hang, calls still start (and then block).
    Actor creation is set-up, not progress; nor are the calls Ray's libraries make on a timer
    (Ray Train's status polls).
    """
    was = {(t.get("task_id"), t.get("attempt_number")): t.get("state") for t in before}
    moved: list[str] = []
    for task in after:
        if task.get("state") != "FINISHED" or task.get("type") == "ACTOR_CREATION_TASK" or task.get("name") in POLLING_TASKS:
            continue
        key = (task.get("task_id"), task.get("attempt_number"))
        if (key in was and was[key] != "FINISHED") or (key not in was and (task.get("end_time_ms") or 0) >= since_ms):
            moved.append(f"{task.get('name')} finished during the diagnosis")
    return moved


def stuck_processes(collection: Collection) -> dict[tuple[str | None, int | None], bool]:
    """Per process: True when every sample shows the same non-housekeeping stacks."""
    sigs: dict[tuple[str | None, int | None], set[tuple[Any, ...]]] = {}
    for proc in collection.processes:
        sig = tuple(sorted(
            tuple((f.function, f.line) for f in t.frames if not f.native)
            for t in proc.threads if t.name not in ("PythonGCThread", "ray_print_logs", "ray_listen_error_messages")
        ))
        sigs.setdefault((proc.node_id, proc.pid), set()).add(sig)
    return {key: len(values) == 1 for key, values in sigs.items()}


def analyse(job: dict[str, Any], snap: Snapshot, collection: Collection, tasks_after: list[dict[str, Any]] | None,
            address: str, job_choice: str, other_jobs: list[dict[str, Any]], errors: list[dict[str, Any]],
            started: float) -> Diagnosis:
    """Everything after collection: match, graph, root causes, verdict. Pure: reruns on captures."""
    latest = collection.latest()
    verdicts = [_match_with_cpu(p, collection) for p in latest]
    graph = build_graph(GraphInputs(
        job=job, actors=snap.actors, tasks=snap.tasks, placement_groups=snap.placement_groups,
        node_totals=node_totals(snap), verdicts=verdicts, info=collection.info,
        available=available_resources(snap),
    ))
    causes = root_causes(graph)
    since_ms = snap.taken_at * 1000.0
    progress = detect_progress(snap.tasks, tasks_after, since_ms) if tasks_after is not None else []
    stuck = stuck_processes(collection)
    moving = [p for p in latest if not stuck.get((p.node_id, p.pid), True)
              and any(v.process is p and v.verdict in ("blocked", "busy") for v in verdicts)]
    verdict, summary = _verdict(job, causes, progress, moving, graph, verdicts)
    if verdict == "no-hang":
        causes = []  # waits for work in flight are not root causes
    return Diagnosis(address=address, job_id=job.get("job_id"), job_choice=job_choice, other_jobs=other_jobs,
                     verdict=verdict, summary=summary, snapshot=snap, collection=collection,
                     verdicts=verdicts, graph=graph, causes=causes, progress=progress, errors=errors,
                     seconds=time.monotonic() - started)


# py-spy's active flag flickers (idle threads show `active` in 10-50% of samples under load):
# a "busy" reading needs real CPU use to back it.
BUSY_CPU_PERCENT = 30.0


# Stack readings that are waits only when the process does not compute: a backward pass that
# uses the CPU is working, not waiting for DDP's all-reduce.
WAITS_WHEN_IDLE = ("ddp-wait",)


def _match_with_cpu(proc: Process, collection: Collection) -> ProcessVerdict:
    """Match a process; a busy-loop reading without real CPU use is re-read as idle, a wait
    reading that only holds when idle (DDP backward) with real CPU use is re-read without it."""
    verdict = match_process(proc)
    cpu = collection.info_of(proc).get("cpu_percent")
    if verdict.pattern in WAITS_WHEN_IDLE and cpu is not None and cpu >= BUSY_CPU_PERCENT:
        verdict = match_process(proc, [p for p in catalog().values() if p.id not in WAITS_WHEN_IDLE])
    if verdict.pattern == "busy-loop" and cpu is not None and cpu < BUSY_CPU_PERCENT:
        # Re-read as idle, on a copy: the recorded stacks keep what py-spy said.
        idle = dataclasses.replace(proc, threads=[dataclasses.replace(t, active=False) for t in proc.threads])
        verdict = match_process(idle)
        verdict.process = proc
    return verdict


def youngest_task_age_s(job: dict[str, Any], tasks: list[dict[str, Any]], now_s: float) -> float | None:
    """Age of the most recently started RUNNING task of the job (None if none runs)."""
    starts = [t.get("start_time_ms") or 0 for t in tasks if t.get("job_id") == job.get("job_id")
              and t.get("state") == "RUNNING" and t.get("type") != "ACTOR_CREATION_TASK"
              and t.get("name") not in POLLING_TASKS]
    return (now_s * 1000.0 - max(starts)) / 1000.0 if starts else None


def _verdict(job: dict[str, Any], causes: list[RootCause], progress: list[str], moving: list[Process],
             graph: WaitGraph, verdicts: list[ProcessVerdict]) -> tuple[str, str]:
    job_id = job.get("job_id")
    status = job.get("status")
    if status in ("SUCCEEDED", "FAILED", "STOPPED"):
        return "no-hang", (f"Job {job_id} is not running: its status is {status}"
                           + (f" ({str(job.get('message'))[:200]})" if job.get("message") else "") + ". Nothing of it can hang now.")
    if progress and not any(c.cycle for c in causes):
        return "no-hang", (f"Job {job_id} is making progress: {progress[0]}"
                           f"{f' (and {len(progress) - 1} more)' if len(progress) > 1 else ''}. "
                           "Its processes wait only for work in flight.")
    if not causes:
        blocked = [v for v in verdicts if v.verdict in ("blocked", "busy")]
        if not blocked:
            return "no-hang", (f"Job {job_id}: no process is blocked or busy in job code; "
                               "nothing waits on anything (idle, or between steps).")
        return "inconclusive", (f"Job {job_id}: {len(blocked)} process(es) wait, but the wait could not be "
                                "followed to a cause; see the blocked-task table and collect with --samples 5.")
    top = causes[0]
    names = ", ".join(c.label() for c in top.culprits)
    if all(c.culprits[0].kind == "resource" and c.culprits[0].state == "pending" for c in causes):
        # Free capacity and nothing else in the way: the scheduler has not placed it *yet*.
        waiting = ", ".join(c.label() for c in top.culprits[1:]) or "a task or actor"
        return "inconclusive", (f"Job {job_id} is still starting: {waiting} is not created or scheduled yet, and "
                                "the resources it needs are free, so nothing blocks it. Diagnose again in a few seconds.")
    moving_note = (f" Note: {len(moving)} process(es) changed stack between samples." if moving else "")
    title = (catalog()[top.pattern].title if top.pattern in catalog()
             else "A chain of waits ending in a process whose own wait is not recognised (see its evidence)")
    victims = len(top.victims)
    busy_note = (" A long computation looks the same in two samples: if the same line still spins in a minute, "
                 "it is a hang." if top.pattern == "busy-loop" else "")
    return "hang", (f"Job {job_id} is hung: {title[:1].lower() + title[1:]} — culprit {names}; "
                    f"{victims} process(es) wait on it.{moving_note}{busy_note}")


def run(opts: Options) -> Diagnosis:
    """Diagnose one job end to end (see module docstring); raises only when nothing can be done."""
    started = time.monotonic()
    deadline = Deadline(opts.deadline_s)
    addr: ClusterAddress = parse_address(opts.address)
    check_reachable(addr)
    addr = resolve_dashboard(addr, timeout_s=deadline.remaining(cap=5.0))
    assert addr.dashboard_url
    snap = take_snapshot(addr.dashboard_url, None, timeout_s=deadline.remaining(cap=10.0))
    if not snap.jobs and snap.errors:
        if deadline.expired:
            raise DeadlineError(f"the {opts.deadline_s:.0f}s deadline passed before the State API answered "
                                f"({snap.errors[0][:200]}); rerun with a larger --deadline")
        # The State API is down (dashboard dead or overloaded): partial results beat none.
        return _without_state_api(opts, addr, snap, deadline, started)
    job, why, others = pick_job(snap.jobs, opts.job_id, own_job=_own_job_id())
    targets = select_targets(job, snap.actors, snap.tasks, snap.nodes)
    collection = collect_stacks(
        addr, targets, DumpOptions(native=opts.native, nonblocking=opts.nonblocking, locals=opts.locals,
                                   timeout_s=min(10.0, deadline.remaining())),
        deadline, samples=opts.samples, interval_s=opts.interval_s,
    )
    errors: list[dict[str, Any]] = []
    _add_train_ranks(addr.dashboard_url, job, snap, collection, deadline, errors)
    # Progress is judged on the task states between the first listing and a second one. When a
    # task started moments ago, stretch that window to FRESH_TASK_S so that a healthy job's next
    # step has time to show (a hung job costs at most those few seconds more).
    age = youngest_task_age_s(job, snap.tasks, snap.taken_at)
    if age is not None:
        window = time.time() - snap.taken_at
        wait = min(FRESH_TASK_S - max(age, window), deadline.remaining() - 5.0)
        if wait > 0:
            time.sleep(wait)
    client = DashboardClient(addr.dashboard_url, timeout_s=deadline.remaining(cap=10.0))
    after = client.list_state("tasks", [("job_id", "=", str(job.get("job_id")))])
    if after.error:
        errors.append({"node_id": None, "pid": None, "error": f"second task listing failed: {after.error}"})
    diag = analyse(job, snap, collection, None if after.error else after.rows, addr.gcs, why, others,
                   errors + [{"node_id": None, "pid": None, "error": e} for e in snap.errors], started)
    missing = [e for e in snap.errors if "/api/v0/tasks" in e or "/api/v0/actors" in e]
    if missing and diag.verdict == "no-hang":
        diag.verdict = "inconclusive"
        diag.summary = f"Task or actor state could not be read ({missing[0][:200]}); the stacks alone do not show a hang."
    if diag.causes and not deadline.expired:
        try:
            diag.evidence = gather(DashboardClient(addr.dashboard_url, timeout_s=deadline.remaining(cap=8.0)),
                                   diag.graph, diag.chain_keys(), after.rows or snap.tasks, job)
        except Exception as exc:  # noqa: BLE001 - evidence is a bonus: report and go on
            diag.errors.append({"node_id": None, "pid": None, "error": f"evidence gathering failed: {exc}"})
    diag.seconds = time.monotonic() - started
    if opts.output_dir is not None:
        write_outputs(diag, opts.output_dir, after.rows)
    return diag


def _add_train_ranks(dashboard_url: str, job: dict[str, Any], snap: Snapshot, collection: Collection,
                     deadline: Deadline, errors: list[dict[str, Any]]) -> None:
    """Ranks of Ray Train workers, which no process environment holds (see raytrain.py)."""
    if deadline.remaining() < 1.0:
        errors.append({"node_id": None, "pid": None, "error": "no time left to read Ray Train ranks"})
        return
    client = DashboardClient(dashboard_url, timeout_s=deadline.remaining(cap=5.0))
    ranks, problems = worker_ranks(client, job.get("job_id"), snap.actors, snap.nodes)
    errors += [{"node_id": None, "pid": None, "error": p} for p in problems]
    for proc in collection.processes:
        rank = ranks.get((proc.node_id, proc.pid or -1))
        if rank is not None and proc.rank is None:
            proc.rank = rank
            collection.info.setdefault((proc.node_id, proc.pid or -1), {})["rank_source"] = "Ray Train controller log"


# Ray's own processes: never the job's code, not worth a dump when hunting blindly.
_SYSTEM_TITLES = ("ray::IDLE", "ray::JobSupervisor", "ray::DashboardAgent", "ray::RuntimeEnvAgent",
                  "ray::_QueueActor", "ray::debug-hang")


def local_ray_workers() -> list[int]:
    """PIDs of this machine's Ray worker processes running job code (`ray::<Class>.<method>`)."""
    from debug_hang.pyspy import read_title

    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            title = read_title(int(entry)) or ""
            if title.startswith("ray::") and not title.startswith(_SYSTEM_TITLES):
                pids.append(int(entry))
    return sorted(pids)


def _without_state_api(opts: Options, addr: ClusterAddress, snap: Snapshot, deadline: Deadline,
                       started: float) -> Diagnosis:
    """Fallback when the State API does not answer: dump the Ray workers of this machine and
    classify them. No job, no graph edges from task state: the report says what is missing."""
    from debug_hang.collect import Target

    targets = [Target(pid=pid, node_id="local", role="worker") for pid in local_ray_workers()]
    note = ("the State API did not answer (" + "; ".join(snap.errors)[:300] + "): only the Ray worker "
            f"processes of this machine ({len(targets)}) were dumped, without task state or other nodes")
    collection = Collection(targets=len(targets))
    if targets:
        from debug_hang.node_probe import probe_node

        value = probe_node("local", [t.pid for t in targets],
                           DumpOptions(native=opts.native, nonblocking=opts.nonblocking, locals=opts.locals).to_dict(),
                           opts.samples, opts.interval_s, True, deadline.remaining(cap=30.0))
        for raw in value.get("processes", []):
            proc = process_from_dict(raw)
            proc.role = "worker"
            cls, _ = proc.title_parts
            proc.actor_class = cls
            collection.processes.append(proc)
        collection.errors += [{"node_id": "local", **e} for e in value.get("errors", [])]
        collection.info = {("local", int(k)): {"node_id": "local", **v} for k, v in (value.get("info") or {}).items()}
        collection.nodes = 1
    errors = [{"node_id": None, "pid": None, "error": note, "kind": "state-api-down"}]
    diag = analyse({"job_id": None}, snap, collection, None, addr.gcs, "unknown: the State API is down", [],
                   errors, started)
    # Without task state no wait can be followed: stacks alone are candidates, not a verdict.
    diag.verdict = "inconclusive"
    candidates = ", ".join(f"{c.pattern} in {c.culprits[0].label()}" for c in diag.causes[:3]) or "none"
    diag.summary = (f"Partial diagnosis: {note}. Candidates from the stacks alone: {candidates}. Next: get the "
                    "dashboard answering again, or dump every node with scripts/run_on_each_ray_node.py --dump PIDS.")
    if opts.output_dir is not None:
        write_outputs(diag, opts.output_dir)
    return diag


def _own_job_id() -> str | None:
    """The job id of this process when it is itself a Ray driver (so it never diagnoses itself)."""
    try:
        import ray

        if ray.is_initialized():
            return str(ray.get_runtime_context().get_job_id())
    except Exception:  # noqa: BLE001 - best effort
        return None
    return None


def write_outputs(diag: Diagnosis, out: Path, tasks_after: list[dict[str, Any]] | None = None) -> None:
    """The phase outputs (as the seed's script left them), stacks.json, report.md, diagnosis.json."""
    from debug_hang.report import render_markdown, render_stacks_text

    out.mkdir(parents=True, exist_ok=True)
    snap = diag.snapshot
    if snap is not None:
        (out / "01_cluster.txt").write_text((snap.cluster_status_text or "(cluster status unavailable)") + "\n")
        (out / "02_jobs.json").write_text(json.dumps(snap.jobs, indent=1, default=str))
        job_tasks = [t for t in snap.tasks if t.get("job_id") == diag.job_id]
        (out / "03_tasks.json").write_text(json.dumps(job_tasks, indent=1, default=str))
        job_actors = [a for a in snap.actors if a.get("job_id") == diag.job_id]
        (out / "04_actors.json").write_text(json.dumps(job_actors, indent=1, default=str))
        (out / "snapshot.json").write_text(json.dumps(snap.to_dict(), default=str))
    (out / "05_stacks.txt").write_text(render_stacks_text(diag.collection.processes))
    meta = {"job_id": diag.job_id, "info": diag.collection.info_to_json(),
            "errors": diag.collection.errors, "nodes": diag.collection.nodes,
            "targets": diag.collection.targets, "seconds": diag.collection.seconds,
            "paths": diag.collection.paths, "job_choice": diag.job_choice, "address": diag.address,
            "diagnosis_seconds": diag.seconds}
    (out / "stacks.json").write_text(json.dumps(stacks_to_dict(diag.collection.processes, meta)))
    if tasks_after is not None:
        (out / "tasks_after.json").write_text(json.dumps(tasks_after, default=str))
    if diag.evidence is not None:
        logs = out / "logs"
        logs.mkdir(exist_ok=True)
        for key, node_ev in diag.evidence.per_node.items():
            node = diag.graph.nodes[key]
            for suffix, text in node_ev.logs.items():
                (logs / f"{node.class_name or node.kind}-{node.pid}.{suffix}").write_text(text)
        if diag.evidence.driver_log:
            (logs / "driver.log").write_text(diag.evidence.driver_log)
        (out / "evidence.json").write_text(json.dumps({
            "per_node": {k: {"highlights": v.highlights, "history": v.history, "errors": v.errors}
                         for k, v in diag.evidence.per_node.items()},
            "driver_highlights": diag.evidence.driver_highlights, "errors": diag.evidence.errors}, indent=1))
    (out / "report.md").write_text(render_markdown(diag))
    (out / "diagnosis.json").write_text(json.dumps(diag.to_json(), indent=2, default=str))


def reanalyse(folder: Path) -> Diagnosis:
    """Re-run the analysis on a recorded output folder (snapshot.json + stacks.json)."""
    from debug_hang.collect import Collection
    from debug_hang.model import stacks_from_dict

    snap = Snapshot.from_dict(json.loads((folder / "snapshot.json").read_text()))
    doc = json.loads((folder / "stacks.json").read_text())
    processes: list[Process] = stacks_from_dict(doc)
    meta = doc.get("meta") or {}
    coll = Collection(processes=processes, info=Collection.info_from_json(meta.get("info")),
                      errors=list(meta.get("errors") or []), nodes=int(meta.get("nodes") or 0),
                      targets=int(meta.get("targets") or 0), seconds=float(meta.get("seconds") or 0.0),
                      paths=dict(meta.get("paths") or {}))
    job = next((j for j in snap.jobs if j.get("job_id") == meta.get("job_id")), {"job_id": meta.get("job_id")})
    after_path = folder / "tasks_after.json"
    after = json.loads(after_path.read_text()) if after_path.exists() else None
    diag = analyse(job, snap, coll, after, str(meta.get("address") or ""), str(meta.get("job_choice") or ""),
                   [j for j in snap.jobs if j is not job], [], time.monotonic())
    diag.seconds = float(meta.get("diagnosis_seconds") or diag.seconds)
    ev_path = folder / "evidence.json"
    if ev_path.exists():
        raw = json.loads(ev_path.read_text())
        diag.evidence = Evidence(
            per_node={k: NodeEvidence(highlights=v.get("highlights", []), history=v.get("history", []),
                                      errors=v.get("errors", [])) for k, v in (raw.get("per_node") or {}).items()},
            driver_highlights=list(raw.get("driver_highlights") or []), errors=list(raw.get("errors") or []))
    return diag
