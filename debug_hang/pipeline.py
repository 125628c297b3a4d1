"""The whole diagnosis: cluster → job → blocked processes → stacks → graph → root cause → report.

Every phase is bounded by one deadline; a failed phase is recorded and the next one still runs
on what there is. The output folder holds the phase outputs, `stacks.json`, `report.md` and
`diagnosis.json` (schema `debug-hang/diagnosis/v1`), all rendered from one `Diagnosis`.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from debug_hang.analyse import sampling
from debug_hang.analyse.analysis import analyse
from debug_hang.analyse.dead_holders import name_dead_holder
from debug_hang.analyse.diagnosis import Diagnosis as Diagnosis  # re-exported: the watcher reads it
from debug_hang.analyse.flight_recorder import analyse as analyse_fr
from debug_hang.analyse.fr_join import attach
from debug_hang.analyse.group_layout import PATTERNS as LAYOUT_PATTERNS
from debug_hang.analyse.group_layout import name_group_disagreement
from debug_hang.analyse.patterns import settings
from debug_hang.analyse.progress import rules
from debug_hang.analyse.proof import prove
from debug_hang.analyse.rootcause import chains
from debug_hang.analyse.verdict import quote_deaths, youngest_task_age_s
from debug_hang.collect.address import ClusterAddress, check_reachable, parse_address, resolve_dashboard
from debug_hang.collect.evidence import gather
from debug_hang.collect.libraries import READ_TIMEOUT_S as LIBRARY_READ_S
from debug_hang.collect.libraries import LibraryReader, replica_targets
from debug_hang.collect.raytrain import worker_ranks
from debug_hang.collect.stacks import (
    MAX_TARGETS,
    Target,
    cap_targets,
    collect_stacks,
    select_targets,
    take_window_starts,
)
from debug_hang.collect.state import (
    JOB_LISTS,
    DashboardClient,
    ProgressReading,
    job_rows,
    merge_job_rows,
    progress_reading,
    take_snapshot,
    task_key,
)
from debug_hang.collect.versions import read_versions
from debug_hang.errors import DeadlineError, NotFoundError
from debug_hang.model import Collection, CollectionError, Evidence, NodeEvidence, Process, ProcessRef, process_from_dict, stacks_from_dict
from debug_hang.parse.flight_recorder import from_probe, read_saved
from debug_hang.probe.pyspy import DumpOptions
from debug_hang.redact import DEFAULT as redactor
from debug_hang.redact import learn_digests, learn_runtime_envs, redact_obj
from debug_hang.report.write import write_outputs
from debug_hang.rows import tasks_of
from debug_hang.snapshot import Snapshot, running_jobs
from debug_hang.timeouts import DEFAULT_DEADLINE_S, Deadline, PhaseTimer

FRESH_TASK_S = 5.0  # a wait on a task younger than this is not yet evidence of a hang
# A second round of samples is taken only with this much of the deadline left (its samples, the
# second task listing, the evidence and the writing after it).
EXTRA_ROUND_MIN_S = 12.0
# A job still starting is read again STARTING_STEP_S later, STARTING_READS readings in all, while
# more than STARTING_MIN_LEFT_S of the deadline is left (a reading and its outputs need ~20 s).
STARTING_STEP_S = 5.0
STARTING_READS = 3
STARTING_MIN_LEFT_S = 40.0
LIBRARY_JOIN_S = 1.0  # waited at most for a library reading once the progress window is read


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
    force: bool = False  # replace the outputs of an earlier run in output_dir
    include_runtime_env: bool = False  # write runtime_env/metadata rows (may hold secrets)
    max_targets: int = MAX_TARGETS  # processes dumped at most (by priority; the cut is reported)


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


def run(opts: Options) -> Diagnosis:
    """Diagnose one job end to end (see module docstring); raises only when nothing can be done.

    A job found still starting (a demand not placed yet with its resources free: workers start
    slowly on a loaded node) is read again a few seconds later, within the deadline, instead of
    asking the user to rerun; the report says so."""
    started = time.monotonic()
    deadline = Deadline(opts.deadline_s)
    notes: list[str] = []
    for reading in range(1, STARTING_READS + 1):
        again = reading < STARTING_READS
        diag = _run_once(opts, deadline, started, notes, again)
        if not _read_again(diag, again, deadline):
            return diag
        notes.append(f"reading {reading} found the job still starting ({diag.summary[:160]}): read again "
                     f"{STARTING_STEP_S:g}s later")
        opts = replace(opts, job_id=diag.job_id or opts.job_id)  # the same job, whatever starts meanwhile
        time.sleep(STARTING_STEP_S)
    return diag


def _read_again(diag: Diagnosis, again: bool, deadline: Deadline) -> bool:
    """True when a reading found the job still starting and another one fits in the deadline."""
    return again and diag.starting and deadline.remaining() > STARTING_MIN_LEFT_S


def _run_once(opts: Options, deadline: Deadline, started: float, notes: list[str], again: bool) -> Diagnosis:
    """One reading of the cluster and its analysis. With `again`, a job found still starting is
    returned as soon as that is known: neither evidence nor outputs (the caller reads it again)."""
    timer = PhaseTimer()
    addr: ClusterAddress = parse_address(opts.address)
    check_reachable(addr)
    addr = resolve_dashboard(addr, timeout_s=deadline.remaining(cap=5.0))
    assert addr.dashboard_url
    timer.mark("address")
    snap = take_snapshot(addr.dashboard_url, None, timeout_s=deadline.remaining(cap=10.0))
    snap.versions = read_versions(addr, timeout_s=deadline.remaining(cap=3.0))
    scrub_snapshot(snap)
    learnt_before = redactor.learnt
    timer.mark("state")
    if not snap.jobs and snap.errors:
        if deadline.expired:
            raise DeadlineError(f"the {opts.deadline_s:.0f}s deadline passed before the State API answered "
                                f"({snap.errors[0][:200]}); rerun with a larger --deadline")
        # The State API is down (dashboard dead or overloaded): partial results beat none.
        return _without_state_api(opts, addr, snap, deadline, started)
    job, why, others = pick_job(snap.jobs, opts.job_id, own_job=_own_job_id())
    # The job's own rows in every state (its history), read while the stacks are taken.
    own_rows = job_rows(addr.dashboard_url, str(job.get("job_id")), timeout_s=deadline.remaining(cap=10.0))
    # Ray's libraries' own state: Serve's replicas are dumped like the job's actors (a deployment
    # may belong to another job), Ray Data's progress is read now and after the window.
    libs = LibraryReader(addr.dashboard_url, str(job.get("job_id")), snap.actors)
    libs.start_data(deadline.remaining(cap=LIBRARY_READ_S))
    serve = libs.read_serve(deadline.remaining(cap=LIBRARY_READ_S))
    own_targets = select_targets(job, snap.actors, snap.tasks, snap.nodes)
    targets, cut = cap_targets(own_targets + replica_targets(serve, own_targets), job, snap.tasks, opts.max_targets)
    dump_options = DumpOptions(native=opts.native, nonblocking=opts.nonblocking, locals=opts.locals,
                               timeout_s=min(10.0, deadline.remaining()), facts=True)
    collection = collect_stacks(addr, targets, dump_options, deadline, samples=opts.samples, interval_s=opts.interval_s,
                                serve_metrics=serve is not None)
    starts = take_window_starts(collection)  # where a second round of samples would read its window from
    history_read = own_rows.join(deadline.remaining(cap=10.0))
    if not history_read:
        snap.warnings.append("the job's own tasks and actors were not read in time: only its unfinished ones are used")
    if merge_job_rows(snap, own_rows) or redactor.learnt > learnt_before:
        scrub_snapshot(snap)  # the job's rows read since, and values first seen in the targets' environments
    timer.mark("stacks")
    errors: list[CollectionError] = []
    if cut:
        errors.append(CollectionError(
            f"{cut} of {len(targets) + cut} processes of the job were not dumped: at most {opts.max_targets} per "
            "diagnosis (--max-targets), those in unfinished calls, their peers and the actors they wait on first",
            kind="targets-capped"))
    _add_train_ranks(addr.dashboard_url, job, snap, collection, deadline, errors)
    timer.mark("ranks")
    # Progress is judged on the task states between the first listing and a second one. When a
    # task started moments ago, stretch that window to FRESH_TASK_S so that a healthy job's next
    # step has time to show (a hung job costs at most those few seconds more).
    age = youngest_task_age_s(job.get("job_id"), tasks_of(snap.tasks), snap.taken_at)
    if age is not None:
        window = time.time() - snap.taken_at
        wait = min(FRESH_TASK_S - max(age, window), deadline.remaining() - 5.0)
        if wait > 0:
            time.sleep(wait)
    # A job whose history passes the listing limit is read again by state and task id: a job-wide
    # listing would hold an arbitrary 10,000 of its rows and could miss the tasks that matter.
    # (A history not read in time or at all is as good as cut: a job-wide listing would be as slow.)
    history_cut = not history_read or "tasks_of_job" in snap.truncated or own_rows.tasks.error is not None
    libs.start_data(deadline.remaining(cap=LIBRARY_READ_S))  # the datasets' progress over the window
    after = _progress_window(addr.dashboard_url, job, snap, history_cut, deadline)
    # The first reading has had the stacks' time; the second gets a second at most past the window.
    libs.join(deadline.remaining(cap=LIBRARY_JOIN_S))
    libs.store(snap)
    snap.warnings += after.notes
    timer.mark("progress_window")

    def analysed() -> Diagnosis:
        failed = [CollectionError(f"second task listing failed: {after.error}")] if after.error else []
        return analyse(job, snap, collection, None if after.error else after.rows, addr.gcs, why, others,
                       errors + failed + [CollectionError(e) for e in snap.errors], started)

    diag = analysed()
    more = sampling.plan(diag, snap.taken_at)
    rounds = 1
    if more.refs:
        # The answer turns on these processes: sample them again, within the deadline, and read
        # the job's tasks once more over the longer window.
        extra = [t for t in targets if t.ref in more.refs
                 or any(collection.info.get(r, {}).get("child_of") == t.pid and r.node_id == t.node_id for r in more.refs)]
        if extra and deadline.remaining() > EXTRA_ROUND_MIN_S:
            second = collect_stacks(addr, extra, dump_options, deadline, samples=sampling.extra_samples(),
                                    interval_s=opts.interval_s, since=starts)
            take_window_starts(second)
            merge_round(collection, second)
            rounds = 2
            timer.mark("more_samples")
            snap.warnings = [w for w in snap.warnings if w not in after.notes]
            libs.start_data(deadline.remaining(cap=LIBRARY_READ_S))  # and the datasets' progress
            after = _progress_window(addr.dashboard_url, job, snap, history_cut, deadline)
            libs.join(deadline.remaining(cap=LIBRARY_JOIN_S))
            libs.store(snap)
            snap.warnings += after.notes
            diag = analysed()
        else:
            more.why.append(f"not taken: {deadline.remaining():.0f}s left of the deadline" if extra
                            else "not taken: those processes were not dump targets")
    if _read_again(diag, again, deadline):
        return diag
    diag.sampling = sampling.summary(collection, more.why, rounds, readings=notes)
    finish(diag, snap)
    timer.mark("analysis")
    if diag.causes and not deadline.expired:
        try:
            add_evidence(diag, gather(DashboardClient(addr.dashboard_url, timeout_s=deadline.remaining(cap=8.0)),
                                      diag.graph, diag.chain_keys() + _collective_ranks(diag), _history(snap.tasks, after), job))
        except Exception as exc:  # noqa: BLE001 - evidence is a bonus: report and go on
            diag.errors.append(CollectionError(f"evidence gathering failed: {exc}"))
    timer.mark("evidence")
    diag.timings = timer.phases
    diag.seconds = time.monotonic() - started
    if opts.output_dir is not None:
        write_outputs(diag, opts.output_dir, after.rows, force=opts.force,
                      include_runtime_env=opts.include_runtime_env)
        timer.mark("write")
    return diag


def _progress_window(dashboard_url: str, job: dict[str, Any], snap: Snapshot, history_cut: bool,
                     deadline: Deadline) -> ProgressReading:
    """The job's tasks read again, to compare with the first reading (progress_reading), and what
    the reading itself says about its completeness (`notes`, and the cut on `snap.truncated`)."""
    client = DashboardClient(dashboard_url, timeout_s=deadline.remaining(cap=10.0))
    after = progress_reading(client, str(job.get("job_id")), snap.tasks, history_cut, deadline)
    if after.cut:  # a completion past the cut is not seen: progress may be missed
        snap.truncated["tasks_after"] = after.cut
    notes = list(after.notes)
    if after.mode == "by-id":
        notes.append(
            "the job has more task records than one State API answer holds: the progress window "
            + ("listed its unfinished tasks and " if after.listed else "")
            + f"read {after.read_by_id} tasks unfinished at the first reading again by task id "
            f"({after.ended} ended since, {after.open_now} rows not finished)")
    after.notes = notes
    after.rows = redact_obj(after.rows)
    return after


def merge_round(collection: Collection, more: Collection) -> None:
    """A second round of samples joins the first: its stacks numbered after the first round's,
    its per-process readings (taken over both rounds) replacing the first round's, the times of
    the samples of both kept, its failures added."""
    offset = max((p.sample for p in collection.processes), default=-1) + 1
    for proc in more.processes:
        proc.sample += offset
        collection.processes.append(proc)
    for ref, info in more.info.items():
        was = collection.info.get(ref, {})
        collection.info[ref] = {**was, **info,
                                "sampled_at": list(was.get("sampled_at") or []) + list(info.get("sampled_at") or [])}
    collection.errors += more.errors
    collection.seconds += more.seconds
    for node_id, seconds in more.probe_seconds.items():
        collection.probe_seconds[node_id] = collection.probe_seconds.get(node_id, 0.0) + seconds


def _history(before: list[dict[str, Any]], after: ProgressReading) -> list[dict[str, Any]]:
    """The task rows evidence reads histories from: the second reading when it holds the whole
    job, else the first reading's rows updated by the second (by task id and attempt)."""
    if after.mode == "full" and after.rows:
        return after.rows
    rows = {task_key(t): t for t in before}
    rows.update({task_key(t): t for t in after.rows})
    return list(rows.values())


def finish(diag: Diagnosis, snap: Snapshot) -> None:
    """The steps after the analysis that every path shares — a live run, a saved folder
    re-analysed, the State-API-down fallback — so that a folder re-runs to the live verdict:
    the Flight Recorder joined, findings weighed by what the State API cut, and no "no hang" when
    the job's task or actor state could not be read."""
    add_flight_recorder(diag)
    weigh_truncation(diag, snap.truncated)
    _settle_unread_state(diag, snap)
    diag.proofs = prove(diag)


def _settle_unread_state(diag: Diagnosis, snap: Snapshot) -> None:
    """No "no hang" (and a hang only from what one process's stacks prove) when the job's task
    or actor state could not be read."""
    missing = [e for e in snap.errors if "/api/v0/tasks" in e or "/api/v0/actors" in e]
    if not missing:
        return
    unread = f"Task or actor state could not be read ({missing[0][:200]})"
    if diag.verdict == "no-hang":
        diag.verdict = "inconclusive"
        diag.summary = f"{unread}; the stacks alone do not show a hang."
    elif diag.verdict == "hang" and not all(c.cycle or c.pattern in rules().proven_without_task_state for c in diag.causes[:1]):
        top = diag.causes[0]
        diag.verdict = "inconclusive"
        diag.summary = (f"{unread}. From the stacks alone the candidate is {top.pattern} in {top.culprits[0].label()}, "
                        "but a call nobody could see run or finish may still release it: get the State API answering "
                        "(the dashboard's /api/v0/tasks and /api/v0/actors) and diagnose again.")


def _collective_ranks(diag: Diagnosis) -> list[str]:
    """The ranks waiting in a collective cause (not all are on a reported chain): their logs hold
    the layout each rank built (group_layout.py)."""
    return [k for c in diag.causes if c.pattern in LAYOUT_PATTERNS for k in c.victims
            if (n := diag.graph.nodes.get(k)) is not None and n.pid and n.kind != "driver"]


def add_evidence(diag: Diagnosis, evidence: Evidence) -> None:
    """The log and history evidence of the chains (read live, or from a saved folder), and what it
    says of each crash loop's deaths."""
    diag.evidence = evidence
    quote_deaths(diag)
    name_group_disagreement(diag)  # the ranks' own layout lines, just read
    name_dead_holder(diag)  # a retry's poll naming what its dead attempt printed
    diag.proofs = prove(diag)  # the failed call's traceback is in the logs just read


def weigh_truncation(diag: Diagnosis, truncated: dict[str, dict[str, int]]) -> None:
    """Record the State API lists that came back incomplete; when one could hold the job's rows,
    every finding is less sure by the catalog's `truncated_penalty` (a missing row can be a link)."""
    diag.truncated = dict(truncated)
    if any(name in JOB_LISTS for name in truncated):
        for cause in diag.causes:
            cause.confidence = max(0.0, cause.confidence - settings().truncated_penalty)


def scrub_snapshot(snap: Snapshot) -> None:
    """Learn the secret env_vars of every job's, actor's and task's runtime_env, then redact the
    rows in memory: names and messages are cut to a few hundred characters later, and a cut
    token would escape the final pass at the writer."""
    learn_runtime_envs([*snap.jobs, *snap.actors, *snap.tasks])
    snap.jobs, snap.actors, snap.tasks = (redact_obj(snap.jobs), redact_obj(snap.actors), redact_obj(snap.tasks))


def add_flight_recorder(diag: Diagnosis) -> None:
    """Read the Flight Recorder dumps the probes brought back, analyse them, join them with the graph."""
    nodes = diag.collection.flight_recorder
    if not nodes:
        return
    dumps, problems = [], []
    for node in nodes:
        read = from_probe(list(node.get("dumps") or []), node.get("node_id"))
        dumps += read.dumps
        problems += read.errors
        problems += [f"{s.get('path')}: {s.get('reason')}" for s in node.get("skipped") or []]
    sizes = [int(v) for info in diag.collection.info.values() for k, v in (info.get("env") or {}).items()
             if k == "WORLD_SIZE" and str(v).isdigit()]
    fr = analyse_fr(dumps, max(sizes) if sizes else None, problems)
    diag.flight_recorder = fr
    if dumps:
        diag.fr_notes = attach(diag.graph, diag.causes, fr)
        diag.chains = chains(diag.graph, diag.causes)  # the collective edges now carry the recorder's facts
    else:
        prefixes = sorted({p for node in nodes for p in node.get("prefixes") or []})
        diag.fr_notes = [f"Flight Recorder: enabled, but no dump file of this job under {', '.join(prefixes)} "
                         "(gloo never dumps by itself; NCCL dumps on a watchdog timeout with TORCH_NCCL_DUMP_ON_TIMEOUT=1)"]
    pipes = sorted({p for node in nodes for p in node.get("pipes") or []})
    if pipes:
        diag.fr_notes.append(f"Flight Recorder: a fresh dump can be asked for on the rank's node with `echo 1 > {pipes[0]}` "
                             f"({len(pipes)} pipe(s); debug-hang never writes to them)")


def _add_train_ranks(dashboard_url: str, job: dict[str, Any], snap: Snapshot, collection: Collection,
                     deadline: Deadline, errors: list[CollectionError]) -> None:
    """Ranks of Ray Train workers, which no process environment holds (see raytrain.py)."""
    if deadline.remaining() < 1.0:
        errors.append(CollectionError("no time left to read Ray Train ranks", kind="deadline"))
        return
    client = DashboardClient(dashboard_url, timeout_s=deadline.remaining(cap=5.0))
    ranks, problems = worker_ranks(client, job.get("job_id"), snap.actors, snap.nodes)
    errors += [CollectionError(p) for p in problems]
    for proc in collection.processes:
        rank = ranks.get(proc.ref)
        if rank is not None and proc.rank is None:
            proc.rank = rank
            collection.info.setdefault(proc.ref, {})["rank_source"] = "Ray Train controller log"


# Ray's own processes: never the job's code, not worth a dump when hunting blindly.
_SYSTEM_TITLES = ("ray::IDLE", "ray::JobSupervisor", "ray::DashboardAgent", "ray::RuntimeEnvAgent",
                  "ray::_QueueActor", "ray::debug-hang")


def local_ray_workers() -> list[int]:
    """PIDs of this machine's Ray worker processes running job code (`ray::<Class>.<method>`)."""
    from debug_hang.probe.pyspy import read_title

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
    targets = [Target(pid=pid, node_id="local", role="worker") for pid in local_ray_workers()]
    note = ("the State API did not answer (" + "; ".join(snap.errors)[:300] + "): only the Ray worker "
            f"processes of this machine ({len(targets)}) were dumped, without task state or other nodes")
    collection = Collection(targets=len(targets))
    if targets:
        from debug_hang.probe.node_probe import probe_node

        value = probe_node("local", [t.pid for t in targets],
                           DumpOptions(native=opts.native, nonblocking=opts.nonblocking, locals=opts.locals,
                                       facts=True).to_dict(),
                           opts.samples, opts.interval_s, True, deadline.remaining(cap=30.0))
        learn_digests(value.pop("redact_digests", None))
        for raw in value.get("processes", []):
            proc = process_from_dict(raw)
            proc.role = "worker"
            cls, _ = proc.title_parts
            proc.actor_class = cls
            collection.processes.append(proc)
        collection.errors += [CollectionError.from_dict(e, "local") for e in value.get("errors", [])]
        collection.info = {ProcessRef("local", int(k)): {"node_id": "local", **v} for k, v in (value.get("info") or {}).items()}
        take_window_starts(collection)
        if isinstance(value.get("flight_recorder"), dict):
            collection.flight_recorder.append({**value["flight_recorder"], "node_id": "local"})
        collection.nodes = 1
    errors = [CollectionError(note, kind="state-api-down")]
    diag = analyse({"job_id": None}, snap, collection, None, addr.gcs, "unknown: the State API is down", [],
                   errors, started)
    finish(diag, snap)
    diag.sampling = sampling.summary(collection)
    # Without task state no wait can be followed: stacks alone are candidates, not a verdict.
    diag.verdict = "inconclusive"
    candidates = ", ".join(f"{c.pattern} in {c.culprits[0].label()}" for c in diag.causes[:3]) or "none"
    diag.summary = (f"Partial diagnosis: {note}. Candidates from the stacks alone: {candidates}. Next: get the "
                    "dashboard answering again, or dump every node with scripts/run_on_each_ray_node.py --dump PIDS.")
    if opts.output_dir is not None:
        write_outputs(diag, opts.output_dir, force=opts.force, include_runtime_env=opts.include_runtime_env)
    return diag


def _own_job_id() -> str | None:
    """The job id of this process when it is itself a Ray driver (so it never diagnoses itself).
    A process that never imported Ray is no driver: Ray is not imported for this (~250 ms)."""
    ray = sys.modules.get("ray")
    if ray is None:
        return None
    try:
        if ray.is_initialized():
            return str(ray.get_runtime_context().get_job_id())
    except Exception:  # noqa: BLE001 - best effort
        return None
    return None


@dataclass
class Capture:
    """A saved output folder, read back: what the analysis needs to run again."""

    job: dict[str, Any]
    snapshot: Snapshot
    collection: Collection
    tasks_after: list[dict[str, Any]] | None
    meta: dict[str, Any]


def load_capture(folder: Path) -> Capture:
    """Read snapshot.json, stacks.json and tasks_after.json of a recorded output folder."""
    snap = Snapshot.from_dict(json.loads((folder / "snapshot.json").read_text()))
    doc = json.loads((folder / "stacks.json").read_text())
    processes: list[Process] = stacks_from_dict(doc)
    meta = doc.get("meta") or {}
    coll = Collection(processes=processes, info=Collection.info_from_json(meta.get("info")),
                      errors=[CollectionError.from_dict(e) for e in meta.get("errors") or []], nodes=int(meta.get("nodes") or 0),
                      targets=int(meta.get("targets") or 0), seconds=float(meta.get("seconds") or 0.0),
                      paths=dict(meta.get("paths") or {}), probe_seconds=dict(meta.get("probe_seconds") or {}),
                      flight_recorder=read_saved(folder / "flight_recorder"),
                      library_metrics=dict(meta.get("library_metrics") or {}))
    job = next((j for j in snap.jobs if j.get("job_id") == meta.get("job_id")), {"job_id": meta.get("job_id")})
    after_path = folder / "tasks_after.json"
    after = json.loads(after_path.read_text()) if after_path.exists() else None
    return Capture(job=job, snapshot=snap, collection=coll, tasks_after=after, meta=meta)


def reanalyse(folder: Path, out: Path | None = None, force: bool = False) -> Diagnosis:
    """Re-run the analysis on a recorded output folder (snapshot.json + stacks.json); with `out`,
    write a whole output folder there from it (report.md, diagnosis.json, graph.svg, report.html
    and the capture again, so that it re-analyses too)."""
    cap = load_capture(folder)
    meta, snap, job = cap.meta, cap.snapshot, cap.job
    diag = analyse(job, snap, cap.collection, cap.tasks_after, str(meta.get("address") or ""),
                   str(meta.get("job_choice") or ""), [j for j in snap.jobs if j is not job],
                   [CollectionError(e) for e in snap.errors], time.monotonic())
    diag.seconds = float(meta.get("diagnosis_seconds") or diag.seconds)
    diag.sampling = dict(meta.get("sampling") or sampling.summary(cap.collection))
    finish(diag, snap)
    ev_path = folder / "evidence.json"
    if ev_path.exists():
        raw = json.loads(ev_path.read_text())
        add_evidence(diag, Evidence(
            per_node={k: NodeEvidence(highlights=v.get("highlights", []), history=v.get("history", []),
                                      errors=v.get("errors", [])) for k, v in (raw.get("per_node") or {}).items()},
            driver_highlights=list(raw.get("driver_highlights") or []), errors=list(raw.get("errors") or [])))
        read_saved_logs(folder, diag, raw)
    if out is not None:
        write_outputs(diag, out, cap.tasks_after, force=force)
    return diag


SAVED_LOG_BYTES = 1 << 20  # a saved log tail is read up to this much (the writer keeps 200 lines)


def read_saved_logs(folder: Path, diag: Diagnosis, raw: dict[str, Any]) -> None:
    """The log tails a saved folder holds (`logs/`) back on its evidence, as the live run had them,
    and the proofs made again from them (a failed call's traceback is read there). Files are
    found by the names evidence.json gives; a folder written before it gave them, by pid."""
    logs, ev = folder / "logs", diag.evidence
    if ev is None or not logs.is_dir() or logs.is_symlink():
        return
    ev.driver_log = _read_bounded(logs / "driver.log")
    names = sorted(p.name for p in logs.iterdir())
    for key, node_ev in ev.per_node.items():
        given = ((raw.get("per_node") or {}).get(key) or {}).get("logs")
        node = diag.graph.nodes.get(key)
        if isinstance(given, dict):
            pairs = [(str(s), str(n).rsplit("/", 1)[-1]) for s, n in given.items()]
        elif node is not None and node.pid:
            own = re.compile(rf"^[A-Za-z0-9_]+-{node.pid}(-[0-9a-f]{{8}})?\.(err|out)$")
            pairs = [(n.rsplit(".", 1)[1], n) for n in names if own.match(n)]
        else:
            pairs = []
        for suffix, name in pairs:
            if name in names:
                node_ev.logs.setdefault(suffix, _read_bounded(logs / name))
    name_group_disagreement(diag)
    name_dead_holder(diag)
    diag.proofs = prove(diag)


def _read_bounded(path: Path) -> str:
    """A saved text file, at most SAVED_LOG_BYTES of its end, never through a link ("" if absent)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(max(0, size - SAVED_LOG_BYTES))
        return fh.read(SAVED_LOG_BYTES).decode("utf-8", errors="replace")
