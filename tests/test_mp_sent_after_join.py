"""A parent that joins its multiprocessing child before sending the input the child waits for, on
a real capture (tests/data/captures/mp_child_waits_config_parent_joins,
redteam/mp_child_waits_config_parent_joins.py, round 14b): ShardConverter.convert forks a child
whose first line is `cfg = conn.recv()` (an mp.Pipe), then calls `proc.join()` and only after
it `parent_conn.send(cfg)`. Each waits for the other: the parent's join is the line to change,
not the child (a victim that "never exits")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "mp_child_waits_config_parent_joins"


def _top(folder: Path) -> tuple[str, str, list[str], int | None, str]:
    doc = to_json(reanalyse(folder))
    top = doc["root_causes"][0]
    names = [str(c.get("name")) for c in top["culprits"]]
    return doc["verdict"], top["pattern"], names, top["proof"]["deciding"]["line"], top["fix"]


def test_a_child_waiting_for_what_its_joining_parent_sends_after_the_join_is_a_cycle_the_parent_leads() -> None:
    # GIVEN the child in Connection.recv (no timeout) under convert_worker:22, the parent in
    # Process.join at convert:36, whose next line is `parent_conn.send(cfg)`
    verdict, pattern, names, line, fix = _top(CAPTURE)
    # THEN a parent/child pipe deadlock, the parent first at its join
    assert (verdict, pattern) == ("hang", "pipe-full-deadlock")
    assert names[0] == "ShardConverter"
    assert line == 36
    assert "send it before join()" in fix


def test_a_parent_that_sent_before_its_join_is_no_such_cycle(tmp_path: Path) -> None:
    # GIVEN the same readings, but the parent's source sends nothing after its join
    def no_send(doc: dict[str, Any]) -> None:
        for p in doc["processes"]:
            for t in p["threads"]:
                for f in t["frames"]:
                    if f["function"] == "ShardConverter.convert" and f.get("context"):
                        f["context"] = [c.replace("parent_conn.send(cfg)", "log(cfg)") for c in f["context"]]
    verdict, pattern, names, _line, _fix = _top(capture_variant(tmp_path, CAPTURE, stacks=no_send))
    # THEN the child is what does not exit (the old reading): no cycle through the parent's send
    assert pattern != "pipe-full-deadlock", (verdict, pattern, names)
