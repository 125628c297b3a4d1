"""Cycles through Ray Serve deployments, on real captures (tests/data/captures/README.md):

- `serve_ctor_calls_deployer/` (redteam/serve_ctor_calls_deployer.py): ModelDeployer's only slot
  runs `serve.run(Scorer.bind(me))`, which waits for the replica to start; Scorer's constructor
  waits in `ray.get(deployer.get_config.remote())`, queued behind it. The replica's constructor
  blocks its (async) replica, but awaiting would not help: serve.run waits for `__init__` to return.
  The cycle is actor-call-cycle, the replica's constructor first (rootcause.py `_cycle_pattern`:
  a member the loop waits on to be built is no async-loop-blocked).
- `serve_planner_retriever_cycle/` (redteam/serve_planner_retriever_cycle.py): Planner
  (max_ongoing_requests=1) awaits Retriever, whose `search` awaits `Planner.expand` through a
  handle; both replicas show only their idle event loops. The culprit line is the await of the
  handle call read from the deployment's source (probe `remote_awaits`), never `selectors.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.probe.setters import remote_awaits
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
CTOR = CAPTURES / "serve_ctor_calls_deployer"
RAG = CAPTURES / "serve_planner_retriever_cycle"


def _top(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["root_causes"][0]


def test_replica_constructor_in_a_deploy_cycle_is_the_call_cycle_not_a_blocked_loop() -> None:
    # GIVEN serve.run on the deployer's only slot waiting for the Scorer replica, whose constructor
    # (on the replica's event loop) waits in ray.get on a call queued behind that serve.run
    doc = to_json(reanalyse(CTOR))
    top = _top(doc)
    # THEN the cycle is named by its calls, the constructor's member first, with the constructor's fix
    assert (doc["verdict"], top["pattern"]) == ("hang", "actor-call-cycle"), doc["summary"]
    assert [c["class_name"] for c in top["culprits"]] == ["ServeReplica:scorer:Scorer", "ModelDeployer"]
    assert top["fix"].startswith("Do no blocking call from __init__")
    assert (top["proof"]["deciding"]["function"], top["proof"]["deciding"]["line"]) == ("Scorer.__init__", 28)


def test_serve_handle_cycle_names_the_await_of_the_handle_call() -> None:
    # GIVEN two replicas awaiting each other's deployment, their stacks only the idle event loop
    doc = to_json(reanalyse(RAG))
    top = _top(doc)
    assert (doc["verdict"], top["pattern"]) == ("hang", "actor-call-cycle"), doc["summary"]
    # THEN the line printed is the deployment's await of the handle call, not the loop's selector
    deciding = top["proof"]["deciding"]
    assert (deciding["function"], deciding["code"]) == ("Retriever.search", "await self.planner.expand.remote(q)")
    assert "selectors.py" not in str(top["proof"])
    assert top["fix"].startswith("Between Serve deployments")


def test_without_the_source_reading_no_line_is_guessed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # GIVEN the same capture without the probe's reading of the deployments' awaits
    def drop(doc: dict[str, Any]) -> None:
        for proc in doc["processes"]:
            proc.pop("remote_awaits", None)

    doc = to_json(reanalyse(capture_variant(tmp_path, RAG, stacks=drop)))
    # THEN the cycle stands, and no await line is made up
    assert _top(doc)["pattern"] == "actor-call-cycle"
    assert "await self.planner.expand.remote(q)" not in str(_top(doc)["proof"])


def test_remote_awaits_reads_each_deployments_handle_awaits() -> None:
    path = str(ROOT / "redteam" / "serve_planner_retriever_cycle.py")
    assert [(e["method"], e["code"]) for e in remote_awaits(path, "Retriever")] == [
        ("Retriever.search", "await self.planner.expand.remote(q)")]
    assert [e["method"] for e in remote_awaits(path, "Planner")] == ["Planner.__call__"]
    assert remote_awaits(path, "QAClient") == []
