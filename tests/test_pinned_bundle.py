"""A request pinned to a full placement-group bundle (placement_group_bundle_index=i) while another
bundle of its group has room: the pin is the cause, not the bundle's holder. On real captures
(tests/data/captures/README.md): pg_bundle_index_collision (two workers pinned to bundle 0 by
`rank // 2`, worker 0 idle in it, bundle 1 free) and its healthy twin pg_pinned_bundle_task_finishes
(pinned to bundle 0, which a computing task holds and will release).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.analyse.capacity import describe, pin_of
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
COLLISION = CAPTURES / "pg_bundle_index_collision"
TWIN = CAPTURES / "pg_pinned_bundle_task_finishes"


def _group(case: Path) -> str:
    import json
    return str(json.loads((case / "snapshot.json").read_text())["placement_groups"][0]["placement_group_id"])


def test_a_pinned_request_is_described_as_what_it_asks_of_its_bundle() -> None:
    # GIVEN the request Ray makes for an actor pinned to bundle 0 of a group of 1-CPU bundles: the
    # bundle's own resource and the group's wildcard, for the same CPU
    gid = _group(COLLISION)
    request = {f"CPU_group_0_{gid}": 1.0, f"CPU_group_{gid}": 1.0, f"bundle_group_0_{gid}": 0.001,
               f"bundle_group_{gid}": 0.001}
    # THEN it reads as one CPU of bundle 0 (not the sum of both names), and is pinned there
    assert describe(request) == f"{{CPU: 1}} of placement group {gid[:12]}, bundle 0"
    pin = pin_of(request)
    assert pin is not None and (pin.index, pin.need) == (0, {"CPU": 1.0})
    assert pin_of({f"CPU_group_{gid}": 1.0}) is None  # any bundle: not pinned


def test_a_request_pinned_to_a_full_bundle_while_another_is_free_names_the_pin() -> None:
    # GIVEN worker 1 pinned to bundle 0, which idle worker 0 holds for its lifetime, bundle 1 free
    doc = to_json(reanalyse(COLLISION))
    # THEN a hang whose cause is the pin: the pending Worker's request, not the idle holder
    assert doc["verdict"] == "hang", doc["summary"]
    top = doc["root_causes"][0]
    assert top["pattern"] == "placement-group-bundle-pinned", doc["summary"]
    kinds = [(c["kind"], c["class_name"], c["pid"]) for c in top["culprits"]]
    assert ("actor", "Worker", None) in kinds, kinds
    assert all(c["pattern"] != "idle-actor-holds-resources" for c in doc["root_causes"])
    text = "\n".join(top["evidence"])
    assert "placement_group_bundle_index=0" in text and "bundle 1 has {CPU: 1} free" in text, text
    assert "{CPU: 2}" not in doc["summary"] + text
    assert "placement_group_bundle_index=rank" in top["fix"]


def _every_bundle_used(doc: dict[str, Any]) -> None:
    """Bundle 1 reported as used too (as if a third member held it)."""
    report = doc["cluster_status"]["loadMetricsReport"]
    for usage in [report["usage"], *report["usageByNode"].values()]:
        for key, pair in usage.items():
            if key.lower().startswith("cpugroup1"):
                pair[0] = pair[1]


def test_a_group_whose_every_bundle_is_full_stays_the_holders_finding(tmp_path: Path) -> None:
    # GIVEN the same capture with bundle 1 used as well: no bundle could take the pinned request
    doc = to_json(reanalyse(capture_variant(tmp_path, COLLISION, snapshot=_every_bundle_used)))
    # THEN the idle holder of bundle 0 is the cause, as before the pin rule
    assert doc["verdict"] == "hang", doc["summary"]
    assert doc["root_causes"][0]["pattern"] == "idle-actor-holds-resources", doc["summary"]


def _no_load_report(doc: dict[str, Any]) -> None:
    doc["cluster_status"] = {}


def test_without_the_load_report_the_free_bundle_is_read_from_the_members(tmp_path: Path) -> None:
    # GIVEN the capture without the autoscaler's load report: what each bundle has free is what
    # the group's members pinned to it hold (worker 0: bundle 0; none: bundle 1)
    doc = to_json(reanalyse(capture_variant(tmp_path, COLLISION, snapshot=_no_load_report)))
    # THEN the pin is still the cause
    assert doc["root_causes"][0]["pattern"] == "placement-group-bundle-pinned", doc["summary"]


def test_a_request_pinned_to_a_bundle_whose_task_will_finish_is_no_hang() -> None:
    # GIVEN the healthy twin: the Worker is pinned to bundle 0, held by a task that computes and returns
    doc = to_json(reanalyse(TWIN))
    # THEN no hang: it waits for the task (bundle 1's room does not make the pin the cause)
    assert doc["verdict"] != "hang", doc["summary"]
    assert all(c["pattern"] != "placement-group-bundle-pinned" for c in doc["root_causes"])
    assert "{CPU: 2}" not in doc["summary"]
