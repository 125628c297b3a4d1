"""A connect retried at once to a loopback port nobody listens on, on a real recorded capture.

`feature_client_reconnect_stale_port/` is `redteam/feature_client_reconnect.py` diagnosed live: a
FeatureClient's `connector` thread retries `socket.create_connection(("127.0.0.1", port))` in a
`while True:` whose `except OSError:` only counts (`self.attempts += 1`), against a port from a
stale config file; `lookup()` waits on the Event only that thread sets. Its stack moves through
the connect and its counter climbs, yet the loop cannot end: it is a busy loop (a livelock), not
an io-wait and not work. The rule needs every part of the mechanism; each variant below takes one
away (a listener on the port, a back-off in the `except`) and must not be a hang.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.analyse.patterns import match_process
from debug_hang.facts import add_loopback_fact, is_loopback
from debug_hang.pipeline import load_capture, reanalyse
from debug_hang.probe.socket_peers import connect_targets, listening_ports
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CASE = ROOT / "tests" / "data" / "captures" / "feature_client_reconnect_stale_port"


def _client_info(doc: dict[str, Any]) -> dict[str, Any]:
    return next(v for v in doc["meta"]["info"] if v.get("connect_targets"))


def _connector_frames(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for p in doc["processes"] for t in p["threads"] if t.get("name") == "connector"
            for f in t["frames"] if f.get("function") == "FeatureClient._connect"]


def test_a_connect_retried_at_once_to_a_dead_loopback_port_is_a_busy_loop_hang() -> None:
    # GIVEN the live capture: the connector in its retry loop in every sample, the probe's reading
    # that nothing listens on the loopback port it dials, the thread on a CPU
    # WHEN it is re-analysed
    doc = to_json(reanalyse(CASE))
    # THEN it is a hang: busy-loop in FeatureClient, decided by the retry loop's mechanism
    assert doc["verdict"] == "hang", doc["summary"]
    top = doc["root_causes"][0]
    assert top["pattern"] == "busy-loop"
    assert [c.get("class_name") for c in top["culprits"]] == ["FeatureClient"]
    assert "nothing listens on loopback port" in doc["summary"] and "self.attempts" in doc["summary"]


def test_the_same_loop_with_a_listener_on_its_port_is_no_hang(tmp_path: Path) -> None:
    # GIVEN the same readings, but the probe found a listener on the port the loop dials
    def listening(doc: dict[str, Any]) -> None:
        for target in _client_info(doc)["connect_targets"]:
            target["listening"] = True

    # WHEN it is re-analysed
    doc = to_json(reanalyse(capture_variant(tmp_path, CASE, stacks=listening)))
    # THEN the connect can succeed: no hang is called from the loop
    assert doc["verdict"] != "hang", doc["summary"]
    assert "nothing listens on loopback port" not in doc["summary"]


def test_the_same_loop_backing_off_in_its_except_is_no_hang(tmp_path: Path) -> None:
    # GIVEN the same readings, but the loop's `except` sleeps before the next attempt
    def backs_off(doc: dict[str, Any]) -> None:
        for frame in _connector_frames(doc):
            frame["context"] = [line.replace("self.attempts += 1", "time.sleep(0.5)") for line in frame["context"]]

    # WHEN it is re-analysed
    doc = to_json(reanalyse(capture_variant(tmp_path, CASE, stacks=backs_off)))
    # THEN a retry with back-off is a wait for the service, not a livelock: not a hang from this rule
    assert doc["verdict"] != "hang", doc["summary"]
    assert "nothing listens on loopback port" not in doc["summary"]


def test_a_loop_that_changes_what_it_dials_is_no_retry_livelock(tmp_path: Path) -> None:
    # GIVEN the same readings, but the loop's `except` moves on to the next port
    def scans(doc: dict[str, Any]) -> None:
        for frame in _connector_frames(doc):
            frame["context"] = [line.replace("self.attempts += 1", "self.port += 1") for line in frame["context"]]

    # WHEN it is re-analysed
    doc = to_json(reanalyse(capture_variant(tmp_path, CASE, stacks=scans)))
    # THEN the port it dials changes every round: not proven to fail forever
    assert doc["verdict"] != "hang", doc["summary"]


@pytest.mark.parametrize("active", [True, False])
def test_a_connector_caught_inside_the_connect_is_a_busy_loop_not_an_io_wait(tmp_path: Path, active: bool) -> None:
    # GIVEN the capture with its latest sample of the connector as another of its samples caught
    # it: inside create_connection (where the stacks alone read io-wait, and the process reads
    # event-wait: the lookup thread waits on the Event only the connector sets), py-spy marking it
    # running or idle in the connect
    def caught_in_connect(doc: dict[str, Any]) -> None:
        procs = sorted((p for p in doc["processes"] if p.get("actor_class") == "FeatureClient"), key=lambda p: p["sample"])
        inside = next(t for p in procs for t in p["threads"] if t.get("name") == "connector"
                      and next(f for f in t["frames"] if not f.get("native"))["function"] == "create_connection")
        latest = next(t for t in procs[-1]["threads"] if t.get("name") == "connector")
        latest["frames"] = json.loads(json.dumps(inside["frames"]))
        latest["active"] = active

    case = capture_variant(tmp_path, CASE, stacks=caught_in_connect)
    latest = max((p for p in load_capture(case).collection.processes if p.actor_class == "FeatureClient"),
                 key=lambda p: p.sample)
    assert {m.pattern for t, m in match_process(latest).threads if t.name == "connector"} == {"io-wait"}
    # WHEN it is re-analysed
    doc = to_json(reanalyse(case))
    # THEN the connect retried at once is the busy loop of FeatureClient, a hang
    assert doc["verdict"] == "hang", doc["summary"]
    top = doc["root_causes"][0]
    assert top["pattern"] == "busy-loop" and [c.get("class_name") for c in top["culprits"]] == ["FeatureClient"]
    assert "nothing listens on loopback port" in doc["summary"]


def test_the_probe_reads_whether_a_connect_frame_port_is_listened_on() -> None:
    # GIVEN a listening socket of this process and a free port, and connect frames dialling each
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    free = probe.getsockname()[1]
    probe.close()
    try:
        live = server.getsockname()[1]
        frames = [{"function": "create_connection", "facts": {"port": port, "loopback(host)": True}}
                  for port in (live, free)]
        procs = [{"pid": os.getpid(), "threads": [{"os_thread_id": 7, "frames": frames}]}]
        # WHEN the probe reads the connect targets (after the last sample)
        found = connect_targets(procs)[os.getpid()]
        # THEN the listened port is listening, the other not, both loopback
        assert live in (listening_ports(os.getpid()) or set())
        assert {(t["port"], t["listening"], t["loopback"]) for t in found} == {(live, True, True), (free, False, True)}
    finally:
        server.close()


def test_the_loopback_fact_is_a_flag_of_a_connect_frame_host() -> None:
    # GIVEN connect frames' `host` locals as py-spy prints them
    facts: dict[str, Any] = {}
    add_loopback_fact(facts, "create_connection", {"host": "'127.0.0.1'", "port": "80"})
    remote: dict[str, Any] = {}
    add_loopback_fact(remote, "create_connection", {"host": "'10.1.2.3'"})
    other: dict[str, Any] = {}
    add_loopback_fact(other, "Worker.run", {"host": "'127.0.0.1'"})
    # THEN only a connect frame gets the flag, and the host itself is never kept
    assert facts == {"loopback(host)": True} and remote == {"loopback(host)": False} and other == {}
    assert is_loopback("localhost") and is_loopback("::1") and not is_loopback("example.com")


HEALTHY = ROOT / "tests" / "data" / "captures" / "healthy_connect_backoff_listener_later"


def test_a_connect_retried_with_back_off_until_its_server_listens_is_no_hang() -> None:
    # GIVEN `redteam/healthy_connect_backoff.py` diagnosed live: the connector sleeps 0.5 s in its
    # `except` between refused connects to the port its FeatureServer listens on only after a
    # warm-up; the lookup waits on the Event it sets (the live run, before, called it a hang:
    # poll-never-satisfied, 0.95)
    # WHEN it is re-analysed
    doc = to_json(reanalyse(HEALTHY))
    # THEN a retry with back-off waits for a service that may still come: inconclusive, never a hang
    assert doc["verdict"] in ("inconclusive", "no-hang"), doc["summary"]
    assert "retried with back-off" in doc["summary"]


def test_a_connect_frame_caught_before_it_unpacks_its_address_is_read_from_that_tuple() -> None:
    # GIVEN create_connection caught at its first lines: its `address` argument, no `host`/`port` yet
    facts: dict[str, Any] = {"timeout": 1}
    add_loopback_fact(facts, "create_connection", {"address": '("127.0.0.1", 48129)', "timeout": "1"})
    remote: dict[str, Any] = {}
    add_loopback_fact(remote, "create_connection", {"address": "('10.1.2.3', 80)"})
    # THEN its port and whether its host is loopback are read from the tuple (the host is not kept)
    assert facts == {"timeout": 1, "port": 48129, "loopback(host)": True}
    assert remote == {"port": 80, "loopback(host)": False}


def test_the_stale_port_retry_while_an_actor_of_the_job_is_still_starting_is_no_hang(tmp_path: Path) -> None:
    # GIVEN the stale-port capture, but another actor of the job is still being created (its
    # creation waits for a node): a process that may yet bind the port the loop dials
    def starting_actor(tasks: list[dict[str, Any]]) -> None:
        model = next(t for t in tasks if t["type"] == "ACTOR_CREATION_TASK")
        tasks.append({**json.loads(json.dumps(model)), "task_id": "ffffffffffffffff" + "ab" * 12 + "02000000",
                      "actor_id": "ab" * 12 + "02000000", "name": "Backend.__init__",
                      "func_or_class_name": "Backend.__init__", "state": "PENDING_NODE_ASSIGNMENT",
                      "worker_pid": None, "worker_id": None, "events": [{"state": "PENDING_NODE_ASSIGNMENT",
                                                                          "created_ms": 1796302394600.0}]})

    # WHEN it is re-analysed
    doc = to_json(reanalyse(capture_variant(tmp_path, CASE, tasks=starting_actor)))
    # THEN the retry is no proven livelock while something of the job may still bind its port
    assert doc["verdict"] != "hang", doc["summary"]


LATE = ROOT / "tests" / "data" / "captures" / "healthy_connect_server_starts_late"


def test_a_connect_retried_at_once_while_its_server_computes_before_listening_is_no_hang() -> None:
    # GIVEN `redteam/healthy_connect_server_starts_late.py` diagnosed live: LookupClient's connector
    # retries create_connection at once (its `except` only counts) to a loopback port nobody
    # listens on yet, while LookupServer computes its index before it binds and listens on it
    # (the live run before the change called it a hang: io-wait 0.95, LookupClient)
    # WHEN it is re-analysed
    doc = to_json(reanalyse(LATE))
    # THEN the retry may end when the server listens: never a hang, and the summary says why
    assert doc["verdict"] in ("inconclusive", "no-hang"), doc["summary"]
    assert "may yet bind" in doc["summary"] and "LookupServer" in doc["summary"], doc["summary"]
