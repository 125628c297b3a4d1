"""A forked child waiting for a thread only its parent has, on real captures: a child's
queue.Queue.join() whose consumer thread runs only in the parent
(tests/data/captures/fork_child_queue_consumer_in_parent, redteam/fork_child_no_uploader_thread.py),
and torch DataLoader fork workers in ray.get, whose core worker exists only in the Ray worker
that forked them (tests/data/captures/dataloader_fork_workers_ray_get,
redteam/dataloader_worker_ray_get.py). The verdict and culprit (the child's wait line) stay; the
report names the thread that was not inherited through fork."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

QUEUE = ROOT / "tests" / "data" / "captures" / "fork_child_queue_consumer_in_parent"
LOADER = ROOT / "tests" / "data" / "captures" / "dataloader_fork_workers_ray_get"
LOST = "not inherited through fork"


def test_a_fork_childs_queue_join_names_the_parents_consumer_thread() -> None:
    # GIVEN the child (one thread) in Queue.join, the parent's `uploader` thread in get() of self.pending
    doc = to_json(reanalyse(QUEUE))
    # THEN the child hangs at its join line, and the evidence names the thread fork did not copy
    assert doc["verdict"] == "hang", doc["summary"]
    cause = doc["root_causes"][0]
    assert cause["pattern"] == "child-process-hang" and cause["culprit"]["kind"] == "process", cause["culprit"]
    assert (cause["proof"]["deciding"]["function"], cause["proof"]["deciding"]["line"]) == ("ShardExporter.upload", 45)
    assert any(LOST in e and "self.pending.join()" in e for e in cause["evidence"]), cause["evidence"]
    assert any("thread uploader serves that object at ShardExporter._uploader" in e for e in cause["evidence"]), cause["evidence"]


def test_fork_workers_in_ray_get_name_the_core_worker_left_in_the_parent() -> None:
    # GIVEN two DataLoader fork workers of the Trainer actor in ray.get
    doc = to_json(reanalyse(LOADER))
    # THEN both workers are the culprits, and the evidence says Ray's core worker was not forked
    assert doc["verdict"] == "hang", doc["summary"]
    cause = doc["root_causes"][0]
    assert cause["pattern"] == "child-process-hang" and len(cause["culprits"]) == 2, cause["culprits"]
    assert cause["proof"]["deciding"]["function"].endswith("ShardDataset.__getitem__"), cause["proof"]["deciding"]
    assert any(LOST in e and "ray.get" in e and "core worker" in e for e in cause["evidence"]), cause["evidence"]


def test_a_child_with_another_thread_in_job_code_is_not_said_to_miss_one(tmp_path: Path) -> None:
    # GIVEN the queue capture with the parent's uploader thread also alive in the child
    def uploader_in_child(stacks: dict[str, Any]) -> None:
        by_sample = {(p["pid"], p["sample"]): p for p in stacks["processes"]}
        for proc in stacks["processes"]:
            if proc["role"] != "child":
                continue
            parent = by_sample[(proc["parent_pid"], proc["sample"])]
            uploader = next(t for t in parent["threads"] if t["name"] == "uploader")
            proc["threads"] = [dict(uploader, os_thread_id=proc["pid"] + 1)] + proc["threads"]

    doc = to_json(reanalyse(capture_variant(tmp_path, QUEUE, stacks=uploader_in_child)))
    # THEN no thread is said to be missing from the child
    assert not any(LOST in e for c in doc["root_causes"] for e in c["evidence"]), doc["root_causes"]
