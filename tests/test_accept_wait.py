"""A wait for a connection on a listening socket (accept), on real recorded captures.

`healthy_listener_accept_slow_client/` is `redteam/healthy_listener_accept_slow_client.py`
diagnosed live: Collector sits in `Listener.accept()` (socket.accept) while the only client, the
task `score` given the port, computes for minutes before it connects. An accept has no peer to
follow — any process may connect — so it is no hang while other work of the job goes on.
`listener_accept_client_finished/` (`redteam/listener_accept_client_finished.py`) is its hung
twin: the same accept, `score` FINISHED without connecting, nothing else of the job works: a hang,
the accept wait its culprit.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.probe.socket_peers import accept_sockets
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

HEALTHY = ROOT / "tests" / "data" / "captures" / "healthy_listener_accept_slow_client"
HUNG = ROOT / "tests" / "data" / "captures" / "listener_accept_client_finished"


def _classes(doc: dict[str, Any]) -> list[str | None]:
    return [c.get("class_name") for c in doc["root_causes"][0]["culprits"]]


def test_an_accept_while_the_client_task_computes_is_no_hang() -> None:
    # GIVEN the live capture: Collector in accept on a listening socket, the task `score` busy and advancing
    # WHEN it is re-analysed
    doc = to_json(reanalyse(HEALTHY))
    # THEN no hang: the accept is named with its port, and the working task as the likely client
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert _classes(doc) == ["Collector"]
    assert "waits for a connection on port " in doc["summary"] and "score (pid" in doc["summary"]


def test_the_accept_is_read_from_the_stack_alone_without_the_probe_socket(tmp_path: Path) -> None:
    # GIVEN the same capture without the probe's reading of the accept's listening socket
    def unread(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            info.pop("accepting", None)

    doc = to_json(reanalyse(capture_variant(tmp_path, HEALTHY, stacks=unread)))
    # THEN still no hang (socket.accept waits on a listening socket by definition), no port named
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert "waits for a connection (an accept" in doc["summary"]


def test_an_accept_whose_only_client_finished_without_connecting_is_a_hang() -> None:
    # GIVEN the hung twin: the same accept, `score` FINISHED, nothing else of the job works
    doc = to_json(reanalyse(HUNG))
    # THEN a hang on the accept wait, with the ended call named
    assert doc["verdict"] == "hang", doc["summary"]
    top = doc["root_causes"][0]
    assert top["pattern"] == "io-wait" and _classes(doc) == ["Collector"]
    assert "ended while it waited, none of which connected: score (FINISHED)" in doc["summary"]
    assert "waits for a connection on port " in doc["summary"]


def test_the_hung_accept_while_another_call_is_about_to_run_is_no_hang(tmp_path: Path) -> None:
    # GIVEN the hung twin, but another call of the job is being placed on a worker: it may connect
    def about_to_run(tasks: list[dict[str, Any]]) -> None:
        model = next(t for t in tasks if t["name"] == "score")
        tasks.append({**json.loads(json.dumps(model)), "task_id": "ab" * 12 + "02000000", "name": "rescore",
                      "func_or_class_name": "rescore", "state": "PENDING_NODE_ASSIGNMENT",
                      "worker_pid": None, "worker_id": None})

    doc = to_json(reanalyse(capture_variant(tmp_path, HUNG, tasks=about_to_run)))
    # THEN not a hang: that call may be the client
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert "rescore" in doc["summary"]


def test_the_probe_reads_the_listening_socket_an_accept_waits_on() -> None:
    # GIVEN a thread of this process blocked in accept() on a loopback listening socket
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    tid: list[int] = []
    started = threading.Event()

    def serve() -> None:
        tid.append(threading.get_native_id())
        started.set()
        try:
            conn, _ = server.accept()
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    started.wait(5)
    try:
        frames = [{"function": "socket.accept", "file": "/usr/lib/python3.11/socket.py", "code": "fd, addr = self._accept()"}]
        procs = [{"pid": os.getpid(), "threads": [{"os_thread_id": tid[0], "frames": frames}]}]
        found: dict[int, dict[str, dict[str, Any]]] = {}
        for _ in range(50):  # until the thread is inside the system call
            found = accept_sockets(procs)
            if found:
                break
            threading.Event().wait(0.05)
        # THEN the probe names the port it listens on, from the call's descriptor
        assert found[os.getpid()][str(tid[0])]["port"] == port
    finally:
        socket.create_connection(("127.0.0.1", port)).close()
        thread.join(5)
        server.close()
