"""Serve replicas whose requests are in flight and finish none: stuck, or waiting by design.

A deployment whose every request slot awaits requests queued behind it at itself, on a
real capture (tests/data/captures/serve_deployment_awaits_itself, recorded live from
redteam/summarizer_self_handle.py), with the variants where a slot can still free.

The replica (max_ongoing_requests=2, num_replicas=1) holds 2 requests by its own gauge; its
handle to its own deployment has 4 sub-requests queued and none in flight (Serve metrics); no
request finished since. A queued request starts only when a slot frees: executor-self-wait.

A @serve.batch replica with fewer requests than a batch waits out batch_wait_timeout_s (read from
the deployment's source on the node), on tests/data/captures/serve_batch_window_no_warning_healthy
(redteam/healthy_serve_batch_no_warning.py, live): no warning from Serve says so, the window does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.probe.serve_batch import windows_in

pytestmark = pytest.mark.unit

SELF = ROOT / "tests" / "data" / "captures" / "serve_deployment_awaits_itself"
WINDOW = ROOT / "tests" / "data" / "captures" / "serve_batch_window_no_warning_healthy"


def deployment(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["libraries"]["serve"][0]["applications"]["summarizer"]["deployments"]["Summarizer"]


def samples(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for node in doc["meta"]["library_metrics"].values() for s in node["samples"]]


def test_a_deployment_that_awaits_itself_at_capacity_is_hung_on_itself() -> None:
    diag = reanalyse(SELF)
    assert diag.verdict == "hang"
    top = diag.causes[0]
    assert top.pattern == "executor-self-wait"
    assert [n.class_name or n.name for n in top.culprits] == ["ServeReplica:summarizer:Summarizer"]
    assert any("wait at the handle for a free slot" in e for e in top.evidence)


def test_an_autoscaler_that_may_add_a_replica_leaves_it_open(tmp_path: Path) -> None:
    # GIVEN the same capture, the deployment autoscaled up to 3 replicas (1 runs)
    diag = reanalyse(capture_variant(tmp_path, SELF, snapshot=lambda d: deployment(d).update(max_replicas=3)))
    # THEN a new replica could take the queued sub-requests: not a self-wait, not a hang
    assert diag.verdict != "hang"
    assert all(c.pattern != "executor-self-wait" for c in diag.causes)


def test_a_slot_running_a_sub_request_can_free(tmp_path: Path) -> None:
    # GIVEN one of the replica's own sub-requests in flight at its deployment (a slot runs it)
    def one_in_flight(doc: dict[str, Any]) -> None:
        for s in samples(doc):
            if s["name"] == "ray_serve_num_ongoing_requests_at_replicas" and s["labels"]["WorkerId"].startswith("86456b"):
                s["value"] = 1.0
    diag = reanalyse(capture_variant(tmp_path, SELF, stacks=one_in_flight))
    assert all(c.pattern != "executor-self-wait" for c in diag.causes)


def test_a_replica_with_a_free_slot_is_no_self_wait(tmp_path: Path) -> None:
    # GIVEN the replica's own gauge at 1 of its 2 slots
    def free_slot(doc: dict[str, Any]) -> None:
        for s in samples(doc):
            if s["name"] == "ray_serve_replica_processing_queries":
                s["value"] = 1.0
    diag = reanalyse(capture_variant(tmp_path, SELF, stacks=free_slot))
    assert all(c.pattern != "executor-self-wait" for c in diag.causes)


# ---------------------------------------------------------------- a batch window, no warning
def replica_info(doc: dict[str, Any]) -> dict[str, Any]:
    return next(i for i in doc["meta"]["info"] if str(i.get("title", "")).startswith("ray::ServeReplica:"))


def test_the_window_is_read_from_the_deployments_source() -> None:
    (found,) = windows_in(str(ROOT / "redteam" / "healthy_serve_batch_no_warning.py"))
    assert found["class"] == "Scorer" and found["function"] == "score"
    assert (found["max_batch_size"], found["batch_wait_timeout_s"]) == (8, 90)


def test_a_partial_batch_inside_its_declared_window_is_no_hang() -> None:
    diag = reanalyse(WINDOW)
    assert diag.verdict != "hang"
    assert diag.causes[0].pattern == "serve-requests-in-flight"
    assert any("batch_wait_timeout_s=90" in e for e in diag.causes[0].evidence)


def test_without_the_declared_window_the_quiet_replica_is_stuck(tmp_path: Path) -> None:
    diag = reanalyse(capture_variant(tmp_path, WINDOW, stacks=lambda d: replica_info(d).pop("batch_windows")))
    assert diag.causes[0].pattern == "serve-replica-stuck"


def test_a_replica_quiet_far_past_its_window_is_stuck(tmp_path: Path) -> None:
    # GIVEN the same capture with every window 10 s long: the log has been quiet for over 35 s
    def short(doc: dict[str, Any]) -> None:
        for w in replica_info(doc)["batch_windows"]:
            w["batch_wait_timeout_s"] = 10.0
    diag = reanalyse(capture_variant(tmp_path, WINDOW, stacks=short))
    assert diag.causes[0].pattern == "serve-replica-stuck"
