"""Evidence that explains *why*, gathered for the processes on a reported chain.

- the tail of each process's own Ray worker log (`worker-<id>-<job>-<pid>.out/.err`), read on its
  node by the dashboard agent (`/api/v0/logs/file`) — the only place holding a dead rank's real
  reason and per-rank warnings (the job log deduplicates lines that look alike across ranks);
  its lines that are not text (probe/logtext.py) are never kept or quoted;
- the driver log's lines that matter: Ray's "Unhandled error" reports of task exceptions nobody
  fetched, autoscaler "cannot fulfill" errors, warnings;
- per actor, its recent FINISHED and FAILED tasks with times and errors (the State API cuts
  error messages to about 500 characters: the log file has the whole traceback).
Everything is bounded: a few lines in the report, the full text in the output folder.
"""

from __future__ import annotations

import re
import urllib.parse
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from debug_hang.analyse.crashloop import DEATH_PREFIX, DEATH_SOURCE, death_reason
from debug_hang.analyse.graph import GNode, WaitGraph
from debug_hang.analyse.patterns import catalog
from debug_hang.collect.state import DashboardClient
from debug_hang.model import Evidence, NodeEvidence
from debug_hang.probe.logtext import clean_log_text
from debug_hang.redact import redact
from debug_hang.snapshot import POLLING_TASKS

LOG_LINES = 200  # lines fetched per log file (kept whole in the output folder)
EXCERPT_LINES = 4  # lines shown per log in the report
MAX_PROCESSES = 12  # chain members whose logs are read
INTERESTING = re.compile(
    r"(Traceback|Error|error|Exception|WARNING|Warning|WARN|abort|Abort|NaN|nan|skipp|"
    r"Unhandled|cannot fulfill|No available node types|timed out|Killed|OOM|exit)"
)
_RAY_PREFIX = re.compile(r"^:(job_id|actor_name|task_name):")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_HEX = re.compile(r"^[0-9a-fA-F]{8,64}$")
DEAD_WORKER_LOGS = 2  # dead workers' logs read per crash-looping actor or task
_SOURCE_PREFIX = re.compile(r"^\((?P<name>[^()]*?) pid=(?P<pid>\d+)(, ip=[^)]*)?\) ")


def _dead_workers(graph: WaitGraph, keys: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Chain members that crash-loop, or run the retry of a task whose earlier attempt died ->
    (node_id, worker_id) of their last dead workers."""
    dead: dict[str, list[tuple[str, str]]] = {}
    for key in keys:
        node = graph.nodes[key]
        loop = graph.loop_of(node)
        if loop is not None and (node.pattern == "crash-loop" or (loop.kind == "task" and node.state != "restarting")):
            dead[key] = [w for w in loop.dead_workers if _HEX.match(w[1]) and _HEX.match(w[0])][-DEAD_WORKER_LOGS:]
    return dead


def _add_dead_worker_log(found: NodeEvidence, wid: str, future: Future[str], timeout_s: float) -> None:
    """A dead worker's .err log: kept whole, its death reason first among the highlights."""
    try:
        text = future.result(timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - a missing log is reported, not fatal
        found.errors.append(f"dead worker {wid[:8]} err log: {exc}")
        return
    found.logs[f"dead-{wid[:8]}.err"] = text
    reason = death_reason([text])
    if reason and not any(h.startswith(DEATH_PREFIX) for h in found.highlights):
        found.highlights.insert(0, f"{DEATH_PREFIX}{reason}{DEATH_SOURCE}{wid[:8]}")
    found.highlights += [f"[dead worker {wid[:8]} err] {line}" for line in highlights(text, limit=2)]


def _dead_worker_log(client: DashboardClient, node_id: str, worker_id: str, suffix: str = "err") -> str:
    """The .err (.out) log of a worker that died (an earlier attempt), found by its worker id."""
    body = client.get("/api/v0/logs", [("node_id", node_id), ("glob", f"worker-{worker_id}-*.{suffix}")])
    groups = ((body or {}).get("data") or {}).get("result") or {}
    names = [str(n) for group in groups.values() if isinstance(group, list) for n in group]
    if not names:
        raise FileNotFoundError(f"no log file for worker {worker_id[:8]} on node {node_id[:8]}")
    return clean_log_text(client.log_file([("node_id", node_id), ("filename", names[0])], LOG_LINES))


def _fetch_log(client: DashboardClient, params: list[tuple[str, str]]) -> str:
    # Redacted as it arrives: excerpts are cut to a few hundred characters later, and a cut
    # token would no longer be recognised by the final pass at the writer. Lines that are not
    # text (a child's binary output in the worker's stdout) are left out first.
    return redact(clean_log_text(client.log_file(params, LOG_LINES)))


def _driver_log_tail(client: DashboardClient, job: dict[str, Any]) -> str:
    """The last LOG_LINES of a submitted job's driver log, read by the agent of the driver's node.

    The Job API's /logs returns the whole log (it can be hundreds of MB on a long run); it is
    used only when the driver's node is unknown.
    """
    sub, node = str(job.get("submission_id")), job.get("driver_node_id")
    if node:
        return _fetch_log(client, [("node_id", str(node)), ("filename", f"job-driver-{sub}.log")])
    body = client.get(f"/api/jobs/{urllib.parse.quote(sub)}/logs")
    lines = str((body or {}).get("logs") or "").splitlines()
    return redact(clean_log_text("\n".join(lines[-LOG_LINES:])))


def _clean_lines(text: str) -> list[str]:
    return [_ANSI.sub("", ln).rstrip() for ln in text.splitlines() if ln.strip() and not _RAY_PREFIX.match(ln)]


def highlights(text: str, limit: int = EXCERPT_LINES, pids: set[int] | None = None) -> list[str]:
    """The last `limit` lines that look like errors or warnings (Ray's own prefixes dropped).

    With `pids`, a driver-log line that Ray prefixed with another process, `(Name pid=N) ...`,
    is kept only when N is one of them: the chain's processes, not Ray's helper actors.
    """
    picked = []
    for line in _clean_lines(text):
        source = _SOURCE_PREFIX.match(line)
        if pids is not None and source and int(source["pid"]) not in pids:
            continue
        if INTERESTING.search(line):
            picked.append(line)
    return [ln[:240] for ln in picked[-limit:]]


def last_lines(text: str, limit: int = 2) -> list[str]:
    """The last `limit` lines a process printed: what a culprit did last, when nothing in its
    log looks like an error (a rank that left its loop early says so only in its own words)."""
    return [ln[:240] for ln in _clean_lines(text)[-limit:]]


def task_history(node: GNode, tasks: list[dict[str, Any]], limit: int = 4) -> list[str]:
    """An actor's (or worker's) finished/failed tasks, grouped by name and state, newest last."""
    mine = [t for t in tasks if t.get("state") in ("FINISHED", "FAILED") and t.get("type") != "ACTOR_CREATION_TASK"
            and t.get("name") not in POLLING_TASKS
            and ((node.actor_id and t.get("actor_id") == node.actor_id)
                 or (not node.actor_id and node.pid and t.get("worker_pid") == node.pid))]
    mine.sort(key=lambda t: t.get("end_time_ms") or 0)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for t in mine:
        groups.setdefault((str(t.get("name")), str(t.get("state"))), []).append(t)
    out = []
    for (name, state), items in sorted(groups.items(), key=lambda kv: kv[1][-1].get("end_time_ms") or 0)[-limit:]:
        last = items[-1]
        text = f"{name} {state}" + (f" ×{len(items)}" if len(items) > 1 else "")
        start, end = last.get("start_time_ms"), last.get("end_time_ms")
        if start and end:
            text += f" (last took {(end - start) / 1000:.1f}s)"
        if state == "FAILED":
            msg = (last.get("error_message") or "").strip().splitlines()
            text += (f" — {last.get('error_type')}: {msg[-1][:200] if msg else ''} (State API keeps ~500 chars; "
                     "full traceback in the worker log)")
        out.append(text)
    return out


def gather(client: DashboardClient, graph: WaitGraph, keys: list[str], tasks: list[dict[str, Any]],
           job: dict[str, Any]) -> Evidence:
    """Fetch logs for the chain members `keys` (bounded) and the driver log, in parallel."""
    ev = Evidence()
    wanted = [k for k in keys if graph.nodes[k].kind != "resource" and graph.nodes[k].kind != "placement_group"]
    wanted = wanted[:MAX_PROCESSES]
    jobs: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for key in wanted:
        node = graph.nodes[key]
        ev.per_node[key] = NodeEvidence(history=task_history(node, tasks))
        if node.kind == "driver":
            continue
        for suffix in ("err", "out"):
            if node.actor_id:
                jobs[(key, suffix)] = [("actor_id", node.actor_id), ("suffix", suffix)]
            elif node.pid and node.node_id:
                jobs[(key, suffix)] = [("node_id", node.node_id), ("pid", str(node.pid)), ("suffix", suffix)]
    dead = _dead_workers(graph, wanted)
    sub = job.get("submission_id")
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {k: pool.submit(_fetch_log, client, params) for k, params in jobs.items()}
        dead_futures = {(key, wid): pool.submit(_dead_worker_log, client, nid, wid)
                        for key, workers in dead.items() for nid, wid in workers}
        # What a dead earlier attempt printed (the tokens it took a resource under: dead_holders.py).
        dead_out = {(key, wid): pool.submit(_dead_worker_log, client, nid, wid, "out")
                    for key, workers in dead.items() for nid, wid in workers if graph.nodes[key].pattern != "crash-loop"}
        driver = pool.submit(_driver_log_tail, client, job) if sub else None
        for (key, suffix), future in futures.items():
            try:
                text = future.result(timeout=client.timeout_s + 2)
            except Exception as exc:  # noqa: BLE001 - a missing log is reported, not fatal
                ev.per_node[key].errors.append(f"{suffix} log: {exc}")
                continue
            ev.per_node[key].logs[suffix] = text
            ev.per_node[key].highlights += [f"[{suffix}] {line}" for line in highlights(text)]
        for (key, wid), future in dead_futures.items():
            _add_dead_worker_log(ev.per_node[key], wid, future, client.timeout_s + 2)
        for (key, wid), future in dead_out.items():
            try:
                ev.per_node[key].logs[f"dead-{wid[:8]}.out"] = redact(future.result(timeout=client.timeout_s + 2))
            except Exception as exc:  # noqa: BLE001 - a missing log is reported, not fatal
                ev.per_node[key].errors.append(f"dead worker {wid[:8]} out log: {exc}")
        for key in wanted:
            node, found = graph.nodes[key], ev.per_node[key]
            own = catalog().get(node.pattern or "")
            if not found.highlights and own is not None and own.kind == "root-cause":
                found.highlights += [f"[out] last printed: {line}" for line in last_lines(found.logs.get("out", ""))]
        if driver is not None:
            try:
                ev.driver_log = driver.result(timeout=client.timeout_s + 2)
                chain_pids = {graph.nodes[k].pid for k in keys if graph.nodes[k].pid}
                ev.driver_highlights = highlights(ev.driver_log, limit=6, pids={p for p in chain_pids if p})
            except Exception as exc:  # noqa: BLE001 - as above
                ev.errors.append(f"driver log: {exc}")
    return ev
