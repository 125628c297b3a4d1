"""A thread joined that waits on its joiner, on a real capture
(tests/data/captures/thread_join_before_go_signal, redteam/thread_join_before_go_signal.py,
round 14b): Exporter.export starts an `upload` thread that first waits on `self.go`, then calls
`t.join()` (line 35) and only after it `self.go.set()` (line 36). The upload thread's setters,
read from the source, name `Exporter.export:36`: the joiner sets only after its join returns,
and the join returns only once the waiter ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "thread_join_before_go_signal"


def _top(folder: Path) -> tuple[str, str, int | None, str]:
    doc = to_json(reanalyse(folder))
    top = doc["root_causes"][0]
    return doc["verdict"], top["pattern"], top["proof"]["deciding"]["line"], top["fix"]


def test_a_join_before_the_set_the_joined_thread_waits_for_is_hung_at_the_join() -> None:
    # GIVEN upload in Event.wait at _upload:26 (setters Exporter.export:36), MainThread in
    # Thread.join at export:35, no other thread in job code, no call queued
    verdict, pattern, line, fix = _top(CAPTURE)
    # THEN hung: the event is set only after a join that waits for its waiter; the join is the line
    assert (verdict, pattern) == ("hang", "event-never-set")
    assert line == 35
    assert "before joining" in fix


def test_a_set_before_the_join_is_no_such_deadlock(tmp_path: Path) -> None:
    # GIVEN the same readings, but the source's setter line is before the joiner's line
    def earlier(doc: dict[str, Any]) -> None:
        for p in doc["processes"]:
            for t in p["threads"]:
                for f in t["frames"]:
                    if f["function"] == "Exporter._upload" and f.get("setters"):
                        f["setters"] = ["Exporter.export:34"]
    verdict, pattern, _line, _fix = _top(capture_variant(tmp_path, CAPTURE, stacks=earlier))
    # THEN not this rule (the set may already have happened to another object, or be pending)
    assert not (verdict == "hang" and pattern == "event-never-set" and _line == 35), (verdict, pattern)


def _no_facts(doc: dict[str, Any]) -> None:
    for p in doc["processes"]:
        for t in p["threads"]:
            for f in t["frames"]:
                f["facts"] = None


def test_without_the_dumps_facts_the_source_alone_decides(tmp_path: Path) -> None:
    # GIVEN the same readings without the dump's object identities (no --locals)
    verdict, pattern, line, _fix = _top(capture_variant(tmp_path, CAPTURE, stacks=_no_facts))
    # THEN the same answer, from the waiter's setters and the joiner's line alone
    assert (verdict, pattern, line) == ("hang", "event-never-set", 35)


def _downloader(doc: dict[str, Any]) -> None:
    for p in doc["processes"]:
        if p.get("actor_class") == "Exporter":
            p["threads"].append({"thread_id": "1", "os_thread_id": 999999, "name": "Thread-7 (urlretrieve)",
                                 "active": False, "owns_gil": False, "frames": [
                                     {"function": "SocketIO.readinto", "file": "/usr/lib/python3.11/socket.py", "line": 706},
                                     {"function": "urlretrieve", "file": "/usr/lib/python3.11/urllib/request.py", "line": 270},
                                     {"function": "Thread.run", "file": "/usr/lib/python3.11/threading.py", "line": 982}]})


@pytest.mark.parametrize("facts", [True, False])
def test_a_third_thread_the_joiner_may_be_joining_leaves_it_open(tmp_path: Path, facts: bool) -> None:
    # GIVEN the same readings (with or without the dump's object identities), plus a thread inside
    # a library call (a download started as a Thread)
    def edit(doc: dict[str, Any]) -> None:
        _downloader(doc)
        if not facts:
            _no_facts(doc)
    verdict, pattern, line, _fix = _top(capture_variant(tmp_path, CAPTURE, stacks=edit))
    # THEN the join may be on that thread, which ends by itself: not this rule (the join is not named)
    assert not (pattern == "event-never-set" and line == 35), (verdict, pattern, line)
