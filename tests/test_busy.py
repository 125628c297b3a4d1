"""A busy culprit across its samples, on real recorded captures: a spin is a hang, work is not.

Each capture under tests/data/cases/ was written by a real diagnosis of a real example (see its
docstring). The rule separates them by mechanism: what the loop tests and whether it changes it
(its source, read on the node), whether the stack or the loop's state moved between samples, and
whether every sample sits under one call (CPU below Python).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from debug_hang.analyse import sampling
from debug_hang.analyse.analysis import analyse
from debug_hang.analyse.busy import BusyWork, busy_threads, busy_work, standing_threads
from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.analyse.patterns import match_process
from debug_hang.model import Collection, process_from_dict
from debug_hang.pipeline import load_capture, merge_round, reanalyse
from debug_hang.probe.node_probe import probe_node
from debug_hang.probe.pyspy import DumpOptions, find_pyspy
from debug_hang.watch import not_a_hang

pytestmark = pytest.mark.unit

CASES = ROOT / "tests" / "data" / "cases"
needs_pyspy = pytest.mark.skipif(find_pyspy() is None, reason="py-spy not installed")


def first_round(case: str) -> Collection:
    """The capture as its first round of samples saw it (samples 0 and 1)."""
    cap = load_capture(CASES / case)
    coll = cap.collection
    keep = [p for p in coll.processes if p.sample < 2]
    info = {ref: {**v, "sampled_at": list(v.get("sampled_at") or [])[:2]} for ref, v in coll.info.items()}
    return dataclasses.replace(coll, processes=keep, info=info)


def analyse_round(case: str, coll: Collection) -> Diagnosis:
    cap = load_capture(CASES / case)
    return analyse(cap.job, cap.snapshot, coll, cap.tasks_after, "", "", [], [], 0.0)


def test_the_recorded_spin_wait_is_a_spin_by_its_source() -> None:
    # GIVEN the CheckpointCoordinator spinning `while self._done[epoch] < self.cfg.num_shards: pass`
    diag = reanalyse(CASES / "busy_loop")
    (work,) = diag.busy
    # THEN the loop tests what nothing in it changes: a spin from two samples, a hang
    assert work.loop is not None and work.loop.kind == "spin-wait"
    assert "self._done" in work.loop.tests and not work.loop.changes
    assert work.state == "spin" and work.proven_by_source
    assert diag.verdict == "hang" and "only another thread can end it" in diag.summary
    assert any("spins at CheckpointCoordinator.wait_all" in e for e in diag.causes[0].evidence)


def test_one_long_numpy_call_is_no_spin_and_no_hang() -> None:
    # GIVEN a Solver in numpy's svd under one job line, the loop bounded by the clock
    diag = reanalyse(CASES / "long_numpy_step")
    (work,) = diag.busy
    # THEN every sample sits inside one call: a computation below Python, not a spin
    assert work.one_call.startswith("top = max(top, float(np.linalg.svd(")
    assert work.loop is not None and work.loop.kind == "timed"
    assert work.state == "no-spin"
    assert diag.verdict == "inconclusive" and "no spin" in diag.summary


def test_a_proven_spin_asks_for_no_more_samples_but_one_call_does() -> None:
    # GIVEN the first analysis of each capture
    spin = reanalyse(CASES / "busy_loop")
    call = reanalyse(CASES / "long_numpy_step")
    # THEN the spin is decided from its two samples; the long call is sampled again
    assert not sampling.plan(spin, spin.snapshot.taken_at if spin.snapshot else 0.0).refs
    more = sampling.plan(call, call.snapshot.taken_at if call.snapshot else 0.0)
    assert [r.pid for r in more.refs] == [call.busy[0].ref.pid]
    assert "do not show whether it advances" in more.why[0]


@pytest.mark.parametrize("case", ["lock_order_deadlock", "actor_call_cycle", "dead_rank", "producer_never_produces"])
def test_hangs_decided_by_their_mechanism_take_no_more_samples(case: str) -> None:
    diag = reanalyse(CASES / case)
    assert diag.verdict == "hang"
    assert not sampling.plan(diag, diag.snapshot.taken_at if diag.snapshot else 0.0).refs


SPIN = """\
class Cache:
    ready = False
    def lookup(self, limit):
        print("READY", flush=True)
        spins = 0
        while {test}:
            spins += 1
        return spins
Cache().lookup(10 ** 12)
"""


def _live(tmp_path: Path, test: str) -> BusyWork:
    """A real process running the loop, sampled twice with py-spy --locals on this node."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "loop.py"
    script.write_text(SPIN.format(test=test))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        value = probe_node("local", [proc.pid], DumpOptions(locals=True).to_dict(), samples=2, interval_s=0.5,
                           children=False)
    finally:
        proc.kill()
        proc.wait()
    samples = [process_from_dict(raw) for raw in value["processes"]]
    info = value["info"][str(proc.pid)]
    work = busy_work(match_process(samples[-1]), samples, info)
    assert work is not None
    return work


@needs_pyspy
def test_a_counter_the_loop_does_not_test_is_no_progress(tmp_path: Path) -> None:
    # GIVEN `while not self.ready: spins += 1` (the flag's setter gone), read with its locals
    work = _live(tmp_path, "not self.ready")
    # THEN `spins` advances, but the loop never tests it: a spin
    assert work.loop is not None and work.loop.kind == "spin-wait" and work.loop.tests == ("self.ready",)
    assert work.ignored and work.ignored[0].startswith("spins ") and not work.advanced
    assert work.state == "spin"


@needs_pyspy
def test_a_counter_the_loop_tests_and_advances_is_work(tmp_path: Path) -> None:
    # GIVEN the same loop shape, `while spins < limit: spins += 1`
    # (on a loaded node py-spy may miss a sample's locals: a second real run, never a looser check)
    for attempt in range(2):
        work = _live(tmp_path / str(attempt), "spins < limit")
        if work.advanced:
            break
    # THEN the loop changes what it tests, and its locals show it advancing: work, never a spin
    assert work.loop is not None and work.loop.kind == "self-advancing" and work.loop.changes == ("spins",)
    assert work.state == "advancing" and any(a.startswith("spins ") for a in work.advanced)


def test_watcher_fires_on_the_spin_and_not_on_the_long_call() -> None:
    assert not_a_hang(reanalyse(CASES / "busy_loop")) == ""
    assert not_a_hang(reanalyse(CASES / "long_numpy_step")).startswith("a computation, not a wait")


def test_two_rounds_merge_into_one_collection() -> None:
    # GIVEN a capture's stacks split into two rounds
    cap = load_capture(CASES / "busy_loop")
    coll = cap.collection
    first = dataclasses.replace(coll, processes=[p for p in coll.processes if p.sample == 0], info=dict(coll.info))
    second = Collection(processes=[dataclasses.replace(p, sample=0) for p in coll.processes if p.sample == 1],
                        info={ref: {"cpu_percent": 99.0, "sampled_at": [2.0]} for ref in coll.info})
    # WHEN merged
    merge_round(first, second)
    # THEN the second round's stacks come after the first's and its readings replace them
    assert sorted({p.sample for p in first.processes}) == [0, 1]
    assert all(v["cpu_percent"] == 99.0 and v["sampled_at"][-1] == 2.0 for v in first.info.values())
    assert busy_threads(analyse(cap.job, cap.snapshot, first, cap.tasks_after, "", "", [], [], 0.0).verdicts, first)


# --- the four recorded examples of this mechanism -------------------------------------------------

def test_a_silent_numpy_evaluation_after_logged_steps_is_work() -> None:
    # GIVEN the Trainer 40 logged steps in, in minutes of numpy evaluation that print nothing
    diag = reanalyse(CASES / "silent_numpy_eval")
    (work,) = diag.busy
    # THEN its loop goes on between samples: no-hang, and the summary says what moved
    assert work.state == "advancing" and work.moved
    assert diag.verdict == "no-hang" and "stack moved" in diag.summary
    assert not_a_hang(diag).startswith("the job move")


def test_a_pure_python_loop_that_advances_its_exit_is_work_and_a_spin_on_a_flag_is_not() -> None:
    # GIVEN two busy threads of the same shape: one function, one `while` loop, 100 % CPU, no output
    counter = reanalyse(CASES / "pure_python_counter")
    spin = reanalyse(CASES / "spin_flag_never_set")
    (counting,) = counter.busy
    (spinning,) = spin.busy
    # THEN the mechanism separates them: the Sampler's loop changes what it tests ...
    assert counting.loop is not None and counting.loop.kind == "self-advancing" and "accepted" in counting.loop.changes
    assert counting.state == "advancing" and counter.verdict == "no-hang"
    # ... the FeatureCache's tests a flag nothing in it changes (its counter is not tested): a hang
    assert spinning.loop is not None and spinning.loop.kind == "spin-wait" and spinning.loop.tests == ("self._ready",)
    assert spinning.state == "spin" and spin.verdict == "hang" and spin.causes[0].pattern == "busy-loop"
    assert spin.sampling["samples"] == 2, "a spin its source proves needs no more samples"


def test_one_long_lapack_call_is_no_spin_after_more_samples() -> None:
    # GIVEN the Analyzer inside one np.linalg.eigvals call, sampled in two rounds
    diag = reanalyse(CASES / "long_single_call")
    (work,) = diag.busy
    # THEN every one of its samples is under one call: no spin, nothing seen to advance: inconclusive
    assert work.one_call == "vals = np.linalg.eigvals(a)" and work.state == "no-spin"
    assert work.samples >= 4 and (work.span_s or 0) >= 3
    assert diag.verdict == "inconclusive" and "no spin" in diag.summary
    assert diag.sampling["rounds"] == 2 and "do not show whether it advances" in diag.sampling["why"][0]
    assert not_a_hang(diag).startswith("a computation, not a wait")


def test_the_first_round_asks_for_more_samples_of_the_undecided_culprit_only() -> None:
    # GIVEN the first round of each capture (its first two samples)
    call = analyse_round("long_single_call", first_round("long_single_call"))
    spin = analyse_round("spin_flag_never_set", first_round("spin_flag_never_set"))
    # THEN the long call is sampled again, the proven spin is not
    assert [r.pid for r in sampling.plan(call, 0.0).refs] == [call.busy[0].ref.pid]
    assert call.verdict == "inconclusive"
    assert not sampling.plan(spin, 0.0).refs and spin.verdict == "hang"


CAPTURES = ROOT / "tests" / "data" / "captures"


def test_a_running_thread_with_a_small_cpu_share_is_no_gil_holder_blocked_off_the_cpu() -> None:
    # GIVEN a red-team capture at load ~20: a pure-Python loop py-spy saw active with the GIL in
    # both samples (lines 25 then 26) but with a small CPU share, and no run-queue reading
    diag = reanalyse(CAPTURES / "busy_python_under_load")
    # THEN the idle re-reading does not make it a GIL holder blocked in C, and its moving stack is work
    assert not any(c.pattern == "gil-holder-blocked" for c in diag.causes)
    assert diag.verdict == "no-hang", diag.summary
    assert "train_bpe" in diag.summary and "works" in diag.summary


def test_a_demand_starved_by_holders_that_compute_is_no_hang() -> None:
    # GIVEN four numpy tasks holding the CPUs two pending tasks need (same load, same misreading)
    diag = reanalyse(CAPTURES / "busy_holders_under_load")
    # THEN no GIL holder is named, and the starved demand waits for work, not for a hang
    assert not any(c.pattern == "gil-holder-blocked" for c in diag.causes)
    assert diag.verdict != "hang", diag.summary
    assert "running calls hold" in diag.summary


def test_a_setter_thread_that_spins_is_read_across_both_rounds() -> None:
    # GIVEN live captures (with the second round) of two processes whose calls wait on an object
    # that only their own background thread would set, and that thread spins: the process's own
    # reading is the wait, the spinning thread stands for it in the graph (graph/inprocess.py)
    for name, state in (("captures/notifier_spins_waiters_wait", "seen=0"), ("cases/event_setter_spins", "len(best)=2")):
        diag = reanalyse(ROOT / "tests" / "data" / name)
        work = [w for w in diag.busy if w.ref == diag.causes[0].culprits[0].ref]
        # THEN that thread is read across its samples, and its loop found the same state in every one
        assert work and work[0].state == "spin" and state in work[0].frozen, (name, work)
        assert diag.verdict == "hang" and work[0].samples >= 4, diag.summary
        # (and from the first round alone, two samples with facts on one, it is not yet a hang)
        first = dataclasses.replace(diag.collection, processes=[p for p in diag.collection.processes if p.sample < 2])
        again = busy_threads(diag.verdicts, first) + standing_threads(diag.graph, diag.verdicts, first, set())
        assert again and not any(w.state == "spin" for w in again), name


def test_a_value_written_back_unchanged_advances_nothing() -> None:
    # GIVEN the merge loop of event_setter_spins, as the node read it (the whole loop in context)
    diag = reanalyse(CASES / "event_setter_spins")
    loop = next(w for w in diag.busy if w.thread == "merger").loop
    # THEN `self.pairs[best] = self.pairs[best]` changes nothing it tests: no self-advancing loop
    assert loop is not None and loop.kind == "unknown" and not loop.changes, loop


def test_a_frame_of_a_generator_expression_in_the_loop_test_is_no_movement() -> None:
    # GIVEN a spin whose loop test is `while any(... for ...)`: one sample caught the thread inside
    # the generator expression, the other in the loop's body
    diag = reanalyse(CAPTURES / "spin_test_in_a_genexpr")
    work = next(w for w in diag.busy if w.thread == "merger")
    # THEN the loop is the caller's, and nothing moved: the spin is not called work
    assert work.function.endswith("_merge_loop") and not work.moved, work
    assert diag.verdict != "no-hang", diag.summary


def test_a_comprehension_that_is_the_loop_advances_by_its_own_variable() -> None:
    # GIVEN a real capture (redteam/embedding_refit.py, round 15b, healthy): a pool thread in
    # `vals = [np.linalg.eigh(m + k * np.eye(dim))[0][-1] for k in range(n_iter)]`, the caller's
    # locals frozen, the comprehension's `k` 34 → 38 over the samples
    diag = reanalyse(ROOT / "tests" / "data" / "captures" / "healthy_comprehension_eigh_on_pool_thread")
    # THEN its loop is the comprehension and it advances: no hang (before: busy-loop 0.95, a false hang)
    assert diag.verdict != "hang", diag.summary
    assert any(w.state == "advancing" and any(a.startswith("k (in <listcomp>)") for a in w.advanced) for w in diag.busy)
