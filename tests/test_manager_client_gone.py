"""A lock a multiprocessing manager serves over a unix socket, taken by a child that exited: on a
real capture (tests/data/captures/unix_manager_lock_client_gone), the caller is linked to the
manager with no TCP peer, and a lock no connected client can hold names a gone client as holder;
with a live client connected (a handler idle at recv()), nothing is claimed."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CASE = ROOT / "tests" / "data" / "captures" / "unix_manager_lock_client_gone"


def test_a_served_lock_no_connected_client_holds_names_the_gone_client() -> None:
    # GIVEN the actor in a proxy acquire and the manager's one handler inside the served acquire
    doc = to_json(reanalyse(CASE))
    # THEN it is a hang whose culprit is the client that went away holding the lock, the actor a victim
    assert doc["verdict"] == "hang", doc["summary"]
    top = doc["root_causes"][0]
    assert top["pattern"] == "native-wait-holder-died", top
    assert [c.get("class_name") for c in top["culprits"]] != ["ShardIndexer"]
    assert "gone" in top["culprits"][0]["name"], top["culprits"]
    assert "ShardIndexer" in doc["summary"] or any("ShardIndexer" in str(v) for v in top.get("chain", [])), doc["summary"]


def _add_idle_handler(doc: dict[str, Any]) -> None:
    """A second client connection of the manager, its handler idle at recv() (a live client)."""
    for proc in doc["processes"]:
        served = [t for t in proc["threads"] if t["frames"] and t["frames"][0]["function"].endswith("serve_client")]
        if not served:
            continue
        idle = copy.deepcopy(served[0])
        idle["name"] = "Thread-9 (serve_client)"
        top = dict(idle["frames"][0], line=250, code="request = recv()", facts=None)
        idle["frames"] = [
            {"function": "Connection._recv", "file": top["file"].replace("managers.py", "connection.py"), "line": 395,
             "code": "chunk = read(handle, remaining)", "native": False, "facts": None},
            top, *idle["frames"][1:]]
        if idle.get("tid") is not None:
            idle["tid"] = int(idle["tid"]) + 1
        if idle.get("os_thread_id") is not None:
            idle["os_thread_id"] = int(idle["os_thread_id"]) + 1
        proc["threads"].append(idle)


def test_a_live_client_connected_to_the_manager_is_no_hang(tmp_path: Path) -> None:
    # GIVEN the same capture with a second client connected, its handler idle at recv()
    folder = capture_variant(tmp_path, CASE, stacks=_add_idle_handler)
    # WHEN it is re-analysed
    doc = to_json(reanalyse(folder))
    # THEN that client may hold the lock and release it: no gone holder, no hang
    assert doc["verdict"] != "hang", doc["summary"]
    assert all(rc["pattern"] != "native-wait-holder-died" for rc in doc["root_causes"]), doc["root_causes"]
