"""Reference cases (references/cases/<example>.md) are real runs: each page is generated from a
capture recorded on a real hang (tests/data/cases/<example>/), and the current analysis, re-run on
that capture, still finds the root cause and the culprits the page shows.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from debug_hang.localcluster import culprit_matches, expected_of
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "references" / "cases"
CAPTURES = ROOT / "tests" / "data" / "cases"
CASES = sorted(p.stem for p in PAGES.glob("*.md") if p.stem != "README")


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_reference_cases", ROOT / "tools" / "make_reference_cases.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recorded(case: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((CAPTURES / case / "diagnosis.json").read_text())
    return doc


def test_there_are_at_least_six_reference_cases_of_hangs() -> None:
    hangs = [c for c in CASES if expected_of(c)["verdict"] == "hang"]
    assert len(hangs) >= 6, CASES


@pytest.mark.parametrize("case", CASES)
def test_reanalysis_still_finds_the_root_cause_the_case_shows(case: str) -> None:
    # GIVEN the capture recorded on the real hang, the diagnosis recorded then, and the planted cause
    folder = CAPTURES / case
    assert (folder / "snapshot.json").is_file() and (folder / "stacks.json").is_file(), f"no capture for {case}"
    then_doc = recorded(case)
    expected = expected_of(case)
    page = (PAGES / f"{case}.md").read_text()
    # WHEN today's code re-analyses the capture
    now = to_json(reanalyse(folder))
    # THEN it reaches the same verdict, pattern and culprits, which are the planted ones the page shows
    assert now["verdict"] == then_doc["verdict"] == expected["verdict"], now["summary"]
    if expected["verdict"] != "hang":
        assert f"**Verdict**: `{expected['verdict']}`" in page
        return
    then = then_doc["root_causes"][0]
    top = now["root_causes"][0]
    assert top["pattern"] == then["pattern"] == expected["pattern"], (top["pattern"], then["pattern"])
    for culprit in expected["culprits"]:
        assert culprit_matches(culprit, top["culprits"]), f"{culprit} not in {top['culprits']}"
        assert culprit_matches(culprit, then["culprits"]), f"{culprit} not in the recorded {then['culprits']}"
    assert f"**Pattern**: [`{expected['pattern']}`](../patterns.md#{expected['pattern']})" in page
    culprit_line = re.search(r"^\*\*Culprit\*\*: (.*)$", page, re.MULTILINE)
    assert culprit_line and all(c["class_name"] in culprit_line.group(1) for c in expected["culprits"])


@pytest.mark.parametrize("case", CASES)
def test_case_page_is_generated_from_its_capture(case: str) -> None:
    text = generator().render_case(case, CAPTURES / case)
    assert (PAGES / f"{case}.md").read_text() == text, (
        f"references/cases/{case}.md differs from its capture: run tools/make_reference_cases.py")


def test_index_lists_every_case() -> None:
    gen = generator()
    index = (PAGES / "README.md").read_text()
    assert index == gen.render_index(CASES)
    for case in CASES:
        assert f"]({case}.md)" in index


@pytest.mark.parametrize("case", CASES)
def test_case_page_is_short_and_says_what_misleads(case: str) -> None:
    # GIVEN the generated page WHEN an agent loads it as few-shot evidence THEN it fits ~3 KB and
    # its "What misleads" section is filled from the example's docstring (never a placeholder)
    page = (PAGES / f"{case}.md").read_text()
    assert len(page.encode()) <= generator().MAX_PAGE_BYTES, f"{case}.md is {len(page.encode())} bytes"
    lesson = page.split("## What misleads", 1)[1].strip()
    assert len(lesson) >= 80 and "missing:" not in lesson, f"{case}: fill the example's 'What misleads' section"
    assert lesson == generator().misleads(case)
    assert "tests/data" not in page, "capture pointers belong to the tests, not the shipped page"


def test_every_example_docstring_says_what_misleads() -> None:
    gen = generator()
    # (a module named _* is a helper an example starts, not an example: it declares no EXPECTED)
    missing = [p.stem for p in sorted((ROOT / "examples").glob("*.py"))
               if not p.stem.startswith("_") and len(gen.misleads(p.stem)) < 80]
    assert not missing, f"add a 'What misleads' section (the tempting wrong answer and why) to: {missing}"


def test_each_page_carries_its_mechanism_for_the_case_chooser() -> None:
    from debug_hang.analyse.next_steps import case_index

    index = dict(case_index(ROOT))
    assert sorted(index) == CASES
    for case in CASES:
        then = recorded(case)
        assert index[case]["verdict"] == then["verdict"]
        if then["verdict"] == "hang":
            assert index[case]["pattern"] == then["root_causes"][0]["pattern"]
            assert index[case]["chain"] == [n.get("pattern") or n.get("state") for n in then["chains"][0]]
