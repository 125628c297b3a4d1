"""Two holders named right for the wrong mechanism (red-team round 6), on real captures recorded
live (tests/data/captures/README.md), each with the variant where the answer must change.

gangs_hold_groups_wait_for_more (`redteam/trial_gang_pgs.py`): two trials each hold a CREATED
placement group they reserved (nothing placed in it yet) and wait in pg.ready() for a second group
that cannot be placed while the first ones are held. A group whose creator is alive and waits with
it is held, not leaked: a hold-and-wait cycle, the creators the culprits. Once a creator no longer
waits (its call finished, the actor idle), what it reserved is leaked again.

pool_slot_held_by_unread_response (`redteam/registry_client_pool.py`): a urllib3 pool of one
connection (block=True) whose connection an unread streamed response holds; the next request waits
in the pool's checkout. A checkout waits for a release, not for a producer: exhausted when no other
thread of the process is inside the library or runs job code; not a hang when another thread is in
a request that will return its connection, or when the checkout has a timeout.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from debug_hang.analyse.holders import live_creators
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.rows import Rows
from debug_hang.snapshot import Snapshot

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
GANGS = CAPTURES / "gangs_hold_groups_wait_for_more"
POOL = CAPTURES / "pool_slot_held_by_unread_response"
LEAKED = ROOT / "tests" / "data" / "cases" / "sweep_leaked_placement_group"

Doc = dict[str, Any]
Edit = Callable[[Doc], None]

# An actor between calls: Ray's task loop, no job frame.
IDLE_MAIN = [
    {"function": "Worker.main_loop", "file": "ray/_private/worker.py", "line": 1069, "code": "self.core_worker.run_task_loop()"},
    {"function": "<module>", "file": "ray/_private/workers/default_worker.py", "line": 323, "code": "worker.main_loop()"},
]


def variant(tmp_path: Path, case: Path, stacks: Edit | None = None, snapshot: Edit | None = None) -> Path:
    """A copy of a capture with its stacks.json and/or its snapshot rows edited (the second task
    reading, tasks_after.json, gets the snapshot edit of its tasks too); the live diagnosis dropped."""
    out = tmp_path / case.name
    shutil.copytree(case, out)
    (out / "diagnosis.json").unlink(missing_ok=True)
    if stacks is not None:
        doc = json.loads((out / "stacks.json").read_text())
        stacks(doc)
        (out / "stacks.json").write_text(json.dumps(doc))
    if snapshot is not None:
        snap = json.loads((out / "snapshot.json").read_text())
        snapshot(snap)
        (out / "snapshot.json").write_text(json.dumps(snap))
        after = out / "tasks_after.json"
        if after.exists():
            again = {**snap, "tasks": json.loads(after.read_text())}
            snapshot(again)
            after.write_text(json.dumps(again["tasks"]))
    return out


def rows_of(case: Path) -> Rows:
    return Rows.of(Snapshot.from_dict(json.loads((case / "snapshot.json").read_text())))


# ---------------------------------------------------------------- placement groups: hold-and-wait


def test_trials_holding_a_group_each_and_waiting_for_another_are_a_hold_and_wait_cycle() -> None:
    # GIVEN two Trial actors, each with a CREATED 2-CPU group it reserved, both in pg.ready() for a
    # second 2-CPU group on a 4-CPU cluster (both PENDING, NO_RESOURCES)
    doc = to_json(reanalyse(GANGS))
    top = doc["root_causes"][0]
    # THEN a hold-and-wait cycle whose culprits are the two creators, never a leaked group
    assert doc["verdict"] == "hang" and top["pattern"] == "placement-group-hold-and-wait"
    assert sorted(c["class_name"] for c in top["culprits"]) == ["Trial", "Trial"]
    assert len({c["pid"] for c in top["culprits"]}) == 2
    assert all(rc["pattern"] != "placement-group-leaked" for rc in doc["root_causes"])
    text = "\n".join(top["evidence"])
    assert "requested while its call Trial.reserve ran" in text and "waits while holding it" in text
    assert "nothing uses it" not in json.dumps(doc)


def test_the_fix_of_a_hold_and_wait_is_to_reserve_at_once_not_to_remove_the_group() -> None:
    # GIVEN the same capture, as diagnosis.json says it
    fix = str(to_json(reanalyse(GANGS))["root_causes"][0]["fix"])
    # THEN the fix is the catalog's: one group for everything (or one gang at a time), no removal
    assert "one placement group" in fix and "remove_placement_group(ray.util.get_placement_group" not in fix


def _idle_creator(tmp_path: Path) -> tuple[Path, str]:
    """The capture with one Trial no longer waiting: its run() FINISHED and its process idle
    between calls. Returns the folder and the name of the group only that Trial could have made."""
    rows = rows_of(GANGS)
    sole = {}
    for pg in rows.placement_groups:
        made = {t.actor_id for t in live_creators(pg, rows.tasks, rows.actors)}
        if pg.state == "CREATED" and len(made) == 1:
            sole[next(iter(made))] = pg.name
    actor_id, group = sorted(sole.items())[0]

    def stacks(doc: Doc) -> None:
        for proc in doc["processes"]:
            if proc.get("actor_id") == actor_id:
                proc["task_id"] = proc["task_name"] = None
                for thread in proc["threads"]:
                    if thread["name"] == "MainThread":
                        thread["frames"] = [dict(f) for f in IDLE_MAIN]

    def snapshot(doc: Doc) -> None:
        for task in doc["tasks"]:
            if task.get("actor_id") == actor_id and task.get("state") == "RUNNING":
                task["state"], task["end_time_ms"] = "FINISHED", task["start_time_ms"] + 1000

    return variant(tmp_path, GANGS, stacks, snapshot), str(group)


def test_a_group_whose_creator_no_longer_waits_is_leaked_again(tmp_path: Path) -> None:
    # GIVEN one Trial whose run() finished: alive, idle, its reserved group still CREATED and empty
    folder, group = _idle_creator(tmp_path)
    diag = reanalyse(folder)
    top = diag.causes[0]
    # THEN no live party waits with that group: it is the leak the other trial waits on, and the
    # other trial (waiting with its own group) is a victim, not a cycle of its own
    assert diag.verdict == "hang" and top.pattern == "placement-group-leaked"
    assert [c.name for c in top.culprits] == [f"placement group {group}"]
    assert all(c.pattern != "placement-group-hold-and-wait" for c in diag.causes)


def test_the_sweep_whose_trial_actors_were_killed_keeps_its_leaked_group() -> None:
    # GIVEN the example whose trial 0 group's actors are DEAD (used, then abandoned)
    diag = reanalyse(LEAKED)
    # THEN still leaked: no live party uses it (the driver's wait is for trial 1's group)
    assert diag.verdict == "hang" and diag.causes[0].pattern == "placement-group-leaked"
    assert [c.name for c in diag.causes[0].culprits] == ["placement group trial-0"]


# ---------------------------------------------------------------- pools: a checkout waits for a release


def _main_thread(proc: Doc) -> Doc:
    return next(t for t in proc["threads"] if t["name"] == "MainThread")


def _client(doc: Doc) -> list[Doc]:
    return [p for p in doc["processes"] if p.get("actor_class") == "RegistryClient"]


def test_a_checkout_of_a_pool_whose_only_connection_an_unread_response_holds_is_pool_exhausted() -> None:
    # GIVEN RegistryClient.sync waiting in urllib3's _get_conn (LifoQueue.get, no timeout), its
    # only connection held by the streamed manifest response it kept unread
    doc = to_json(reanalyse(POOL))
    top = doc["root_causes"][0]
    # THEN the pool is exhausted (a release nothing will make), not a queue whose producer is gone
    assert doc["verdict"] == "hang" and top["pattern"] == "pool-exhausted"
    assert [c["class_name"] for c in top["culprits"]] == ["RegistryClient"]
    assert all(rc["pattern"] != "producer-gone" for rc in doc["root_causes"])
    assert "never read to the end or released" in "\n".join(top["evidence"])


def test_a_checkout_whose_connection_another_thread_uses_is_not_a_hang(tmp_path: Path) -> None:
    # GIVEN the same client with a second thread inside urllib3, reading the streamed response
    def reader(doc: Doc) -> None:
        for proc in _client(doc):
            frames = [
                {"function": "SocketIO.readinto", "file": "/usr/lib/python3.11/socket.py", "line": 706,
                 "code": "return self._sock.recv_into(b)"},
                {"function": "HTTPResponse.read", "file": "urllib3/response.py", "line": 949, "code": "data = self._raw_read(amt)"},
                {"function": "RegistryClient._drain", "file": _main_thread(proc)["frames"][7]["file"], "line": 60,
                 "code": "chunk = self.pending[0].read(1 << 16)"},
                {"function": "Thread.run", "file": "/usr/lib/python3.11/threading.py", "line": 982,
                 "code": "self._target(*self._args, **self._kwargs)"},
            ]
            proc["threads"].append({"thread_id": 1, "os_thread_id": 4242, "name": "drain", "active": True,
                                    "owns_gil": False, "frames": frames})
    diag = reanalyse(variant(tmp_path, POOL, reader))
    # THEN the checkout waits on that thread's request, which returns the connection when it ends
    assert diag.verdict != "hang"
    assert all(c.pattern not in ("pool-exhausted", "producer-gone") for c in diag.causes)


def test_a_checkout_with_a_timeout_is_not_a_hang(tmp_path: Path) -> None:
    # GIVEN the same checkout given a pool timeout: Condition.wait's timed branch
    def timed(doc: Doc) -> None:
        for proc in _client(doc):
            _main_thread(proc)["frames"][0].update(line=331, code="gotit = waiter.acquire(True, timeout)")
    diag = reanalyse(variant(tmp_path, POOL, timed))
    # THEN the wait raises EmptyPoolError by itself when the timeout runs out: not proven stuck
    assert diag.verdict != "hang"
    assert all(c.pattern != "pool-exhausted" for c in diag.causes)
