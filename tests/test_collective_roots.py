"""A rooted collective (broadcast, reduce, scatter, gather) that every rank calls at the same line
but with a different root never completes: each rank waits for a root the others do not take for
one. On a real capture (tests/data/captures/broadcast_roots_differ), with the variants where the
roots agree or are not known."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CASE = ROOT / "tests" / "data" / "captures" / "broadcast_roots_differ"


def _broadcast_facts(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [f["facts"] for p in doc["processes"] for t in p["threads"] for f in t["frames"]
            if f.get("function") == "broadcast" and f.get("facts")]


def test_ranks_broadcasting_from_different_roots_are_a_mismatch_naming_both() -> None:
    # GIVEN rank 0 in broadcast with src=0 and rank 1 in the same broadcast with src=1
    facts = _broadcast_facts(__import__("json").loads((CASE / "stacks.json").read_text()))
    assert sorted(f["src"] for f in facts) == [0, 1]
    # WHEN it is re-analysed
    doc = to_json(reanalyse(CASE))
    # THEN it is a hang: the collective's roots differ, both ranks named, the roots quoted
    assert doc["verdict"] == "hang", doc["summary"]
    top = doc["root_causes"][0]
    assert top["pattern"] == "collective-mismatch"
    assert len(top["culprits"]) == 2 and {c["class_name"] for c in top["culprits"]} == {"Rank"}
    assert "src=0" in str(top) and "src=1" in str(top), top


@pytest.mark.parametrize("edit", ["same-root", "root-unknown"])
def test_the_same_root_or_an_unread_one_is_no_mismatch(tmp_path: Path, edit: str) -> None:
    def change(doc: dict[str, Any]) -> None:
        for facts in _broadcast_facts(doc):
            if edit == "same-root":
                facts["src"] = facts["group_src"] = 0
            else:
                facts.pop("src", None)
                facts.pop("group_src", None)
    # GIVEN the same capture with both ranks naming root 0 (or no root read)
    folder = capture_variant(tmp_path, CASE, stacks=change)
    # WHEN it is re-analysed
    doc = to_json(reanalyse(folder))
    # THEN no mismatch is claimed, and the job is not called hung from this
    assert all(rc["pattern"] != "collective-mismatch" for rc in doc["root_causes"]), doc["summary"]
    assert doc["verdict"] != "hang", doc["summary"]


def test_ranks_of_subgroups_may_name_their_own_roots(tmp_path: Path) -> None:
    def on_subgroups(doc: dict[str, Any]) -> None:
        for p in doc["processes"]:
            for t in p["threads"]:
                for f in t["frames"]:
                    if (f.get("code") or "").strip() == "dist.broadcast(cfg, src=src)":
                        f["code"] = "dist.broadcast(cfg, src=src, group=tp_group)"
    # GIVEN the same ranks and roots, the call passing a group of their own (a tensor-parallel group each)
    folder = capture_variant(tmp_path, CASE, stacks=on_subgroups)
    # WHEN it is re-analysed
    doc = to_json(reanalyse(folder))
    # THEN different roots are no mismatch: each group has its own
    assert all(rc["pattern"] != "collective-mismatch" for rc in doc["root_causes"]), doc["summary"]
