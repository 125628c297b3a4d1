"""Which object a thread waits on, and whether anyone alive can release it, on recorded real captures.

- actor_restart_lost_state: a poll's own finished calls are no progress; a restarted actor polled
  by a loop it cannot leave is the culprit (actor-restart-lost-state), and only because it restarted.
- ray_queue_two_instances: a ray.util.queue consumer waits on the queue actor its own call goes to;
  nobody alive feeds that one, and the producer filled the other one and finished (producer-gone).
- cf_future_never_set: a live thread that only sleeps and re-checks a guard nothing can change is
  no setter (event-never-set), proven only across samples.
- tp_layout_mixed_nodes: ranks whose layout lines list one group with two member lists are named
  together, from their own logs.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
from conftest import ROOT

from debug_hang.analyse.analysis import analyse
from debug_hang.analyse.busy import release_guard
from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.analyse.group_layout import disagreement
from debug_hang.model import Frame
from debug_hang.pipeline import Capture, load_capture, reanalyse

pytestmark = pytest.mark.unit

CASES = ROOT / "tests" / "data" / "cases"


def analyse_capture(cap: Capture) -> Diagnosis:
    return analyse(cap.job, cap.snapshot, cap.collection, cap.tasks_after, "", "", [], [], 0.0)


def test_the_rounds_of_a_poll_are_no_progress_and_the_restarted_actor_is_the_culprit() -> None:
    # GIVEN the trainer polling Coordinator.ready, which restarted and lost its registrations
    diag = reanalyse(CASES / "actor_restart_lost_state")
    # THEN the finished ready() rounds are not read as progress, and the restart is the culprit
    assert diag.verdict == "hang", diag.summary
    assert not any("Coordinator.ready finished" in p for p in diag.progress), diag.progress
    top = diag.causes[0]
    assert top.pattern == "actor-restart-lost-state" and top.culprits[0].class_name == "Coordinator"
    assert any("restarted 1 time(s)" in e for e in top.evidence), top.evidence


def test_the_same_poll_of_an_actor_that_never_restarted_names_no_restart() -> None:
    # GIVEN the same capture, with the Coordinator's row saying it never restarted
    cap = load_capture(CASES / "actor_restart_lost_state")
    actors = [{**a, "num_restarts": "0"} for a in cap.snapshot.actors]
    cap = dataclasses.replace(cap, snapshot=dataclasses.replace(cap.snapshot, actors=actors))
    diag = analyse_capture(cap)
    # THEN no cause reads as a lost restart: the rule rests on the restart, not on the poll alone
    assert all(c.pattern != "actor-restart-lost-state" for c in diag.causes), [c.pattern for c in diag.causes]


def test_a_queue_consumer_waits_on_its_own_queue_actor_whose_producer_fed_the_other_one() -> None:
    diag = reanalyse(CASES / "ray_queue_two_instances")
    assert diag.verdict == "hang", diag.summary
    top = diag.causes[0]
    # THEN the culprit is the finished producer, not the consumer or a queue actor
    assert top.pattern == "producer-gone" and [c.name for c in top.culprits] == ["fill"], top.culprits
    trainer = next(k for k, n in diag.graph.nodes.items() if n.class_name == "Trainer")
    queue = next(e.dst for e in diag.graph.out(trainer))
    # the Trainer's wait goes to the _QueueActor its own get call runs on
    assert diag.graph.nodes[queue].class_name == "_QueueActor"
    assert any(e.dst == top.culprits[0].key for e in diag.graph.out(queue))
    assert any("into another queue" in e for e in top.evidence), top.evidence


def test_a_sleeping_poll_that_rechecks_a_state_nothing_changes_is_no_setter() -> None:
    diag = reanalyse(CASES / "cf_future_never_set")
    assert diag.verdict == "hang", diag.summary
    top = diag.causes[0]
    assert top.pattern == "event-never-set" and top.culprits[0].class_name == "RequestBatcher"
    text = " ".join(top.evidence)
    assert "len(self.pending) >= 8" in text and "Compared:" in text, text


def test_one_sample_of_the_poll_proves_nothing() -> None:
    # GIVEN the same capture cut to its last sample: the poll was not seen to go round
    cap = load_capture(CASES / "cf_future_never_set")
    last = max(p.sample for p in cap.collection.processes)
    keep = [p for p in cap.collection.processes if p.sample == last]
    info = {ref: {**v, "sampled_at": list(v.get("sampled_at") or [])[-1:]} for ref, v in cap.collection.info.items()}
    diag = analyse_capture(dataclasses.replace(cap, collection=dataclasses.replace(cap.collection, processes=keep, info=info)))
    # THEN the flusher stays a possible setter: not a hang
    assert diag.verdict != "hang", diag.summary


def _flusher_frame() -> Frame:
    cap = load_capture(CASES / "cf_future_never_set")
    return next(t.frames[0] for p in cap.collection.processes for t in p.threads if t.name == "flusher")


def _with_line(frame: Frame, old: str, new: str) -> Frame:
    return dataclasses.replace(frame, context=[line.replace(old, new) for line in frame.context or []])


def test_the_release_guard_is_read_from_the_loop_source() -> None:
    guard = release_guard(_flusher_frame())
    assert guard is not None and guard.tests == ("len(self.pending) >= 8",) and guard.reads == ("self.pending",)


@pytest.mark.parametrize(("old", "new"), [
    ("if len(self.pending) >= 8:", "if self.ready_count() >= 8:"),  # the guard calls out: it may read anything
    ("time.sleep(0.5)", "self.poll_upstream()"),  # an unguarded call every round may act
    ("time.sleep(0.5)", "self.pending = self.pending + [None]"),  # the loop changes what it tests
])
def test_a_loop_that_may_act_has_no_release_guard(old: str, new: str) -> None:
    assert release_guard(_with_line(_flusher_frame(), old, new)) is None


def test_ranks_whose_layout_lines_list_one_group_two_ways_are_named_together() -> None:
    # GIVEN the 4 ranks that built their dp group from a per-node TP_SIZE, and their logs
    diag = reanalyse(CASES / "tp_layout_mixed_nodes")
    top = diag.causes[0]
    # THEN the disagreement leads the finding, and every rank of it is named (not rank 1 alone)
    assert top.pattern == "collective-mismatch" and len(top.culprits) == 4, top.culprits
    assert "[0, 2] and [0, 1, 2, 3] share rank(s) 0, 2" in top.evidence[0], top.evidence[0]
    assert "different members" in diag.summary


def test_layout_lines_that_partition_the_ranks_are_no_disagreement() -> None:
    # GIVEN the same ranks' real logs, each line rewritten to a consistent layout: two dp groups
    ev = reanalyse(CASES / "tp_layout_mixed_nodes").evidence
    assert ev is not None
    logs = {key: found.logs.get("out", "") for key, found in ev.per_node.items() if "dp_group" in found.logs.get("out", "")}
    assert len(logs) == 4
    assert disagreement(logs) is not None
    fixed = {key: re.sub(r"rank (\d+): tp=\d dp_group=\[[^\]]*\]",
                         lambda m: f"rank {m[1]}: tp=2 dp_group={[0, 2] if int(m[1]) % 2 == 0 else [1, 3]}", text)
             for key, text in logs.items()}
    # THEN equal or disjoint member lists are one layout: nothing to name
    assert disagreement(fixed) is None


def test_the_rounds_of_a_poll_whose_target_works_stay_progress() -> None:
    # GIVEN a monitor polling Indexer.progress while the indexer's own thread advances the count
    diag = reanalyse(CASES / "healthy_poll_while_actor_works")
    # THEN the finished progress() rounds may carry the answer's change: no hang
    assert diag.verdict == "no-hang", diag.summary
    assert any("Indexer.progress finished" in p for p in diag.progress), diag.progress


def test_a_sleeping_poll_flagged_active_by_py_spy_is_read_by_the_node_cpu() -> None:
    # GIVEN a live capture where py-spy flagged the sleeping flusher active in one sample (the
    # node saw it runnable 8.9% of the window; tests/data/captures/README.md)
    diag = reanalyse(ROOT / "tests" / "data" / "captures" / "future_setter_flagged_active")
    # THEN it is still the poll that cannot act, not a running setter
    assert diag.verdict == "hang" and diag.causes[0].pattern == "event-never-set", diag.summary
