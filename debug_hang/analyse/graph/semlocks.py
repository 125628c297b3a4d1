"""A multiprocessing lock (SemLock) whose holder ended: every live child of a parent waits to take
it, and what the parent holds shows a child that is gone - a Process object no live child runs and
a pipe it reads whose write end no process holds any more (the ended child's sentinel)."""

from __future__ import annotations

import re

from debug_hang.analyse.graph.builder import Builder
from debug_hang.analyse.graph.model import GNode
from debug_hang.analyse.graph.threads import deciding_thread
from debug_hang.analyse.patterns import ProcessVerdict, is_library
from debug_hang.facts import identities_in, type_of
from debug_hang.model import ProcessRef

_MP_SYNC_FILE = re.compile(r"(^|/)multiprocessing/synchronize\.py$")
_MP_PROCESS_FILE = re.compile(r"(^|/)multiprocessing/process\.py$")
# multiprocessing's Process classes (the context's ForkProcess, SpawnProcess, ForkServerProcess).
_PROCESS_TYPE = re.compile(r"^(Fork|Spawn|ForkServer)?Process$")


def at_semlock_acquire(verdict: ProcessVerdict | None) -> bool:
    """The process's deciding thread waits to take a multiprocessing lock (a SemLock: shared
    between processes, e.g. a multiprocessing.Queue's reader lock), idle in every sample."""
    thread = deciding_thread(verdict) if verdict is not None else None
    if thread is None or thread.active:
        return False
    inner = next((f for f in thread.frames if not f.native), None)
    return inner is not None and bool(_MP_SYNC_FILE.search(inner.file)) and inner.name in ("__enter__", "acquire")


def _own_process_object(verdict: ProcessVerdict) -> str | None:
    """The Process object a multiprocessing child runs as (`self` of BaseProcess._bootstrap/run):
    with fork, the very object its parent holds, at the same address."""
    for thread, _m in verdict.threads:
        for frame in thread.frames:
            if _MP_PROCESS_FILE.search(frame.file) and frame.name in ("_bootstrap", "run"):
                own = (frame.facts or {}).get("self")
                if type_of(own) and _PROCESS_TYPE.match(str(type_of(own))):
                    return str(own)
    return None


def _held_process_objects(verdict: ProcessVerdict) -> set[str]:
    """The multiprocessing Process objects the parent's own code holds (its frames' facts)."""
    held: set[str] = set()
    for thread, _m in verdict.threads:
        for frame in thread.frames:
            if frame.native or is_library(frame):
                continue
            for value in (frame.facts or {}).values():
                held |= {i for i in identities_in(value) if _PROCESS_TYPE.match(str(type_of(i)))}
    return held


def mark_ended_semlock_holders(b: Builder) -> None:
    """Children that all wait to take a SemLock while their parent does not: no live process of the
    family holds it (children.py says so). When the parent holds a Process object no live child
    runs and reads a pipe nobody writes to any more (probe/pipes.py: `widowed_pipes`), a child it
    started has ended; a SemLock is not released when its holder dies: that child is the likely
    holder (a guessed edge from each waiting child). Without both readings, nothing is named."""
    g = b.g
    for key, verdict in list(b.verdicts.items()):
        proc = verdict.process
        info = b.inp.info.get(proc.ref, {})
        widowed = info.get("widowed_pipes")
        if not widowed or not isinstance(widowed, list) or at_semlock_acquire(verdict):
            continue
        kids = [k for (node_id, pid), row in b.inp.info.items() if row.get("child_of") == proc.pid
                and node_id == proc.node_id and (k := b.by_pid.get(ProcessRef(node_id, pid))) is not None]
        if not kids or not all(at_semlock_acquire(b.verdicts.get(k)) for k in kids):
            continue
        held = _held_process_objects(verdict)
        live = {o for k in kids if (o := _own_process_object(b.verdicts[k])) is not None}
        # With fork each child runs as the very object its parent holds (same address): the
        # objects left over are the ended ones; otherwise (spawn) only their number shows.
        ended = sorted(held - live) if len(live) == len(kids) else []
        if not ended and len(held) <= len(kids):
            continue  # no Process object beyond the live children's: nothing shows one ended
        parent = g.nodes[key]
        what = ", ".join(ended[:3]) if ended else f"{len(held) - len(kids)} of its {len(held)} Process objects"
        dead_key = f"ended-child:{key}"
        g.nodes[dead_key] = GNode(
            key=dead_key, kind="process", state="dead",
            name=f"ended child of {parent.name}" + (f" ({ended[0]})" if len(ended) == 1 else ""),
            node_id=proc.node_id, class_name=parent.class_name, pattern="native-wait-holder-died",
            evidence=[f"{parent.label()} holds multiprocessing Process object(s) no live child runs ({what}; "
                      f"{len(kids)} live child(ren) run the others) and reads {len(widowed)} pipe(s) whose write end "
                      f"no process of the node holds any more (pipe:[{widowed[0]}]{', ...' if len(widowed) > 1 else ''}): "
                      "a child it started has ended (multiprocessing keeps the read end of each started child's "
                      "sentinel pipe; the child held its only write end). Its pid and exit code are not read"])
        for kid in kids:
            g.add_edge(kid, dead_key, "native-wait-holder-died",
                       f"waits to take a multiprocessing lock no live process of the family holds; a child of {parent.name} "
                       "has ended, and a SemLock is not released when its holder dies: it likely died holding it",
                       guessed=True)
