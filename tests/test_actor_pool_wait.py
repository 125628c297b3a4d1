"""A ray.util.ActorPool that waits on itself, on a real capture (tests/data/captures/
actor_pool_unsent_producer, redteam/pool_rescore.py): the pool's two busy actors wait on an empty
ray.util.queue that only a third call would fill, and that call sits unsent in the driver's pool
(ActorPool sends a call only to an idle actor). Before, the culprit was Ray's own queue actor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.snapshot import QUEUE_ACTOR_CLASS

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "actor_pool_unsent_producer"


def test_the_driver_holding_the_pool_is_the_culprit_not_the_queue() -> None:
    # GIVEN both Rescorers in queue.get(), the queue empty and never put into, the driver in get_next
    doc = to_json(reanalyse(CAPTURE))
    top = doc["root_causes"][0]
    # THEN the pool waits on itself: the driver, at its get_next line, with the ActorPool fix
    assert doc["verdict"] == "hang"
    assert top["pattern"] == "executor-self-wait"
    assert [c["kind"] for c in top["culprits"]] == ["driver"], top["culprits"]
    assert top["proof"]["deciding"]["code"] == "results.append(pool.get_next())"
    assert "ActorPool" in top["fix"]
    assert all(c.get("class_name") != QUEUE_ACTOR_CLASS for c in top["culprits"])


def test_without_a_pool_wait_the_empty_queue_still_has_no_producer(tmp_path: Path) -> None:
    # GIVEN the same readings with the driver's ActorPool frames renamed away (a plain ray.get)
    def no_pool(doc: dict[str, Any]) -> None:
        for proc in doc["processes"]:
            for thread in proc.get("threads") or []:
                for frame in thread.get("frames") or []:
                    if str(frame.get("file") or "").endswith("ray/util/actor_pool.py"):
                        frame["file"] = frame["file"].replace("actor_pool.py", "other_helper.py")
    doc = to_json(reanalyse(capture_variant(tmp_path, CAPTURE, stacks=no_pool)))
    # THEN the old reading: nobody alive feeds the queue
    assert doc["root_causes"][0]["pattern"] == "producer-gone"


SERVE_QUEUE = ROOT / "tests" / "data" / "captures" / "serve_ctor_waits_on_queue"


def test_a_queue_actor_is_never_the_end_of_a_chain_nobody_followed() -> None:
    # GIVEN a Serve replica's constructor in cfg_q.get(), the queue's producer unseen (a request path)
    doc = to_json(reanalyse(SERVE_QUEUE))
    top = doc["root_causes"][0]
    # THEN the consumer's wait is the end: inconclusive, at its get line, not Ray's queue actor; and
    # its own reading (a blocked event loop) is not taken for the cause of a hang
    assert doc["verdict"] == "inconclusive"
    assert top["pattern"] == "queue-get-wait"
    assert all(c.get("class_name") != QUEUE_ACTOR_CLASS for c in top["culprits"]), top["culprits"]
    assert top["proof"]["deciding"]["code"] == "self.cfg = cfg_q.get(block=True)"
