"""Who holds what an in-process wait waits on, read from the frames, on recorded real captures.

Each capture under tests/data/captures/ (README there) is a live diagnosis of a red-team job
(redteam/NAME.py) on a loopback cluster. Each rule is checked on the hang it names and on a
real capture where it must not fire (a healthy job that looks alike), and with one fact of the
hang's capture changed (the module a waiter imports, a sample, a frame above the wait): the rule
reads the mechanism, not the scenario.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT

from debug_hang.analyse.analysis import analyse
from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.analyse.graph.imports import imported_names, module_is
from debug_hang.model import Frame, Process
from debug_hang.pipeline import Capture, finish, load_capture, reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
IMPORT_HANG = "import_lock_waits_on_its_waiters"  # redteam/plugin_featurizer.py
SLOW_IMPORT = "slow_import_waits_on_working_pool"  # redteam/healthy_slow_plugin_import.py
EXIT_HANG = "exit_joins_writer_waiting_for_atexit"  # redteam/metrics_export_child.py
SLOW_EXIT = "exit_joins_working_uploader"  # redteam/healthy_exit_flush_child.py
DEAD_HOLDER = "lock_left_by_dead_thread"  # redteam/catalog_refresher.py


def _capture(name: str) -> Capture:
    return load_capture(Path(CAPTURES / name))


def _diag(name: str, change: Callable[[Capture], None] | None = None) -> Diagnosis:
    cap = _capture(name)
    if change is not None:
        change(cap)
    diag = analyse(cap.job, cap.snapshot, cap.collection, cap.tasks_after, "", "", [], [], time.monotonic())
    finish(diag, cap.snapshot)
    return diag


def _patterns(diag: Diagnosis) -> list[str]:
    return [str(c.pattern) for c in diag.causes]


def _evidence(diag: Diagnosis) -> str:
    return "\n".join(line for c in diag.causes for x in c.culprits for line in x.evidence)


def _samples(cap: Capture, role: str) -> list[Process]:
    return [p for p in cap.collection.processes if p.role == role]


# ---------------------------------------------------------------------------- import locks
def test_a_thread_in_a_module_body_waiting_on_its_importers_is_an_import_lock_deadlock() -> None:
    # GIVEN the live capture: Featurizer's main thread runs _text_plugins' body (`<module>` under
    # _load_unlocked) and waits on pool futures; both pool threads wait in _ModuleLock.acquire at
    # `from _text_plugins import normalise`
    diag = _diag(IMPORT_HANG)
    # THEN a hang, the import-time code of the module the culprit, the waiters named
    assert diag.verdict == "hang" and _patterns(diag)[0] == "import-lock-deadlock"
    cause = diag.causes[0]
    assert [c.class_name for c in cause.culprits] == ["Featurizer"]
    frame = cause.culprits[0].user_frame or cause.culprits[0].frame
    assert frame is not None and frame.function == "<module>" and frame.file.endswith("_text_plugins.py")
    text = _evidence(diag)
    assert "plugin-warm_0" in text and "plugin-warm_1" in text and "from _text_plugins import normalise" in text


def test_the_saved_import_hang_folder_re_analyses_the_same() -> None:
    doc = reanalyse(CAPTURES / IMPORT_HANG)
    assert doc.verdict == "hang" and str(doc.causes[0].pattern) == "import-lock-deadlock"


def test_waiters_importing_another_module_do_not_wait_for_this_import() -> None:
    # GIVEN the hang's capture, with the waiters' import line naming another module
    def other_module(cap: Capture) -> None:
        for proc in cap.collection.processes:
            for thread in proc.threads:
                for frame in thread.frames:
                    if frame.code and "from _text_plugins import" in frame.code:
                        frame.code = "from _vision_plugins import normalise"
    # THEN the import lock they wait for is not the holder's: no import-lock deadlock
    assert "import-lock-deadlock" not in _patterns(_diag(IMPORT_HANG, other_module))


def test_one_sample_is_not_enough_to_call_an_import_deadlocked() -> None:
    # GIVEN the hang's capture with only its last sample of each process
    def last_only(cap: Capture) -> None:
        last = max(p.sample for p in cap.collection.processes)
        cap.collection.processes = [p for p in cap.collection.processes if p.sample == last]
    # THEN the rule does not fire: the holder must be seen waiting on the waiters in every sample
    assert "import-lock-deadlock" not in _patterns(_diag(IMPORT_HANG, last_only))


def test_a_slow_import_whose_pool_jobs_work_is_not_an_import_deadlock() -> None:
    # GIVEN the live capture of a healthy job: Indexer's first call runs _slow_shards' body and waits
    # on pool jobs that sleep in a loop (a slow download); the second call waits in _ModuleLock.acquire
    cap = _capture(SLOW_IMPORT)
    actor = [p for p in cap.collection.processes if p.role == "actor"][-1]
    assert any(f.name == "acquire" and "_ModuleLock" in f.function for t in actor.threads for f in t.frames)
    assert any(f.function == "<module>" and f.file.endswith("_slow_shards.py") for t in actor.threads for f in t.frames)
    # THEN no import-lock deadlock, and no hang: the jobs the holder waits for do not wait on it
    diag = _diag(SLOW_IMPORT)
    assert "import-lock-deadlock" not in _patterns(diag) and diag.verdict != "hang", diag.summary


@pytest.mark.parametrize(("line", "names"), [
    ("from _text_plugins import normalise  # lazily", {"_text_plugins", "_text_plugins.normalise"}),
    ("import a.b as x, c", {"a", "a.b", "c"}),
    ("from . import sub", {".sub"}),
    ("mod = importlib.import_module('pkg.plugins')", {"pkg.plugins"}),
    ("x = normalise(t)", set()),
])
def test_the_modules_an_import_line_names(line: str, names: set[str]) -> None:
    assert imported_names(line) == names


def test_a_module_name_is_its_file_or_package() -> None:
    assert module_is("/w/_ray_pkg/_text_plugins.py", "_text_plugins")
    assert module_is("/site-packages/pkg/plugins/__init__.py", "pkg.plugins")
    assert module_is("/w/pkg/sub.py", ".sub")
    assert not module_is("/w/my_text_plugins.py", "text_plugins")


# ---------------------------------------------------------------------------- exit joins
def test_an_exit_joining_a_writer_that_waits_for_an_atexit_sentinel_is_blocked_at_exit() -> None:
    # GIVEN the live capture: the export child's main thread in threading._shutdown, its
    # non-daemon writer in Queue.get for the sentinel an atexit handler would put
    diag = _diag(EXIT_HANG)
    # THEN a hang at exit, the child the culprit, the writer's wait the line (not a pipe, not stdin)
    assert diag.verdict == "hang" and _patterns(diag)[0] == "exit-join-blocked"
    culprit = diag.causes[0].culprits[0]
    assert culprit.pid == next(p.pid for p in _samples(_capture(EXIT_HANG), "child"))
    frame = culprit.user_frame or culprit.frame
    assert frame is not None and frame.function == "writer"
    assert "threading._shutdown" in _evidence(diag) and "atexit" in _evidence(diag)
    fix = to_json(diag)["root_causes"][0]["fix"]
    assert "atexit" in fix and "communicate() with a timeout" not in fix


def test_the_saved_exit_hang_folder_re_analyses_the_same() -> None:
    doc = reanalyse(CAPTURES / EXIT_HANG)
    assert doc.verdict == "hang" and str(doc.causes[0].pattern) == "exit-join-blocked"


def test_a_main_thread_not_at_exit_is_no_exit_join() -> None:
    # GIVEN the hang's capture, the child's main thread back in its main code (not in _shutdown)
    def main_code(cap: Capture) -> None:
        for proc in _samples(cap, "child"):
            for thread in proc.threads:
                if thread.frames and thread.frames[0].name == "_shutdown":
                    thread.frames = [Frame("<module>", "<string>", 14)]
    # THEN not an exit join (the writer's wait is read as it was before)
    assert "exit-join-blocked" not in _patterns(_diag(EXIT_HANG, main_code))


def test_a_joined_thread_whose_wait_has_a_timeout_is_not_blocked_at_exit() -> None:
    # GIVEN the hang's capture, the writer's Queue.get given a timeout (its locals in the last sample)
    def with_timeout(cap: Capture) -> None:
        for proc in _samples(cap, "child"):
            for thread in proc.threads:
                for frame in thread.frames:
                    if frame.facts is not None and "timeout" in frame.facts:
                        frame.facts["timeout"] = 5.0
    # THEN not blocked at exit: the thread wakes by itself and may end its loop
    assert "exit-join-blocked" not in _patterns(_diag(EXIT_HANG, with_timeout))


def test_an_exit_waiting_for_a_working_uploader_is_not_blocked() -> None:
    # GIVEN the live capture of a healthy job: the export child's main thread in threading._shutdown,
    # its non-daemon uploader sleeping a second between batches
    cap = _capture(SLOW_EXIT)
    assert any(t.frames and t.frames[0].name == "_shutdown" for p in _samples(cap, "child") for t in p.threads)
    # THEN not blocked at exit: the joined thread sleeps out a timer, it will end
    diag = _diag(SLOW_EXIT)
    assert "exit-join-blocked" not in _patterns(diag), diag.summary


# ---------------------------------------------------------------------------- a lock nobody live holds
def test_a_lock_waited_on_with_no_holder_frame_is_left_by_a_thread_that_ended() -> None:
    # GIVEN the live capture: `lookup` waits at `with self._lock:` with only Ray's call machinery
    # above it; the refresh thread died with KeyError between acquire() and release()
    diag = _diag(DEAD_HOLDER)
    # THEN not a self-deadlock: the lock was left taken by a thread that ended
    assert diag.verdict == "hang" and _patterns(diag)[0] == "lock-abandoned"
    assert [c.class_name for c in diag.causes[0].culprits] == ["CatalogService"]
    assert "no live thread holds it" in _evidence(diag)


def test_a_caller_frame_above_the_wait_makes_it_a_self_deadlock() -> None:
    # GIVEN the same capture, with a job frame of the waiting thread above its `with` line (a method
    # of the service that calls lookup: it may hold the lock)
    def called_from_job_code(cap: Capture) -> None:
        for proc in cap.collection.processes:
            for thread in proc.threads:
                at = next((i for i, f in enumerate(thread.frames) if f.function.endswith(".lookup")), None)
                if at is not None:
                    caller = dataclasses.replace(thread.frames[at], function="CatalogService.refresh_and_lookup",
                                                 line=40, code="return self.lookup(sku)", context=None, facts=None)
                    thread.frames.insert(at + 1, caller)
    # THEN a self-deadlock: a frame of the waiting thread could hold it
    assert _patterns(_diag(DEAD_HOLDER, called_from_job_code))[0] == "lock-self-deadlock"
