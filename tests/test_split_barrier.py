"""A streaming_split's epoch barrier and a Serve replica still starting, on real captures
(tests/data/captures/README.md):

- `data_split_shards_in_turn/` (redteam/data_split_shards_in_turn.py): one ShardEvaluator actor
  iterates both splits of `streaming_split(2)` in turn; its first `iter_batches` waits in the
  SplitCoordinator's `start_epoch` barrier, which needs the other split's reader, and no other
  process of the job could be it: split-consumer-left, the evaluator (graph/libraries.py
  `edges_split_epoch_barrier`).
- `data_split_eval_shard_kept_back/` (redteam/data_split_eval_shard_kept_back.py): the driver hands
  one split to a Trainer and waits on it before it creates the other split's reader: the Trainer's
  loop iterates one split only, so the culprit is the splits' creator, the driver.
- `healthy_split_second_reader_warms_up/` (redteam/healthy_split_second_reader_warms_up.py): the
  same barrier with one reader in it while the other reader still builds its model: that reader
  could still call in, so there is no cycle and no hang.
- `healthy_serve_replica_index_build/` (redteam/healthy_serve_replica_index_build.py): a client
  waits on a deployment with no RUNNING replica whose one replica is STARTING, its constructor
  computing: the client's wait goes on to that replica (graph/libraries.py `follow_serve`), which
  works: no hang.
"""

from __future__ import annotations

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
IN_TURN = CAPTURES / "data_split_shards_in_turn"
KEPT_BACK = CAPTURES / "data_split_eval_shard_kept_back"
LATE = CAPTURES / "healthy_split_second_reader_warms_up"
STARTING = CAPTURES / "healthy_serve_replica_index_build"


def test_splits_read_in_turn_by_one_reader_are_the_readers_hang() -> None:
    # GIVEN the coordinator in start_epoch's barrier with one call, from the evaluator that holds both splits
    doc = to_json(reanalyse(IN_TURN))
    top = doc["root_causes"][0]
    # THEN the evaluator is the culprit (not Ray Data's coordinator), with the one-reader-per-split fix
    assert (doc["verdict"], top["pattern"]) == ("hang", "split-consumer-left"), doc["summary"]
    assert [c["class_name"] for c in top["culprits"]] == ["ShardEvaluator"]
    assert top["fix"].startswith("Give every split a consumer of its own")


def test_a_split_kept_back_by_its_creator_is_the_creators_hang() -> None:
    # GIVEN the Trainer in the barrier reading its one split, the driver waiting on it before it makes the other reader
    doc = to_json(reanalyse(KEPT_BACK))
    top = doc["root_causes"][0]
    # THEN the driver, which made the split and kept the other one back, is the culprit, not the Trainer
    assert (doc["verdict"], top["pattern"]) == ("hang", "split-consumer-left"), doc["summary"]
    assert [c["kind"] for c in top["culprits"]] == ["driver"]
    assert top["proof"]["deciding"]["line"] == 47


def test_a_reader_that_could_still_call_in_is_no_missing_reader() -> None:
    # GIVEN the same barrier, one reader in it, the other reader RUNNING its own job code (a model build)
    doc = to_json(reanalyse(LATE))
    # THEN no hang: the barrier waits on a reader that works and will come
    assert doc["verdict"] != "hang", doc["summary"]
    assert "split-consumer-left" not in str(doc["root_causes"])


def test_a_request_at_a_deployment_with_only_a_starting_replica_waits_on_that_replica() -> None:
    # GIVEN a client in DeploymentResponse.result, the deployment's one replica STARTING, its __init__ computing
    doc = to_json(reanalyse(STARTING))
    # THEN the wait is followed to the replica, whose constructor works: no hang, and no candidate made of the client
    assert doc["verdict"] == "no-hang", doc["summary"]
    assert "Searcher" in doc["summary"]

