"""What the wait-for graph reads in recorded real captures of less common mechanisms.

Each capture under tests/data/cases/ is a real run of its examples/ scenario: a streaming generator
paused by back-pressure, a thread pool joined before its stop sentinels, a multiprocessing.Pool
that lost a task with a killed worker, a blocked async event loop inside a call cycle, a paced
stream. The tests check the edges and evidence that decide them, not only the final pattern.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.analyse.rootcause import find_cycles
from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

CASES = ROOT / "tests" / "data" / "cases"


def _diag(name: str) -> Diagnosis:
    case = CASES / name
    if not (case / "stacks.json").exists():
        pytest.skip(f"no recorded {name} capture")
    return reanalyse(Path(case))


def test_paused_generator_closes_a_cycle_through_its_consumer() -> None:
    # GIVEN a driver that waits on an Event-backed call while the stream it stopped reading is paused
    diag = _diag("streaming_backpressure")
    g = diag.graph
    # WHEN re-analysed THEN the generator waits on its consumer and the cycle holds all three
    back = [e for e in g.edges if e.why == "generator-backpressure"]
    assert len(back) == 1 and g.nodes[back[0].dst].kind == "driver"
    assert g.nodes[back[0].src].task_name == "read_shards"
    cycle = {g.nodes[k].name.split(" (")[0] for c in find_cycles(g) for k in c}
    assert cycle == {"driver", "Tracker", "read_shards"}
    # and the consumer, the code to change, is named first
    assert diag.causes[0].culprits[0].kind == "driver"


def test_queue_waiters_and_a_joiner_cannot_fill_the_queue() -> None:
    # GIVEN upload threads idle in Queue.get and the method's thread in Thread.join (executor shutdown)
    diag = _diag("executor_shutdown_join")
    node = diag.causes[0].culprits[0]
    # THEN nobody can put: the joiner is named, with the line that joins
    assert node.pattern == "producer-gone"
    text = " ".join(node.evidence)
    assert "Thread.join" in text and "upload_all" in text and "the process waits on itself" in text


def test_a_pool_with_no_task_left_is_the_culprit_not_its_idle_workers() -> None:
    # GIVEN Pool.map waiting while both pool workers wait for a new task (one was killed mid-task)
    diag = _diag("pool_worker_killed")
    top = diag.causes[0]
    # THEN the waiting actor is the culprit, no child is, and the replacement worker is noticed
    assert [c.class_name for c in top.culprits] == ["FeatureExtractor"] and top.culprits[0].kind == "actor"
    assert not [e for e in diag.graph.edges if e.why == "child-process-wait"]
    assert any("replaced a worker" in e for e in top.culprits[0].evidence)


def test_a_cycle_through_a_blocked_event_loop_names_the_loop_first() -> None:
    # GIVEN Router (async) blocking its loop in ray.get on Ranker, which calls back into Router
    top = _diag("async_actor_blocking_get").causes[0]
    # THEN the cycle is read as the blocked loop, Router first
    assert top.pattern == "async-loop-blocked" and top.cycle
    assert top.culprits[0].class_name == "Router"


def test_a_sleeping_generator_read_as_a_stream_is_not_called_hung() -> None:
    # GIVEN a generator sleeping between yields while the driver iterates its ObjectRefGenerator
    diag = _diag("healthy_stream_paced")
    # THEN it is pacing, not a poll that never ends
    assert diag.verdict == "inconclusive"
    assert diag.causes[0].pattern == "stream-paced-producer"


CAPTURES = ROOT / "tests" / "data" / "captures"


def test_an_async_barrier_waits_on_the_party_still_inside_a_split_whose_consumer_left() -> None:
    # GIVEN a red-team capture (tests/data/captures/README.md): TrainWorker rank 1 left its
    # streaming_split shard after 5 steps and waits on an async EpochBarrier (its `wait` awaits an
    # asyncio.Event: no stack); rank 0 waits inside the split, which stalls without rank 1 reading
    diag = reanalyse(CAPTURES / "split_consumer_left_barrier")
    g = diag.graph
    barrier = next(n for n in g.nodes.values() if n.class_name == "EpochBarrier")
    # WHEN re-analysed THEN the barrier's await is no root cause: it waits for a later call of the
    # one party with work of its own that has not called it (rank 0, inside the split)
    assert barrier.pattern is None
    later = [e for e in g.out(barrier.key) if e.why == "later-call"]
    assert len(later) == 1 and not later[0].guessed
    inside = g.nodes[later[0].dst]
    assert inside.class_name == "TrainWorker" and inside.pattern == "data-iterator-wait"
    # and the cycle through the split names only the consumer that left, the others its victims
    top = diag.causes[0]
    assert top.pattern == "split-consumer-left" and [c.class_name for c in top.culprits] == ["TrainWorker"]
    left = top.culprits[0]
    assert left.key != inside.key and any(e.why == "split-consumer-left" and e.dst == left.key for e in g.edges)
    assert barrier.key in top.victims and inside.key in top.victims


@pytest.mark.parametrize("capture", ["async_sleep_backoff_healthy", "uvloop_async_sleep_backoff_healthy"])
def test_an_async_back_off_with_a_timer_due_is_no_stuck_await(capture: str) -> None:
    # GIVEN a healthy job (tests/data/captures/README.md): an async actor's `fetch` retries with
    # `await asyncio.sleep(3)`, silent, the driver in ray.get on it; the loop is idle between tries
    diag = reanalyse(CAPTURES / capture)
    fetcher = next(n for n in diag.graph.nodes.values() if n.class_name == "Fetcher")
    # WHEN re-analysed THEN its loop's timer (asyncio's _run_once `timeout`; under uvloop, the
    # timeout of its epoll wait) keeps it from being called stuck: the coroutine wakes on its own
    assert fetcher.pattern != "async-await-stuck"
    assert any("timer due in" in text for text in fetcher.evidence), fetcher.evidence
    assert diag.verdict != "hang"


def test_a_dead_asyncio_task_s_traceback_is_quoted_for_the_await_it_left_stuck() -> None:
    # GIVEN an async actor whose `feed` awaits put on a full asyncio.Queue; its consumer Task raised
    # KeyError and, unreferenced, was garbage-collected (asyncio logged it to the worker's .err)
    diag = reanalyse(CAPTURES / "asyncio_task_died_queue_full")
    # WHEN re-analysed THEN the await is stuck, and the proof quotes the dead task's exception
    assert diag.verdict == "hang" and diag.causes[0].pattern == "async-await-stuck"
    failure = diag.proofs[0].failure
    assert failure is not None and failure.exception == "KeyError: 'lang'"
    assert failure.traceback[0] == "Task exception was never retrieved"
    assert any("_consume" in line for line in failure.traceback)


def test_an_idle_uvloop_loop_is_read_from_its_thread_name_and_its_epoll_wait() -> None:
    # GIVEN async_weight_store_wrong_instance run with its actors on uvloop (tests/test_examples.py):
    # the WeightStore's loop thread shows no Python frame of the loop, only Thread.run
    diag = reanalyse(CAPTURES / "uvloop_async_weight_store_wrong_instance")
    store = diag.causes[0].culprits[0]
    # WHEN re-analysed THEN the await is stuck, its loop read as idle with no timer (epoll_pwait -1)
    assert diag.verdict == "hang" and diag.causes[0].pattern == "async-await-stuck" and store.class_name == "WeightStore"
    assert any("no timer scheduled (its epoll wait has no timeout)" in text for text in store.evidence), store.evidence


def test_ray_data_s_fire_and_forget_stats_call_is_no_wait_of_the_split() -> None:
    # GIVEN split_trainer_early_exit diagnosed at load ~24: the dashboard's Ray Data endpoint did
    # not answer in time (no dataset read), and the SplitCoordinator's executor had a
    # `_StatsActor.update_execution_metrics` call in flight (sent every loop round, never waited on)
    diag = reanalyse(CAPTURES / "split_stats_call_in_flight")
    g = diag.graph
    # WHEN re-analysed THEN the stats actor is nobody's wait (the live run named it, idle-no-work 0.95)
    stats = [n.key for n in g.nodes.values() if n.class_name == "_StatsActor"]
    assert stats and not any(e.dst in stats for e in g.edges)
    # and without the dataset's reading, the split's stop is not followed: inconclusive, no victim named
    assert diag.verdict == "inconclusive"
    assert not any(c.class_name in ("EpochBarrier", "_StatsActor") for cause in diag.causes for c in cause.culprits)
