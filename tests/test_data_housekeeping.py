"""Ray's own calls are no wait of the job's, and a held custom resource gets its own fix, on real
captures (tests/data/captures/README.md):

- `data_udf_stats_of_itself/` (redteam/data_udf_stats_of_itself.py): the driver waits on a task that
  iterates the normalized dataset, whose Normalizer's constructor waits on a StatsStore event the
  driver sets only after that task: set-order-deadlock, the driver. The task's streaming executor also
  has a `ActorLocationTracker.get_actor_locations` call RUNNING (Ray Data asks it every scheduling
  round): no wait of the job, so Ray Data's tracker is never a second cause (snapshot.py POLLING_TASKS). The
  call is RUNNING, the tracker dumped, in `data_udf_stats_tracker_call/` (another run of the job).
- `data_udf_stats_definition_load/`: the same job on another run, where one of the dataset's read tasks
  (`ReadRange->MapBatches(<lambda>)`) sat in `fetch_and_register_remote_function` in both samples while
  other calls of that function had FINISHED: a worker starting its call (the GCS answers), never a cause
  of its own (graph/processes.py `note_definition_loads`); without those FINISHED rows it stays
  function-definition-wait (a GCS that answers no definition).
- `license_taken_while_args_pending/` (redteam/license_taken_while_args_pending.py): a task needing the
  cluster's one `rt14_license` waits for it; ReportWriter, created after it, took the licence and waits
  on the task: resource-starvation, ReportWriter, with the custom-resource fix (not num_cpus=0:
  graph/resources.py `_short`).
"""

from __future__ import annotations

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
STATS = CAPTURES / "data_udf_stats_of_itself"
LICENSE = CAPTURES / "license_taken_while_args_pending"
LOADING = CAPTURES / "data_udf_stats_definition_load"
READ_TASK = "ReadRange->MapBatches(<lambda>)"
TRACKER = CAPTURES / "data_udf_stats_tracker_call"


def test_ray_datas_location_tracker_call_is_no_second_cause() -> None:
    # GIVEN the cycle, and column_stats's executor in a get_actor_locations call RUNNING on Ray Data's tracker
    doc = to_json(reanalyse(TRACKER))
    # THEN the tracker is no cause (a call Ray Data makes every round is no wait of the job)
    causes = [(c["pattern"], [k["class_name"] for k in c["culprits"]]) for c in doc["root_causes"]]
    assert doc["verdict"] == "hang", doc["summary"]
    assert causes[0][0] == "set-order-deadlock"
    assert not any("ActorLocationTracker" in str(names) for _p, names in causes), causes


def test_a_held_custom_resource_gets_the_custom_resource_fix() -> None:
    doc = to_json(reanalyse(LICENSE))
    top = doc["root_causes"][0]
    assert (doc["verdict"], top["pattern"], [c["class_name"] for c in top["culprits"]]) == (
        "hang", "resource-starvation", ["ReportWriter"])
    assert top["fix"].startswith("For a custom resource")


def test_a_worker_loading_a_definition_other_calls_ran_is_no_cause() -> None:
    # GIVEN a read task's worker in fetch_and_register_remote_function, other calls of its function FINISHED
    doc = to_json(reanalyse(LOADING))
    # THEN the cycle is the one cause: the starting worker is no function-definition-wait of its own
    assert [c["pattern"] for c in doc["root_causes"]] == ["set-order-deadlock"], doc["summary"]


def test_a_definition_no_call_of_that_function_got_stays_the_gcs_wait(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # GIVEN the same readings, with no FINISHED call of that function (the GCS answered none)
    def unfinished(tasks: list[dict]) -> None:  # type: ignore[type-arg]
        for t in tasks:
            if t.get("name") == READ_TASK and t.get("state") == "FINISHED":
                t["name"] = "ReadRange->Other"

    doc = to_json(reanalyse(capture_variant(tmp_path, LOADING, tasks=unfinished)))
    assert "function-definition-wait" in [c["pattern"] for c in doc["root_causes"]], doc["summary"]
