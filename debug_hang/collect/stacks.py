"""Choose the processes that matter from the State API and dump them, one round trip per node.

Targets: the job's live actors, the workers running its normal tasks, its driver, and (on the
node) their child processes. Each node's targets are dumped together: directly with py-spy when
the node's raylet runs on this machine in this PID namespace, otherwise by one pinned, CPU-free
Ray helper task on that node. Failures are collected, never raised.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import Any

from debug_hang.collect.address import ClusterAddress, node_info_reply, raylet_sockets
from debug_hang.collect.nodes import HELPER_FAILED, MAX_NODES_IN_FLIGHT, NOT_SCHEDULED, VERSION_MISMATCH, VersionMismatchError
from debug_hang.model import Collection, CollectionError, Process, ProcessRef, error_kind, process_from_dict
from debug_hang.probe.node_probe import local_raylets, probe_node, raylets_here
from debug_hang.probe.pyspy import DumpOptions
from debug_hang.redact import learn_digests
from debug_hang.snapshot import DONE_STATES, calls_into_other_jobs
from debug_hang.timeouts import Deadline, call_with_timeout


@dataclass
class Target:
    """A process to dump, with what the State API says about it."""

    pid: int
    node_id: str | None
    role: str  # driver | actor | task
    job_id: str | None = None
    actor_id: str | None = None
    actor_class: str | None = None
    actor_name: str | None = None
    task_id: str | None = None
    task_name: str | None = None

    @property
    def ref(self) -> ProcessRef:
        return ProcessRef(self.node_id, self.pid)


def select_targets(job: dict[str, Any], actors: list[dict[str, Any]],
                   tasks: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None) -> list[Target]:
    """The job's processes worth a stack: live actors, workers of running tasks, the driver.

    Ray 2.60 reports a running actor constructor with `node_id: null`: on a one-node cluster
    that node is the only possible one, so the process is still dumped.
    """
    job_id = job.get("job_id")
    alive = [n.get("node_id") for n in nodes or [] if n.get("state") == "ALIVE"]
    only_node = alive[0] if len(alive) == 1 else None
    found: dict[tuple[str | None, int], Target] = {}
    actor_nodes = {str(a.get("actor_id")): a.get("node_id") for a in actors if a.get("node_id")}
    called = {t.get("actor_id") for t in calls_into_other_jobs(job_id, tasks)}
    for actor in actors:
        if (actor.get("job_id") != job_id and actor.get("actor_id") not in called) or actor.get("state") != "ALIVE":
            continue
        pid = int(actor.get("pid") or 0)
        if pid <= 0:
            continue
        found[(actor.get("node_id"), pid)] = Target(
            pid=pid, node_id=actor.get("node_id"), role="actor", job_id=actor.get("job_id"),
            actor_id=actor.get("actor_id"), actor_class=actor.get("class_name"),
            actor_name=actor.get("name") or None,
        )
    for task in tasks:
        if task.get("job_id") != job_id or task.get("state") != "RUNNING":
            continue
        pid = int(task.get("worker_pid") or 0)
        node_id = task.get("node_id") or actor_nodes.get(task.get("actor_id") or "") or only_node
        key = (node_id, pid)
        if pid <= 0:
            continue
        if key in found:
            target = found[key]
            if target.role == "actor" and task.get("type") == "ACTOR_TASK":
                target.task_id, target.task_name = task.get("task_id"), task.get("name")
            continue
        if task.get("type") == "ACTOR_CREATION_TASK" and task.get("actor_id"):
            # A constructor still running (the actor is PENDING_CREATION): the process is the actor.
            row = next((a for a in actors if a.get("actor_id") == task["actor_id"]), {})
            found[key] = Target(pid=pid, node_id=node_id, role="actor", job_id=job_id, actor_id=task["actor_id"],
                                actor_class=row.get("class_name") or str(task.get("name", "")).split(".")[0],
                                actor_name=row.get("name") or None, task_id=task.get("task_id"), task_name=task.get("name"))
            continue
        found[key] = Target(pid=pid, node_id=node_id, role="task", job_id=job_id,
                            task_id=task.get("task_id"), task_name=task.get("name"))
    driver = job.get("driver_info") or {}
    driver_pid = int(driver.get("pid") or 0)
    if driver_pid > 0:
        node_id = job.get("driver_node_id") or only_node
        found.setdefault((node_id, driver_pid), Target(pid=driver_pid, node_id=node_id,
                                                       role="driver", job_id=job_id))
    return list(found.values())


# Processes dumped per diagnosis at most: a job of thousands of actors is read by its most
# telling few hundred (see cap_targets), and the report says how many were left out.
MAX_TARGETS = 256


def cap_targets(targets: list[Target], job: dict[str, Any], tasks: list[dict[str, Any]],
                max_targets: int = MAX_TARGETS) -> tuple[list[Target], int]:
    """At most `max_targets` targets, by priority: processes in unfinished calls (and the
    driver), then their collective peers (actors of the same class), then culprit candidates
    (actors that unfinished calls wait on), then the rest. Returns (kept, how many were cut)."""
    if len(targets) <= max_targets:
        return targets, 0
    job_id = job.get("job_id")
    busy_classes = {t.actor_class for t in targets if t.task_id and t.actor_class}
    called = {t.get("actor_id") for t in tasks if t.get("job_id") == job_id and t.get("actor_id")
              and t.get("state") not in DONE_STATES}

    def rank(t: Target) -> int:
        if t.role == "driver" or t.task_id:
            return 0
        if t.actor_class and t.actor_class in busy_classes:
            return 1
        if t.actor_id in called:
            return 2
        return 3

    ordered = sorted(targets, key=rank)  # stable: the State API's order within a priority
    return ordered[:max_targets], len(targets) - max_targets


# One node's probe: two samples with a stuck dump each (pyspy.DUMP_TIMEOUT_S) fit in it; a
# slower node answers with what it has by then, and a silent one frees its slot for the others.
NODE_BUDGET_S = 25.0
# From a helper's submission to its probe's start: a worker process starting on a busy node.
HELPER_START_S = 10.0
# Local probes (threads of this process) at once: on a real cluster only the head is local; on a
# loopback test cluster every node is, and they share this machine's cores (their py-spy runs
# are bounded together by pyspy.MAX_PARALLEL_DUMPS).
MAX_LOCAL_PROBES = 32


def collect_stacks(address: ClusterAddress, targets: list[Target], options: DumpOptions,
                   deadline: Deadline, samples: int = 2, interval_s: float = 0.5,
                   children: bool = True, max_in_flight: int = MAX_NODES_IN_FLIGHT,
                   serve_metrics: bool = False,
                   since: dict[ProcessRef, dict[str, Any]] | None = None) -> Collection:
    """Dump every target on its own node; local nodes directly, remote ones by a helper task.

    One probe per node, at most `max_in_flight` remote ones (helper tasks) and MAX_LOCAL_PROBES
    local ones (threads here) at once, the next started as one finishes. Each probe answers by its own
    absolute deadline with what it has; a node that does not answer is an error row, the
    others' stacks are kept. The local probes' py-spy processes share this process's
    MAX_PARALLEL_DUMPS slots, so many local "nodes" (a loopback cluster) never oversubscribe
    this machine. With `serve_metrics`, each probe also reads its node's Ray Serve counters;
    `since` (window_starts of an earlier round) makes this round's CPU use and progress readings
    span both rounds.
    """
    start = time.monotonic()
    by_node: dict[str, list[Target]] = {}
    coll = Collection(targets=len(targets))
    for target in targets:
        if target.node_id is None:
            coll.errors.append(CollectionError("node unknown for this process; not dumped", pid=target.pid))
            continue
        by_node.setdefault(target.node_id, []).append(target)
    coll.nodes = len(by_node)
    results: dict[str, dict[str, Any]] = {}
    local: dict[str, tuple[Any, ...]] = {}
    remote: dict[str, tuple[Any, ...]] = {}
    here = local_nodes(address, timeout_s=deadline.remaining(cap=2.0))
    # The whole collection's end, as wall clock for a local probe that starts late (its turn
    # came late); a remote helper is told its own node's end by run_on_nodes ...
    total = max(deadline.remaining(cap=45.0) - 2.0, 1.0)
    deadline_epoch = time.time() + total
    # ... and each probe's own budget from its start, so a slow node answers with what it has.
    budget = min(NODE_BUDGET_S, total)
    for node_id, node_targets in by_node.items():
        starts = {str(t.pid): since[t.ref] for t in node_targets if since and t.ref in since}
        probe_options = {**options.to_dict(), **({"serve_metrics": True} if serve_metrics else {})}
        args = (node_id, [t.pid for t in node_targets], probe_options, samples, interval_s, children, budget,
                starts or None)
        is_local = node_id in here
        coll.paths[node_id] = "local" if is_local else "ray-task"
        (local if is_local else remote)[node_id] = args
    local_bound = max(1, min(max_in_flight, MAX_LOCAL_PROBES, len(local)))
    pool = ThreadPoolExecutor(max_workers=local_bound, thread_name_prefix="debug-hang-probe")
    try:
        # Local nodes are probed directly, in parallel with the remote nodes' helper tasks.
        futures = {node_id: pool.submit(partial(probe_node, deadline_epoch=deadline_epoch), *args)
                   for node_id, args in local.items()}
        if remote:
            _run_remote(address, remote, deadline, coll, results, max_in_flight, budget + HELPER_START_S)
        done, _ = wait(futures.values(), timeout=max(start + total + 1.0 - time.monotonic(), 0.0))
        for node_id, future in futures.items():
            if future not in done:
                started = not future.cancel()
                coll.errors.append(CollectionError(
                    f"local probe {'did not finish' if started else 'never started'} within {total:.0f}s"
                    + ("" if started else f" (at most {local_bound} local nodes probed at once)"),
                    node_id=node_id, kind=error_kind(HELPER_FAILED if started else NOT_SCHEDULED)))
                continue
            try:
                results[node_id] = future.result()
            except Exception as exc:  # noqa: BLE001 - one node's failure is data
                coll.errors.append(CollectionError(f"local dump failed: {exc}", node_id=node_id, kind=error_kind(HELPER_FAILED)))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a stuck probe never holds the collection
    targets_by_key = {t.ref: t for t in targets}
    for node_id, value in results.items():
        # The targets' secret env values, read on their node: redacted from here on (logs, rows).
        learn_digests(value.pop("redact_digests", None))
        if isinstance(value.get("seconds"), (int, float)):
            coll.probe_seconds[node_id] = float(value["seconds"])
        for err in value.get("errors", []):
            coll.errors.append(CollectionError.from_dict(err, node_id))
        for pid_text, info in (value.get("info") or {}).items():
            coll.info[ProcessRef(node_id, int(pid_text))] = {"node_id": node_id, **info}
        if isinstance(value.get("flight_recorder"), dict):
            coll.flight_recorder.append({**value["flight_recorder"], "node_id": node_id})
        if isinstance(value.get("serve_metrics"), dict):
            coll.library_metrics[node_id] = value["serve_metrics"]
        for raw in value.get("processes", []):
            proc = process_from_dict(raw)
            _tag(proc, targets_by_key, coll.info)
            coll.processes.append(proc)
    coll.seconds = time.monotonic() - start
    return coll


def local_nodes(address: ClusterAddress, timeout_s: float = 2.0) -> dict[str, int]:
    """{node_id: raylet pid} of the nodes whose raylet runs here (their PIDs are this machine's).

    A raylet started without `--node_id` (Ray 2.9, 2.10) is matched to its node by its socket
    path, from the GCS node table (one raw gRPC call, made only then); a table that cannot be read
    leaves those nodes to helper tasks, as before.
    """
    raylets = raylets_here()
    by_socket: dict[str, str] = {}
    if any(node_id is None for _, node_id, _ in raylets):
        try:
            by_socket = call_with_timeout(lambda: raylet_sockets(node_info_reply(address.gcs, timeout_s)),
                                          timeout_s + 1.0, what="reading the GCS node table")
        except Exception:  # noqa: BLE001,S110 - only a shortcut: without it these nodes are probed by helpers
            pass
    return local_raylets(by_socket)


def _run_remote(address: ClusterAddress, remote: dict[str, tuple[Any, ...]], deadline: Deadline,
                coll: Collection, results: dict[str, dict[str, Any]], max_in_flight: int,
                node_timeout_s: float) -> None:
    """Probe remote nodes through pinned helper tasks; failures go to `coll.errors`."""
    from debug_hang.collect.nodes import connect, run_on_nodes

    try:
        connect(address, timeout_s=deadline.remaining(cap=20.0))
        # Each helper is told its own end (its slot's deadline), not the collection's.
        runs = run_on_nodes(probe_node, remote, timeout_s=deadline.remaining(cap=45.0), max_in_flight=max_in_flight,
                            node_timeout_s=node_timeout_s, deadline_kw="deadline_epoch")
    except Exception as exc:  # noqa: BLE001 - report and keep the local results
        kind = VERSION_MISMATCH if isinstance(exc, VersionMismatchError) else HELPER_FAILED
        for node_id in remote:
            coll.errors.append(CollectionError(f"no helper task could run: {exc}", node_id=node_id, kind=error_kind(kind)))
        return
    for node_id, run in runs.items():
        if run.error:
            coll.errors.append(CollectionError(str(run.error), node_id=node_id, kind=error_kind(run.kind)))
        else:
            results[node_id] = run.value


def _tag(proc: Process, targets: dict[ProcessRef, Target],
         info: dict[ProcessRef, dict[str, Any]]) -> None:
    """Attach Ray identity (actor, task, job) and rank evidence to a dumped process."""
    pinfo = info.get(proc.ref, {})
    target = targets.get(proc.ref)
    parent = pinfo.get("child_of")
    if target is None and parent is not None:
        proc.role = "child"
        proc.parent_pid = parent
        target_parent = targets.get(ProcessRef(proc.node_id, parent))
        if target_parent:
            proc.job_id = target_parent.job_id
    elif target is not None:
        proc.role = target.role
        proc.job_id = target.job_id
        proc.actor_id = target.actor_id
        proc.actor_class = target.actor_class
        proc.actor_name = target.actor_name
        proc.task_id = target.task_id
        proc.task_name = target.task_name
        proc.parent_pid = pinfo.get("ppid")
    env = pinfo.get("env") or {}
    if "RANK" in env and env["RANK"].isdigit():
        proc.rank = int(env["RANK"])


def take_window_starts(coll: Collection) -> dict[ProcessRef, dict[str, Any]]:
    """Remove and return each process's readings from before its first sample (node_probe's
    `window_start`): what a later round needs to read one window over both, never written out."""
    return {ref: start for ref, info in coll.info.items() if isinstance(start := info.pop("window_start", None), dict)}
