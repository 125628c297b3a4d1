"""Shared fixtures: one real Ray cluster on loopback for the integration tests.

The cluster binds to 127.0.0.1 only and uses its own ports and temp dir (see
debug_hang/localcluster.py), so a developer's cluster on the default ports is never touched.
Set DEBUG_HANG_TEST_PORT to move it; the other ports follow.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # keep Ray on 127.0.0.1
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_USE_UVLOOP", "0")  # asyncio's own loop in async actors (see localcluster.loopback_env)

from debug_hang import localcluster  # noqa: E402
from debug_hang.localcluster import (  # noqa: E402,F401 - re-exported for the tests
    LocalCluster,
    SubmittedJob,
    culprit_matches,
    expected_of,
    stop_job,
    submit_example,
    wait_for,
)


def run_script(args: list[str], timeout_s: float = 180, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of scripts/* the way a user would, from the repo root."""
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                          env=env or localcluster.loopback_env())


def capture_variant(tmp_path: Path, case: Path, stacks: Callable[[dict[str, Any]], None] | None = None,
                    snapshot: Callable[[dict[str, Any]], None] | None = None,
                    tasks: Callable[[list[dict[str, Any]]], None] | None = None) -> Path:
    """A copy of a recorded capture with its readings edited, the live diagnosis dropped: the same
    real readings with one fact changed, to show the answer follows that fact. `stacks` edits
    stacks.json, `snapshot` snapshot.json, `tasks` the task rows of both task readings (the
    snapshot's and tasks_after.json)."""
    out = tmp_path / case.name
    shutil.copytree(case, out)
    (out / "diagnosis.json").unlink(missing_ok=True)

    def edit(name: str, change: Callable[[Any], None]) -> None:
        doc = json.loads((out / name).read_text())
        change(doc)
        (out / name).write_text(json.dumps(doc))

    if stacks is not None:
        edit("stacks.json", stacks)
    if snapshot is not None:
        edit("snapshot.json", snapshot)
    if tasks is not None:
        edit("snapshot.json", lambda doc: tasks(doc["tasks"]))
        if (out / "tasks_after.json").exists():
            edit("tasks_after.json", lambda doc: tasks(doc["tasks"] if isinstance(doc, dict) else doc))
    return out


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalCluster]:
    port = int(os.environ.get("DEBUG_HANG_TEST_PORT", "6400"))
    # a custom resource stands in for GPUs (examples that hold or wait for accelerators)
    cluster = localcluster.start(port, num_cpus=4, extra=["--resources", '{"accelerator": 2}'])
    try:
        yield cluster
    finally:
        localcluster.stop(cluster)


TIERS = ("unit", "integration")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test is in exactly one tier, so that `-m unit` and `-m integration` together run them all."""
    wrong = [f"{item.nodeid} ({', '.join(tiers) or 'no tier'})" for item in items
             if len(tiers := [m.name for m in item.iter_markers() if m.name in TIERS]) != 1]
    if wrong:
        raise pytest.UsageError("tests need exactly one of the markers unit/integration: " + "; ".join(wrong[:10]))


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()
