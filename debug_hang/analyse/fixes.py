"""The fix a report prints for a root cause: its pattern's first fix, unless the rule that decided
the cause named which of the pattern's fixes fits it (a culprit's `fix_key`).

The fixes themselves live in the catalog (references/patterns.yaml), one source of truth: a key
here names a pattern and a phrase of one of its fixes (tests/test_fixes.py checks each resolves).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from debug_hang.analyse.pattern_ids import PatternId
from debug_hang.analyse.patterns import catalog

if TYPE_CHECKING:  # the graph's modules import this one
    from debug_hang.analyse.graph.model import GNode
    from debug_hang.analyse.rootcause import RootCause

# key: (pattern, a phrase of the chosen fix)
CHOSEN: dict[str, tuple[PatternId, str]] = {
    "asyncio_set_from_thread": ("async-await-stuck", "call_soon_threadsafe"),
    "asyncio_task_done_skipped": ("async-await-stuck", "task_done() in a `finally`"),
    "asyncio_permit_leaked": ("async-await-stuck", "Take asyncio locks and semaphores with `async with x:`"),
    "event_in_thread_local": ("event-never-set", "threading.local"),
    "set_after_join": ("event-never-set", "before joining the thread"),
    "set_after_pool_wait": ("event-never-set", "before waiting on the futures of a pool"),
    "lease_held_by_dead_owner": ("poll-never-satisfied", "TTL or heartbeat"),
    "ray_in_fork_child": ("child-process-hang", "Make Ray calls in the parent"),
    "pipe_held_by_daemon": ("child-process-hang", "Start a background process with its stdout and stderr redirected"),
    "file_lock_taken_twice": ("lock-self-deadlock", "file lock taken twice"),
    "db_second_connection": ("lock-self-deadlock", "second connection"),
    "file_lock_held_for_child": ("file-lock-deadlock", "For a child that takes the lock its parent holds"),
    "pipe_stdin_written_first": ("pipe-full-deadlock", "proc.communicate(data)"),
    "mp_queue_joined_before_get": ("pipe-full-deadlock", "get() everything it puts"),
    "mp_sent_after_join": ("pipe-full-deadlock", "send it before join()"),
    "pool_taken_by_service_loops": ("executor-self-wait", "Run service loops that last until shutdown"),
    "actor_pool_pending_submit": ("executor-self-wait", "With a ray.util.ActorPool"),
    "constructor_calls_back": ("actor-call-cycle", "Do no blocking call from __init__"),
    "serve_handle_cycle": ("actor-call-cycle", "Between Serve deployments"),
    "custom_resource_held": ("resource-starvation", "For a custom resource"),
    "split_read_in_turn": ("split-consumer-left", "Give every split a consumer of its own"),
}


def chosen(key: str) -> str:
    """The catalog fix a key names ("" when the key or its phrase is unknown)."""
    pattern_id, phrase = CHOSEN.get(key, ("", ""))
    pattern = catalog().get(pattern_id)
    return next((fix for fix in (pattern.fixes if pattern else ()) if phrase in fix), "")


def choose(node: GNode, key: str) -> None:
    """Mark `node` as the culprit whose cause is fixed by the catalog fix `key` names."""
    node.fix_key = key


def cause_fix(cause: RootCause) -> str:
    """The fix to print for `cause`: the one its culprits' deciding rule chose for its pattern,
    else the pattern's first."""
    for culprit in cause.culprits:
        key = culprit.fix_key
        if key and CHOSEN.get(key, ("",))[0] == cause.pattern and (fix := chosen(key)):
            return fix
    pattern = catalog().get(cause.pattern)
    return pattern.fix if pattern is not None else ""
