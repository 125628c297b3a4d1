"""Calls that are the rounds of a poll, not the job's progress (pure).

A thread that sleeps in a loop and makes the same Ray call each round (`while not
ray.get(coord.ready.remote()): time.sleep(0.5)`) finishes a call every round. Those completions
say only that the loop goes round: while the loop stays at its line (its stack and its loop
state the same in every sample, `busy.paced_threads`), each call returned an answer that did not
let it out. The job's progress is work that changes something: other calls, counters that
advance, I/O; not the repetition of one polling call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from debug_hang.analyse.busy import BusyWork
from debug_hang.model import ProcessRef
from debug_hang.rows import TaskRow

MIN_ROUNDS = 2  # the same call, finished this many times by one caller, is a repetition


def poll_rounds(tasks: list[TaskRow], busy: list[BusyWork], quiet: set[ProcessRef]) -> Callable[[TaskRow], bool]:
    """Whether a finished call is one round of a poll: a call its (still running) caller made
    again and again, at least MIN_ROUNDS times, from a loop that sleeps and that was not seen to
    move on (its stack and loop state unchanged across the samples), to a process `quiet` in
    every sample (idle, the same stacks: nothing in it works on what the poll reads). A polled
    process with a thread at work may be changing the answer: its rounds stay progress."""
    polling = {w.ref for w in busy if w.sleeping and w.state != "advancing"}
    callers = {t.task_id: ProcessRef(t.node_id, t.worker_pid) for t in tasks
               if t.state == "RUNNING" and t.worker_pid and ProcessRef(t.node_id, t.worker_pid) in polling}
    rounds = Counter((t.parent_task_id, t.name) for t in tasks
                     if t.state == "FINISHED" and t.parent_task_id in callers)

    # Where each repeated call ran: a round Ray has not yet filled the worker of (its task events
    # arrive in parts, the newest round's last) ran where the others did, when they all ran in
    # quiet processes.
    ran: dict[tuple[str | None, str], set[ProcessRef]] = {}
    for t in tasks:
        if t.state == "FINISHED" and t.parent_task_id in callers and t.worker_pid:
            ran.setdefault((t.parent_task_id, t.name), set()).add(ProcessRef(t.node_id, t.worker_pid))

    def is_round(task: TaskRow) -> bool:
        if task.parent_task_id not in callers or rounds[(task.parent_task_id, task.name)] < MIN_ROUNDS:
            return False
        if not task.worker_pid:
            where = ran.get((task.parent_task_id, task.name)) or set()
            return bool(where) and where <= quiet
        return ProcessRef(task.node_id, task.worker_pid) in quiet

    return is_round

