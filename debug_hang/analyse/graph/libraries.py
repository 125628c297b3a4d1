"""Ray's libraries as part of the graph: a Serve handle's wait to its deployment's replicas, a
Serve replica whose requests are in flight and finish none, and a Ray Data consumer's wait to the
dataset operator whose output stopped.

Serve requests have no task rows (Ray Serve turns their task events off) and an awaiting coroutine
shows no stack: the edges come from the Serve controller's state (applications, deployments,
replicas) and the node's Serve metrics (a caller's requests in flight per deployment, a replica's
requests in flight), and a replica's progress from its request log. Ray Data's consumer waits in
Ray Data's own queues and sleeps: the edges come from the dataset's operators (the dashboard's Ray
Data endpoint) and the actors and tasks running their unfinished work.
"""

from __future__ import annotations

import os
import re
from typing import Any

from debug_hang.analyse.fixes import choose
from debug_hang.analyse.graph.builder import Builder, follows, graph_pass
from debug_hang.analyse.graph.events import _later_callers
from debug_hang.analyse.graph.model import GNode
from debug_hang.analyse.graph.raycalls import follow_submitted, node_for_task
from debug_hang.analyse.patterns import catalog, is_library
from debug_hang.libraries import ACCESS_LINE, Dataset, Deployment, LibraryState, Operator, Replica
from debug_hang.model import Frame, Process
from debug_hang.rows import TaskRow, actor_of_task
from debug_hang.snapshot import DRIVER_TASK_PREFIX

ONGOING = "ray_serve_num_ongoing_requests_at_replicas"
QUEUED = "ray_serve_deployment_queued_queries"
_WORKER_LOG = re.compile(r"^worker-([0-9a-f]{56})-")
# Ray Data's streaming executor, by module path (its thread is named "StreamingExecutor-<dataset>").
EXECUTOR_FRAME = re.compile(r"ray/data/_internal/execution/streaming_executor\.py$")
# A replica is stuck when its request log has been quiet this long, and this many times longer
# than the slowest request it logged (an LLM call of 30 s is slow, not stuck, after 40 s).
QUIET_LOG_S = 3.0
QUIET_FACTOR = 10.0
_LATENCY = re.compile(r" ([\d.]+)ms\s*$")
AWAIT_NOTE = ("its request handlers are coroutines suspended in `await`, which py-spy cannot see (Python 3.14's "
              "`python -m asyncio pstree PID` can, where the replica runs 3.14); the in-flight gauge and the request "
              "log are what show them")


# ---------------------------------------------------------------- Ray Serve

def worker_ids(b: Builder, key: str) -> set[str]:
    """The Ray worker ids of one process node (the WorkerId tag its metrics carry): a driver's is
    its job id padded with f's; a worker's, from its task rows or its log files' names."""
    node = b.g.nodes[key]
    out = {t.worker_id for t in b.running.get(key, []) if t.worker_id}
    verdict = b.verdicts.get(key)
    if verdict is not None and verdict.process.role == "driver" and b.job_id:
        out.add(b.job_id + "f" * (56 - len(b.job_id)))
    info = b.inp.info.get(node.ref, {})
    for log in (info.get("progress") or {}).get("logs") or []:
        match = _WORKER_LOG.match(str(log.get("name") or ""))
        if match:
            out.add(match.group(1))
    replica = b.inp.libraries.replica_of_actor(node.actor_id)
    if replica is not None and replica.worker_id:
        out.add(replica.worker_id)
    return out


def caller_requests(b: Builder, key: str) -> dict[tuple[str, str], tuple[float, float]]:
    """{(app, deployment): (requests in flight at its replicas, queued at the handle)} of one
    process, from the Serve metrics its routers export (tagged with the calling actor and worker)."""
    node, state = b.g.nodes[key], b.inp.libraries
    wids = worker_ids(b, key)
    is_driver = node.kind == "driver" or (b.verdicts.get(key) is not None and b.verdicts[key].process.role == "driver")
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for sample in state.metrics:
        if sample.name not in (ONGOING, QUEUED):
            continue
        caller = sample.labels.get("actor_id")
        mine = (node.actor_id and caller == node.actor_id) or sample.labels.get("WorkerId") in wids \
            or (is_driver and caller == "DRIVER" and sample.labels.get("WorkerId") in wids)
        if not mine:
            continue
        dep = (sample.labels.get("application", ""), sample.labels.get("deployment", ""))
        ongoing, queued = out.get(dep, (0.0, 0.0))
        out[dep] = (ongoing + sample.value, queued) if sample.name == ONGOING else (ongoing, queued + sample.value)
    return out


def replica_node(b: Builder, replica: Replica) -> str:
    """The graph node of a replica actor (its dumped process, or a node for an undumped one)."""
    key = b.actor_node.get(replica.actor_id or "")
    if key is not None:
        return key
    key = f"actor:{replica.actor_id or replica.replica_id}"
    if key not in b.g.nodes:
        node = GNode(key=key, kind="actor", name=replica.class_name, state="unknown", actor_id=replica.actor_id,
                     class_name=replica.class_name, actor_name=replica.actor_name, node_id=replica.node_id, pid=replica.pid)
        node.evidence.append(f"Serve replica {replica.replica_id} ({replica.state}); its process was not dumped")
        b.g.nodes[key] = node
        if replica.actor_id:
            b.actor_node[replica.actor_id] = key
    return key


def _targets(state: LibraryState, wanted: dict[tuple[str, str], tuple[float, float]]) -> tuple[list[Deployment], str]:
    """The deployments a caller waits on, and how that is known."""
    busy = [d for d, (ongoing, queued) in wanted.items() if ongoing + queued > 0]
    if busy:
        return [d for d in state.deployments if (d.app, d.name) in busy], "its requests in flight (Serve metrics)"
    loaded = [d for d in state.deployments if any((state.in_flight_at(r) or 0) > 0 for r in d.replicas)]
    if loaded:
        return loaded, "which deployment is not in its metrics: the deployments with requests in flight"
    if len(state.deployments) == 1:
        return list(state.deployments), "the only deployment"
    return list(state.deployments), "which deployment is not known (no Serve metrics): every deployment"


@follows("serve-replicas")
def follow_serve(b: Builder, key: str) -> None:
    """A Serve handle's wait: to the RUNNING replicas of the deployment(s) it has requests at."""
    state = b.inp.libraries
    node = b.g.nodes[key]
    if not state.serve_read:
        node.evidence.append("waits on a Serve deployment, but the Serve controller's state was not read: "
                             "its replicas cannot be named")
        return
    if node.pattern == "serve-deploy-wait":
        _edges_to_starting_replicas(b, key)
        return
    wanted = caller_requests(b, key)
    deployments, how = _targets(state, wanted)
    for dep in deployments:
        ongoing, queued = wanted.get((dep.app, dep.name), (0.0, 0.0))
        counts = (f"{ongoing:.0f} request(s) in flight at its replicas, {queued:.0f} queued at the handle"
                  if (dep.app, dep.name) in wanted else how)
        running = [r for r in dep.replicas if r.state == "RUNNING"]
        if not running:
            node.evidence.append(f"waits on Serve deployment {dep.label} ({counts}), which has no RUNNING replica "
                                 f"(status {dep.status}{': ' + dep.message if dep.message else ''})")
            # Its requests wait for a replica to start: on the replicas being built (their __init__).
            for replica in (r for r in dep.replicas if r.state == "STARTING" and (r.actor_id or r.pid)):
                b.g.add_edge(key, replica_node(b, replica), "serve-deploy-wait",
                             f"waits on Serve deployment {dep.label} ({counts}), which has no RUNNING replica: its "
                             f"requests wait for replica {replica.replica_id} to start (STARTING: its constructor runs)")
            continue
        loaded = [r for r in running if (state.in_flight_at(r) or 0) > 0] or running
        for replica in loaded:
            b.g.add_edge(key, replica_node(b, replica), "serve-response-wait",
                         f"waits on Serve deployment {dep.label}: {counts}")


def _edges_to_starting_replicas(b: Builder, key: str) -> None:
    """A deploy call's wait (serve.run): to the replicas, in any state, of the deployments not yet
    HEALTHY (their __init__ is what the deploy waits for)."""
    node = b.g.nodes[key]
    pending = [d for d in b.inp.libraries.deployments if d.status != "HEALTHY"]
    if not pending:
        node.evidence.append("waits for a Serve application to be deployed, and every deployment is HEALTHY")
        return
    for dep in pending:
        replicas = [r for r in dep.replicas if r.actor_id or r.pid]
        if not replicas:
            node.evidence.append(f"waits for Serve deployment {dep.label} to be deployed; it has no replica yet "
                                 f"(status {dep.status}{': ' + dep.message if dep.message else ''})")
        for replica in replicas:
            b.g.add_edge(key, replica_node(b, replica), "serve-deploy-wait",
                         f"waits for Serve deployment {dep.label} to be deployed (status {dep.status}): its replica "
                         f"{replica.replica_id} is {replica.state}")


@graph_pass(after=("index_running_tasks", "detect_file_lock_waits"))
def attach_serve_callers(b: Builder) -> None:
    """A process with Serve requests in flight whose stack shows no wait (an async caller awaiting
    a DeploymentResponse: an awaiting coroutine has no frame) waits on that deployment."""
    state = b.inp.libraries
    if not state.serve_read or not state.metrics:
        return
    for key in b.verdicts:
        node = b.g.nodes[key]
        if node.pattern is not None or node.state not in ("unknown", "idle", "blocked"):
            continue
        wanted = {d: v for d, v in caller_requests(b, key).items() if v[0] + v[1] > 0}
        if not wanted:
            continue
        node.pattern, node.state = "serve-response-wait", "blocked"
        text = ", ".join(f"{app}/{dep} ({ongoing:.0f} in flight, {queued:.0f} queued)"
                         for (app, dep), (ongoing, queued) in sorted(wanted.items()))
        node.evidence.append(f"has Serve requests outstanding at {text} (Serve metrics), and no thread of it shows "
                             "the wait: an awaiting coroutine has no stack")
        _await_site(node, b.verdicts[key].process, [dep for _app, dep in wanted])


def _await_site(node: GNode, proc: Process, deployments: list[str]) -> None:
    """The line a caller awaiting a DeploymentResponse waits at, when its stack shows none (only the
    idle loop: never a frame of the loop's own): the await of a `.remote(` call in its deployment
    class's source (`Process.remote_awaits`): the only one, else the one whose text names a
    deployment it has requests at (`self.retriever` for Retriever). None fits: no line is guessed."""
    if node.user_frame is not None and not is_library(node.user_frame):
        return
    entries = [e for e in proc.remote_awaits or [] if isinstance(e.get("line"), int)]
    names = [d.lower() for d in deployments]
    if len(entries) > 1:
        entries = [e for e in entries if any(n in str(e.get("code") or "").lower() for n in names)]
    if len({(e.get("method"), e.get("line")) for e in entries}) != 1:
        return
    site = entries[0]
    node.user_frame = node.frame = Frame(function=str(site.get("method") or ""), file=str(site.get("file") or ""),
                                         line=int(site["line"]), code=str(site.get("code") or "") or None)
    node.evidence.append(f"its request awaits at {site.get('method')} line {site['line']}: `{site.get('code')}` "
                         "(the deployment's source: the one await of a handle call it can be at)")


def request_log(b: Builder, key: str, replica: Replica) -> dict[str, Any] | None:
    """The window reading of the replica's request log (probe/progress.py), when it was read."""
    name = os.path.basename(replica.log_file_path or "")
    info = b.inp.info.get(b.g.nodes[key].ref, {})
    return next((log for log in (info.get("progress") or {}).get("logs") or [] if name and log.get("name") == name), None)


def finished_requests(log: dict[str, Any]) -> int:
    """Requests the replica finished in the window: its request log's new access lines (the probe
    keeps the first and last few new lines; when it cut some and those kept are all access lines,
    every new line is taken as one)."""
    new = [str(line) for line in log.get("new") or []]
    access = sum(1 for line in new if ACCESS_LINE.search(line))
    lines = log.get("lines")
    if isinstance(lines, int) and lines > len(new) and new and access == len(new):
        return lines
    return access


def slowest_request_s(lines: list[str]) -> float:
    """The longest latency among access lines ("... OK 3.5ms"), in seconds (0 when none)."""
    found = [float(m.group(1)) / 1000.0 for line in lines if (m := _LATENCY.search(line))]
    return max(found, default=0.0)


@graph_pass(after=("follow_edges",))
def edges_replica_calls(b: Builder) -> None:
    """A replica's requests await the Ray calls they made: the calls' parent task is one of the
    replica's requests (no task row of its own), whose id names the replica's actor (actor_of_task).
    A call into the very actor that waits on the replica closes a cycle."""
    state = b.inp.libraries
    if not state.replicas:
        return
    by_parent_actor: dict[str, list[TaskRow]] = {}
    for task in b.inp.tasks:
        parent_actor = actor_of_task(task.parent_task_id)
        if parent_actor and not task.done:
            by_parent_actor.setdefault(parent_actor, []).append(task)
    for replica in state.replicas:
        key = b.actor_node.get(replica.actor_id or "")
        calls = by_parent_actor.get(replica.actor_id or "", [])
        if key is None or not calls:
            continue
        node = b.g.nodes[key]
        for task in calls:
            dst = node_for_task(b, task)
            if dst is not None and dst != key:
                b.g.add_edge(key, dst, "ray-get-wait",
                             f"a request of this replica made {task.name} ({task.state}) and awaits it (the call's parent "
                             "task is one of the replica's requests, which have no task rows)")
        benign = node.pattern is None or (node.pattern in catalog() and catalog()[node.pattern].kind == "benign")
        if b.g.out(key) and benign:
            node.pattern, node.state = "ray-get-wait", "blocked"


def serve_deployment_self_wait(b: Builder) -> None:
    """A deployment whose every request slot waits on requests queued behind it at itself
    (executor-self-wait; run by pools.detect_pool_self_wait, the pattern's decider): each replica
    holds max_ongoing_requests requests, none of them one of its own sub-requests, while
    sub-requests it sent to its own deployment wait at the handle for a free slot, it made no Ray
    call that is unfinished, the deployment cannot add a replica, and no request finished for longer
    than any it logged. A queued request starts only when a slot frees; none frees until its
    sub-requests run."""
    state = b.inp.libraries
    calling = {actor_of_task(t.parent_task_id) for t in b.inp.tasks if not t.done}
    for dep in state.deployments:
        running = [r for r in dep.replicas if r.state == "RUNNING"]
        limit, most = dep.max_ongoing_requests, dep.max_replicas
        if not running or limit is None or most is None or len(running) < most:
            continue  # no slot count, or the autoscaler may start a replica the queued requests can take
        found: list[tuple[str, float, float]] = []
        for replica in running:
            key = b.actor_node.get(replica.actor_id or "")
            in_flight = state.in_flight_at(replica)
            if key is None or in_flight is None or in_flight < limit or replica.actor_id in calling:
                break  # not dumped, a free slot, or its requests await Ray calls (followed as such)
            ongoing, queued = caller_requests(b, key).get((dep.app, dep.name), (0.0, 0.0))
            log = request_log(b, key, replica)
            if ongoing > 0 or queued <= 0 or log is None or not _quiet(log):
                break  # a slot runs one of its sub-requests (it can finish), or nothing waits for a slot
            found.append((key, in_flight, queued))
        else:
            for key, in_flight, queued in found:
                node = b.g.nodes[key]
                node.pattern, node.state = "executor-self-wait", "blocked"
                node.evidence.append(
                    f"every request slot of Serve deployment {dep.label} is taken ({len(running)} replica(s) x "
                    f"max_ongoing_requests {limit}; this one holds {in_flight:.0f}), none by a request of its own, while "
                    f"{queued:.0f} request(s) this replica sent to {dep.label} itself wait at the handle for a free slot "
                    f"(Serve metrics) and the deployment may not add a replica (at most {most}): a queued request starts "
                    "only when a slot frees, and no slot frees before its sub-requests run")


def _quiet(log: dict[str, Any]) -> bool:
    """No request finished in the window, and the request log has been quiet far longer than the
    slowest request it logged."""
    age = log.get("age_s")
    lines = [str(x) for x in [*(log.get("tail") or []), *(log.get("new") or [])] if ACCESS_LINE.search(str(x))]
    return (not finished_requests(log) and isinstance(age, (int, float))
            and age >= max(QUIET_LOG_S, QUIET_FACTOR * slowest_request_s(lines)))


@graph_pass(after=("edges_replica_calls",), decides=("serve-replica-stuck", "serve-requests-in-flight"))
def mark_serve_replicas(b: Builder) -> None:
    """A replica this job waits on whose stack shows no job-code wait (its request coroutines
    await, invisible): stuck when no request finished in the window and its request log has been
    quiet far longer than any request it logged took (serve-replica-stuck); quiet for less, a
    slow request may still finish (serve-requests-in-flight, not a hang)."""
    state = b.inp.libraries
    for replica in state.replicas:
        key = b.actor_node.get(replica.actor_id or "")
        if key is None or not b.g.into(key):
            continue  # nobody of this job waits on it: another job's service, not this job's finding
        node = b.g.nodes[key]
        in_flight = state.in_flight_at(replica)
        callers = sum(v[0] for k in (e.src for e in b.g.into(key)) for d, v in caller_requests(b, k).items()
                      if d == (replica.app, replica.deployment))
        log = request_log(b, key, replica)
        parts = [f"Serve replica {replica.replica_id} of {replica.app}/{replica.deployment}",
                 f"{in_flight:.0f} request(s) in flight by its own gauge (ray_serve_replica_processing_queries; "
                 f"exported every few seconds), {callers:.0f} by its callers' routers" if in_flight is not None
                 else "requests in flight not read (no Serve metrics)"]
        if log is None:
            node.evidence.append("; ".join(parts) + "; its request log was not read")
            continue
        done = finished_requests(log)
        lines = [str(x) for x in [*(log.get("tail") or []), *(log.get("new") or [])] if ACCESS_LINE.search(str(x))]
        age = log.get("age_s") if isinstance(log.get("age_s"), (int, float)) else None
        slowest = slowest_request_s(lines)
        parts.append(f"{done} finished in the window (request log {log.get('name')}, last written {age}s ago; "
                     f"slowest request logged {slowest:.3f}s{'; last: ' + lines[-1][-140:] if lines else ''})")
        node.evidence.append("; ".join(parts))
        benign = node.pattern is None or (node.pattern in catalog() and catalog()[node.pattern].kind == "benign")
        if done or age is None or not benign or b.g.out(key):
            continue
        batch = _partial_batch(log, in_flight) or _declared_window(b.inp.info.get(node.ref, {}), replica, in_flight, age)
        if batch:
            node.pattern, node.state = "serve-requests-in-flight", "blocked"
            node.evidence.append(f"no request finished for {age:.1f}s, but {batch}: a partial batch is held until its "
                                 f"batch_wait_timeout_s ends, a wait with a timeout ({AWAIT_NOTE})")
        elif age >= max(QUIET_LOG_S, QUIET_FACTOR * slowest):
            node.pattern, node.state = "serve-replica-stuck", "blocked"
            node.evidence.append(f"no request finished for {age:.1f}s, over {QUIET_FACTOR:.0f}x its slowest logged "
                                 f"request, and no thread of it runs the deployment's code: {AWAIT_NOTE}")
        else:
            node.pattern, node.state = "serve-requests-in-flight", "blocked"
            node.evidence.append(f"no request finished in the window, but its last one only {age:.1f}s ago: a slow request "
                                 f"may still finish ({AWAIT_NOTE})")


# Ray Serve's own warning, logged by a replica whose @serve.batch can never fill a batch
# (ray/serve/batching.py: _warn_if_max_batch_size_exceeds_max_ongoing_requests).
_BATCH_WARNING = re.compile(r"`max_batch_size` \((\d+)\) \* `max_concurrent_batches` \((\d+)\) is larger than")


def _partial_batch(log: dict[str, Any], in_flight: float | None) -> str:
    """What shows the requests in flight held by a @serve.batch batcher waiting to fill a batch
    ("" when nothing does): Serve's warning that max_batch_size exceeds what the replica admits,
    with fewer requests in flight than max_batch_size."""
    for line in [*(log.get("tail") or []), *(log.get("new") or [])]:
        m = _BATCH_WARNING.search(str(line))
        if m and in_flight is not None and in_flight < int(m.group(1)):
            return (f"its @serve.batch batcher waits for max_batch_size {m.group(1)} requests, which it can never admit "
                    f"(Serve's warning in its log), and {in_flight:.0f} are in flight")
    return ""


def _declared_window(info: dict[str, Any], replica: Replica, in_flight: float | None, quiet_s: float) -> str:
    """What shows a partial batch waiting out its window, from the deployment's own code
    (`batch_windows`, probe/serve_batch.py) ("" when nothing does): a @serve.batch method of the
    deployment's class, fewer requests in flight than its max_batch_size, and the request log
    quiet for less than its batch_wait_timeout_s (with slack: requests may have arrived after the
    last one logged)."""
    windows = [w for w in info.get("batch_windows") or [] if isinstance(w, dict)]
    mine = [w for w in windows if w.get("class") == replica.deployment] or (windows if len(windows) == 1 else [])
    for w in mine:
        size, timeout = w.get("max_batch_size"), w.get("batch_wait_timeout_s")
        if not isinstance(size, (int, float)) or not isinstance(timeout, (int, float)) or in_flight is None:
            continue
        if in_flight < size * float(w.get("max_concurrent_batches") or 1) and quiet_s < WINDOW_SLACK * timeout + QUIET_LOG_S:
            return (f"its {w.get('class')}.{w.get('function')} is a @serve.batch(max_batch_size={size:g}, "
                    f"batch_wait_timeout_s={timeout:g}) ({w.get('file')}:{w.get('line')}), {in_flight:.0f} request(s) in "
                    f"flight, fewer than a batch, and its log quiet for {quiet_s:.1f}s, inside that window")
    return ""


WINDOW_SLACK = 1.5  # a window's requests may have come in after the last request logged


# ---------------------------------------------------------------- Ray Data

def executor_datasets(proc: Process) -> set[str]:
    """Ids of the datasets whose streaming executor runs in this process (a thread running
    StreamingExecutor.run, named "StreamingExecutor-<dataset id>")."""
    out: set[str] = set()
    for thread in proc.threads:
        if any(EXECUTOR_FRAME.search(f.file) for f in thread.frames):
            name = thread.name or ""
            out.add(name.split("-", 1)[1] if name.startswith("StreamingExecutor-") else "")
    return out


def operator_workers(b: Builder, op: Operator) -> tuple[list[TaskRow], list[str]]:
    """An operator's unfinished tasks (task pool: tasks named after it) and its actors (actor
    pool: `MapWorker(<operator>)`)."""
    tasks = [t for t in b.tasks if not t.done and t.name == op.name and not t.actor_id]
    actors = [aid for aid, a in b.actors.items() if (a.class_name or "").endswith(f"({op.name})")]
    return tasks, actors


def output_stage(b: Builder, ds: Dataset) -> Operator | None:
    """The most downstream operator that runs work (tasks or actors): its output is what the
    consumer reads (OutputSplitter and the input buffer run none)."""
    for op in reversed(ds.operators):
        tasks, actors = operator_workers(b, op)
        if tasks or actors or any(t.name == op.name for t in b.tasks):
            return op
    return None


def _stalled(b: Builder, ds: Dataset) -> tuple[Operator, list[str]] | None:
    """The most downstream operator with unfinished work, and the graph nodes running it."""
    for op in reversed(ds.operators):
        if op.state == "FINISHED":
            continue
        tasks, actors = operator_workers(b, op)
        dsts: list[str] = []
        for aid in actors:
            calls = [t for t in b.index.of_actor(aid) if not t.done and t.type == "ACTOR_TASK"]
            if calls and aid in b.actor_node:
                dsts.append(b.actor_node[aid])
        for task in tasks:
            dst = node_for_task(b, task)
            if dst is not None:
                dsts.append(dst)
        if dsts:
            return op, list(dict.fromkeys(dsts))
    return None


def _progress_text(op: Operator, after: Operator | None, window_s: float | None) -> str:
    done = f"{op.progress if op.progress is not None else '?'}/{op.total if op.total is not None else '?'} blocks out"
    queued = f", {op.queued_blocks} queued at its input" if op.queued_blocks else ""
    moved = ""
    if after is not None and window_s and op.progress is not None and after.progress is not None:
        moved = (f", {after.progress - op.progress} more over {window_s:.1f}s" if after.progress > op.progress
                 else f", unchanged over {window_s:.1f}s")
    return f"{done}{queued}{moved}"


@follows("dataset-operators")
def follow_dataset(b: Builder, key: str) -> None:
    """A Ray Data consumer: the calls it made (a streaming_split shard to its SplitCoordinator),
    and, where the dataset's executor runs, the operator whose output stopped and its workers."""
    follow_submitted(b, key)
    state = b.inp.libraries
    verdict = b.verdicts[key]
    running = [ds for ds in state.datasets if ds.state == "RUNNING" and (ds.job_id in (None, b.job_id))]
    if not running:
        if not state.datasets and not b.g.out(key):
            b.g.nodes[key].evidence.append("waits inside Ray Data; the dataset's operators were not read "
                                           "(the dashboard's Ray Data endpoint did not answer, or no stats actor)")
        return
    hosted = executor_datasets(verdict.process)
    after = {ds.dataset: ds for ds in state.datasets_after or []}
    for ds in running:
        if b.g.out(key) and not (ds.dataset in hosted or "" in hosted):
            continue  # its wait goes on through the calls it made (to the process running the executor)
        found = _stalled(b, ds)
        if found is None:
            _split_consumers_left(b, key, ds)
            continue
        op, dsts = found
        later = next((o for o in after[ds.dataset].operators if o.operator == op.operator), None) if ds.dataset in after else None
        text = f"dataset {ds.dataset}: operator {op.name} {op.state}, {_progress_text(op, later, state.data_window_s)}"
        for dst in dsts:
            if dst != key:
                b.g.add_edge(key, dst, "data-iterator-wait", f"{text}; its work runs here")


def _split_consumers_left(b: Builder, key: str, ds: Dataset) -> None:
    """A streaming_split whose operators have no work in flight: the split hands blocks to every
    shard in turn (equal=True balances them) and stops while a shard's consumer does not read. The
    consumers are the actors that call this process's actor (its SplitCoordinator); one with a call
    in flight reads, one without has left the iterator: the executor waits on it."""
    node = b.g.nodes[key]
    if not node.actor_id or not any(op.name.startswith("split(") for op in ds.operators):
        return
    calls = b.index.of_actor(node.actor_id)
    reading = {actor_of_task(t.parent_task_id) for t in calls if not t.done}
    callers = {actor_of_task(t.parent_task_id) for t in calls} - {None, node.actor_id}
    left = [aid for aid in callers - reading if aid and aid in b.actor_node]
    if not reading - {None} or not left:
        return
    split = next(op for op in ds.operators if op.name.startswith("split("))
    for aid in left:
        other = b.g.nodes[b.actor_node[aid]]
        b.g.add_edge(key, other.key, "split-consumer-left",
                     f"dataset {ds.dataset}: {split.name} has no work in flight and hands blocks to each shard in turn; "
                     f"{other.label()} read its shard before and has no call in flight now (it left the iterator), while "
                     f"{len(reading - {None})} other consumer(s) wait for blocks")


SPLIT_BARRIER = ("SplitCoordinator._barrier", "SplitCoordinator.start_epoch")  # ray/data/_internal/iterator/stream_split_iterator.py
START_EPOCH = "SplitCoordinator.start_epoch"


@graph_pass(after=("follow_edges",))
def edges_split_epoch_barrier(b: Builder) -> None:
    """A streaming_split's coordinator in its epoch barrier: `start_epoch` returns only once the
    consumer of every split has called it ("All clients must read from the DataIterator splits at
    the same time"). The consumers it waits for are the job's processes that could still call in;
    when there is none - every other process waits on the consumers already in the barrier, or runs
    nothing - the missing splits have no reader: the consumer in the barrier holds them too (it reads
    the splits in turn, on one thread) or never handed them out. It waits on itself: that consumer.
    Not while a call or actor of the job has yet to start: it may be the reader to come."""
    for key, verdict in b.verdicts.items():
        node = b.g.nodes[key]
        if not node.actor_id or not any(f.function in SPLIT_BARRIER and "ray/data/" in f.file
                                        for t, _m in verdict.threads for f in t.frames):
            continue
        waiting = [t for t in b.index.of_actor(node.actor_id) if t.name == START_EPOCH and not t.done]
        consumers = sorted({k for t in waiting if (k := _caller_of(b, t)) and k != key})
        if not waiting or not consumers or _later_callers(b, key):
            continue
        if any(not t.done and t.state != "RUNNING" and t.name != START_EPOCH for t in b.inp.tasks):
            continue  # a call or actor of the job not started yet (pending, queued) may be the reader to come
        names = ", ".join(b.g.nodes[k].label() for k in consumers)
        head = (f"its epoch barrier waits for the consumer of every split to call start_epoch; only {len(waiting)} "
                f"call(s) came, from {names}, and no other process of the job could still make one (each waits on "
                "those already in the barrier, or runs nothing): the other splits are read by nobody - ")
        in_turn = [k for k in consumers if _reads_in_turn(b.verdicts[k].threads)]
        creation = next((t for t in b.index.of_actor(node.actor_id) if t.type == "ACTOR_CREATION_TASK"), None)
        creator = _caller_of(b, creation) if creation is not None else None
        if in_turn or creator is None or creator == key:
            for k in in_turn or consumers:
                choose(b.g.nodes[k], "split_read_in_turn")
                how = (f"{b.g.nodes[k].label()} reads them one after another: {_reads_in_turn(b.verdicts[k].threads)}"
                       if k in in_turn else f"{b.g.nodes[k].label()} holds them (reading the splits in turn) or they were "
                       "never handed out")
                b.g.add_edge(key, k, "split-consumer-left", head + how)
            continue
        choose(b.g.nodes[creator], "split_read_in_turn")
        b.g.add_edge(key, creator, "split-consumer-left",
                     head + f"{b.g.nodes[creator].label()}, which made the split (streaming_split), handed no other split to "
                     "a reader that runs now")


def _caller_of(b: Builder, task: TaskRow) -> str | None:
    """The node of the process whose running call (or driver) made `task`."""
    parent = str(task.parent_task_id or "")
    if parent.startswith(DRIVER_TASK_PREFIX):
        drivers = [k for k, n in b.g.nodes.items() if n.kind == "driver"]
        return drivers[0] if len(drivers) == 1 else None
    by_task = next((k for k, tasks in b.running.items() for t in tasks if str(t.task_id) == parent), None)
    aid = actor_of_task(parent)
    return by_task or (b.actor_node.get(aid) if aid else None)


_ITERATE = re.compile(r"\b([A-Za-z_]\w*)\.(?:iter_batches|iter_rows|iter_torch_batches|iter_tf_batches)\(")
_FOR = re.compile(r"^(\s*)(?:async\s+)?for\s+(.+?)\s+in\s")


def _reads_in_turn(threads: list[tuple[Any, Any]]) -> str:
    """The job's line that iterates a split inside a loop over several (`for shard in splits:` then
    `shard.iter_batches()`), read from its frame's source context; "" when none shows."""
    for thread, _m in threads:
        for frame in thread.frames:
            found = _ITERATE.search(frame.code or "") if not is_library(frame) else None
            if found is None or not frame.context:
                continue
            lines = [(int(n), text) for n, _, text in (c.partition(":") for c in frame.context if c.partition(":")[0].isdigit())]
            here = next((text for n, text in lines if n == frame.line), "")
            indent = len(here) - len(here.lstrip())
            for n, text in reversed([x for x in lines if x[0] < (frame.line or 0)]):
                m = _FOR.match(text)
                if m and len(m.group(1)) < indent and found.group(1) in re.findall(r"\w+", m.group(2)):
                    return f"line {n} `{text.strip()}` around line {frame.line} `{(frame.code or '').strip()}`"
    return ""
