"""A 2,000-rank hang on 250 nodes: the report stays about a page, the odd ones out are named,
and stacks.json keeps every process. The capture is the recorded
gloo_skipped_allreduce case, its ranks copied with new identities (tests/scale_capture.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scale_capture import build

from debug_hang.pipeline import reanalyse
from debug_hang.report.markdown import rank_ranges, render_markdown
from debug_hang.report.write import write_outputs

pytestmark = pytest.mark.unit

PAGE_LINES = 80  # a page of report.md, whatever the number of processes
PAGE_CHARS = 12_000


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("scale") / "capture", ranks=2000, nodes=250, odd=(2, 1337))


def test_two_thousand_ranks_fold_into_a_page_with_the_odd_ones_out_named(scaled: Path, tmp_path: Path) -> None:
    # GIVEN 1,998 ranks blocked in one all-reduce and two ranks that skipped it, on 250 nodes
    diag = reanalyse(scaled)
    # WHEN the report is rendered
    report = render_markdown(diag)
    # THEN it is about a page,
    assert len(report.splitlines()) <= PAGE_LINES and len(report) <= PAGE_CHARS, len(report.splitlines())
    # the blocked ranks are one row with their count, rank ranges and node count,
    assert "| TrainWorker × 1998 (ranks 0-1, 3-1336, 1338-1999) | 1998 pids | 250 nodes | blocked |" in report
    # and the ranks that differ are each listed, named as the root cause
    for rank, pid in ((2, 100002), (1337, 101337)):
        assert f"| TrainWorker\\[rank {rank}\\] (pid {pid}) (odd one out) | {pid} |" in report
    assert diag.causes[0].pattern == "collective-skipped"
    assert {c.pid for c in diag.causes[0].culprits} == {100002, 101337}
    # while the output folder keeps every stack of every process
    write_outputs(diag, tmp_path / "out", None)
    stacks = json.loads((tmp_path / "out" / "stacks.json").read_text())
    assert len({(p["node_id"], p["pid"]) for p in stacks["processes"]}) == 2001


def test_rank_ranges() -> None:
    assert rank_ranges([0, 1, 3, 4, 5, 9]) == "0-1, 3-5, 9"
    assert rank_ranges(list(range(0, 40, 2)), most=3) == "0, 2, 4, … 17 more ranges"


def test_thousands_of_finished_task_rows_leave_the_finding_as_it_was(tmp_path: Path) -> None:
    # GIVEN 64 ranks, two of which skipped the all-reduce, and 5,000 more FINISHED calls of the
    # ranks (copies of the recorded rows with new task ids, as bench_scale.py --linearity builds)
    plain = build(tmp_path / "plain", ranks=64, nodes=8, odd=(2, 37))
    busy = build(tmp_path / "busy", ranks=64, nodes=8, odd=(2, 37), finished=5000)
    snap = json.loads((busy / "snapshot.json").read_text())
    extra = len(snap["tasks"]) - len(json.loads((plain / "snapshot.json").read_text())["tasks"])
    assert extra == 5000 and len({t["task_id"] for t in snap["tasks"]}) == len(snap["tasks"])
    # WHEN both are analysed  THEN the same ranks are named for the same cause
    before, after = reanalyse(plain), reanalyse(busy)
    assert after.verdict == before.verdict == "hang"
    assert after.causes[0].pattern == before.causes[0].pattern == "collective-skipped"
    assert {c.pid for c in after.causes[0].culprits} == {c.pid for c in before.causes[0].culprits} == {100002, 100037}
