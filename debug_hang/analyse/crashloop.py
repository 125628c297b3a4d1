"""Crash loops: an actor (or a task) that Ray restarts (retries) forever and that dies each time.

Read from Ray state alone: an actor with `num_restarts` climbing, or calls whose earlier attempts
FAILED with a death (ACTOR_UNAVAILABLE, ACTOR_DIED, WORKER_DIED, ...) while a later attempt is
still pending or running. Such a process is not "still starting": it ran and died, and will die
again. Thresholds and the death vocabulary are in references/verdict_rules.yaml (`crash_loop`).
The death reason itself ("Fatal Python error: Bus error", a signal, an OOM kill) is in the dead
workers' own logs, which the evidence step reads (collect/evidence.py) and `death_reason` finds.

A crash loop of child processes is read from the probe instead (`children_crash_loop`): a process
that waits on its children while they exit and are replaced within the window, and whose log -
the stderr its children inherit - ends the same traceback again and again. Pool-like parents
(multiprocessing.Pool with an initializer that raises) replace each dead worker forever and never
fail the wait; children that exit without a traceback (workers recycled after N tasks) are not it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from debug_hang.analyse.progress import CrashLoopRules, rules
from debug_hang.rows import ActorRow, TaskRow

DEATH_PREFIX = "death reason: "  # how the evidence step marks the reason it found in a dead worker's log
DEATH_SOURCE = " — in the log of dead worker "


@dataclass
class CrashLoop:
    """One actor or task in a crash loop, with what the state says about its deaths."""

    kind: str  # "actor" | "task" | "children" (the child processes of one waiting process)
    id: str  # actor_id or task_id
    name: str
    restarts: int
    failed_attempts: int
    error_types: list[str]
    last_error: str
    dead_workers: list[tuple[str, str]] = field(default_factory=list)  # (node_id, worker_id), newest last
    confirmed: bool = True  # False: it died, but fewer times than the rules ask for a loop
    repeated: int = 0  # "children": how many of the window's tracebacks ended with last_error

    def text(self) -> str:
        if self.kind == "children":
            return (f"the child processes of {self.name} die and are replaced: {self.failed_attempts} child(ren) "
                    f"were listed and gone within the window, and its log ended {self.repeated} tracebacks with the "
                    f"same exception: {self.last_error}")
        parts = []
        if self.restarts:
            parts.append(f"restarted {self.restarts} time(s)")
        if self.failed_attempts:
            parts.append(f"{self.failed_attempts} attempt(s){' of its calls' if self.kind == 'actor' else ''} FAILED "
                         f"({', '.join(sorted(set(self.error_types)))})")
        again = "Ray retries it and it dies again" if self.confirmed else "Ray is retrying it (once more and it is a crash loop)"
        return f"{self.name} {' and '.join(parts)}: {again}" + (
            f"; last error: {self.last_error}" if self.last_error else "")


def _death_attempts(tasks: list[TaskRow], r: CrashLoopRules) -> list[TaskRow]:
    return [t for t in tasks if t.state == "FAILED" and t.error_type in r.death_error_types]


def find_crash_loops(actors: list[ActorRow], tasks: list[TaskRow], r: CrashLoopRules | None = None) -> dict[str, CrashLoop]:
    """Actors and tasks in a crash loop, by actor_id / task_id."""
    r = r or rules().crash_loop
    found: dict[str, CrashLoop] = {}
    by_actor: dict[str, list[TaskRow]] = {}
    by_task: dict[str, list[TaskRow]] = {}
    for task in tasks:
        if task.actor_id and task.type == "ACTOR_TASK":
            by_actor.setdefault(task.actor_id, []).append(task)
        elif task.type == "NORMAL_TASK" and task.task_id:
            by_task.setdefault(task.task_id, []).append(task)
    for actor in actors:
        if actor.state not in ("ALIVE", "RESTARTING", "PENDING_CREATION", "DEPENDENCIES_UNREADY"):
            continue  # DEAD: out of restarts, a plain death
        deaths = _death_attempts(by_actor.get(actor.actor_id, []), r)
        if actor.num_restarts is None:
            # Ray 2.9 does not report restarts: its calls' attempts that died tell them instead.
            if len(deaths) < r.min_failed_attempts:
                continue
            restarts = 0
        else:
            restarts = actor.num_restarts - actor.num_restarts_due_to_node_preemption
            if restarts == 0:
                continue  # never restarted: the process that runs is the first one (or none yet)
        loop = _loop("actor", actor.actor_id, str(actor.class_name), restarts, deaths, actor.death_cause)
        # An actor dies no more often than it is restarted: calls that fail while it is being
        # restarted ("The actor is restarting") are refused, not deaths. Its restarts decide,
        # where Ray reports them (not 2.9 or 2.31: there the attempts that died are all there is).
        loop.confirmed = (restarts >= r.min_restarts if actor.num_restarts is not None
                          else len(deaths) >= r.min_failed_attempts)
        if loop.confirmed or actor.state != "ALIVE":  # restarted once and alive: it recovered
            found[loop.id] = loop
    for task_id, attempts in by_task.items():
        deaths = _death_attempts(attempts, r)
        live = [t for t in attempts if not t.done]
        if deaths and live:
            loop = _loop("task", task_id, live[0].name, 0, deaths, None)
            loop.confirmed = len(deaths) >= r.min_failed_attempts
            found[task_id] = loop
    return found


def _loop(kind: str, ident: str, name: str, restarts: int, deaths: list[TaskRow],
          death_cause: dict[str, Any] | None) -> CrashLoop:
    deaths = sorted(deaths, key=lambda t: (t.end_time_ms or 0, t.attempt_number))
    message = (deaths[-1].error_message or "").strip().splitlines() if deaths else []
    last_error = message[-1][:200] if message else ""
    if isinstance(death_cause, dict):
        for ctx in death_cause.values():
            if isinstance(ctx, dict) and ctx.get("error_message"):
                last_error = str(ctx["error_message"]).strip().splitlines()[0][:200]
    workers = [(t.node_id, t.worker_id) for t in deaths if t.node_id and t.worker_id]
    return CrashLoop(kind=kind, id=ident, name=name, restarts=restarts, failed_attempts=len(deaths),
                     error_types=[str(t.error_type) for t in deaths], last_error=last_error,
                     dead_workers=list(dict.fromkeys(workers)))


def death_reason(texts: list[str], r: CrashLoopRules | None = None) -> str | None:
    """The first death reason (fatal error, signal, OOM kill, exit code) found in log texts."""
    r = r or rules().crash_loop
    for pattern in r.death_reasons:
        for text in texts:
            match = pattern.search(text)
            if match:
                return (match.group(1) if match.groups() else match.group(0)).strip()[:200]
    return None


def children_crash_loop(ident: str, name: str, gone: list[int], logs: list[dict[str, Any]],
                        r: CrashLoopRules | None = None) -> CrashLoop | None:
    """The children of a waiting process in a crash loop: some exited within the window (`gone`),
    and its log windows (the probe's `progress.logs`) end one traceback with the same exception
    line at least `min_repeated_tracebacks` times. None otherwise: children that exit quietly
    (recycled, finished) are no crash."""
    r = r or rules().crash_loop
    if not gone:
        return None
    best = max(((str(e.get("line") or ""), int(e.get("count") or 0)) for log in logs
                for e in log.get("exceptions") or [] if isinstance(e, dict)), key=lambda e: e[1], default=("", 0))
    if best[1] < r.min_repeated_tracebacks or not best[0]:
        return None
    return CrashLoop(kind="children", id=ident, name=name, restarts=0, failed_attempts=len(gone),
                     error_types=["child exited"], last_error=best[0][:200], repeated=best[1])
