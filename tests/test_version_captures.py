"""The analysis on real captures from older Rays of the declared range, re-analysed.

Each folder under tests/data/versions/ray-<version>[+py-spy-<version>]/<example>/ was written by
scripts/diagnose_ray_hang.sh on a loopback cluster of that Ray (the tool on the same Ray; py-spy
0.4.3 unless named) while examples/<example>.py was hung on it. What Ray reports differs by version (Ray 2.9's actor rows
have no `num_restarts`; before 2.4x a stream is read through a compiled ObjectRefGenerator that
shows no frame of its own; py-spy 0.3.14 prints bare function names): each capture must still give
the answer its example declares.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, expected_of

from debug_hang.analyse.failures import tool_problem
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

VERSIONS = ROOT / "tests" / "data" / "versions"
CAPTURES = sorted(p for p in VERSIONS.glob("ray-*/*") if (p / "stacks.json").exists())


def test_there_are_captures_of_an_older_ray_and_of_the_py_spy_floor() -> None:
    assert {p.parent.name for p in CAPTURES} >= {"ray-2.9.3", "ray-2.31.0", "ray-2.9.3+py-spy-0.3.14"}
    # py-spy 0.3.14 prints bare function names (0.4 qualifies them with their class)
    frames = json.loads((VERSIONS / "ray-2.9.3+py-spy-0.3.14" / "barrier_party_died" / "stacks.json").read_text())
    functions = {f["function"] for p in frames["processes"] for t in p["threads"] for f in t["frames"]}
    assert "join" in functions and "Thread.join" not in functions


@pytest.mark.parametrize("case", CAPTURES, ids=[f"{p.parent.name}/{p.name}" for p in CAPTURES])
def test_a_capture_of_an_older_ray_gives_its_examples_answer(case: Path) -> None:
    # GIVEN a real capture made with that Ray on both sides
    versions = json.loads((case / "snapshot.json").read_text())["versions"]
    assert case.parent.name.split("+")[0] == f"ray-{versions['cluster']['ray']}" == f"ray-{versions['tool']['ray']}"
    expected = expected_of(case.name)
    # WHEN re-analysed THEN the verdict, the pattern and the culprits are the example's
    diag = reanalyse(case)
    doc = to_json(diag)
    assert doc["verdict"] == expected["verdict"], doc["summary"]
    assert tool_problem(diag) is None  # the same Ray on both sides, nothing of the tool failed
    if expected["verdict"] != "hang":
        return
    top = doc["root_causes"][0]
    assert top["pattern"] == expected["pattern"], doc["summary"]
    for culprit in expected["culprits"]:
        assert any(c["class_name"] == culprit["class_name"] and (culprit["rank"] is None or c["rank"] == culprit["rank"])
                   for c in top["culprits"]), top
