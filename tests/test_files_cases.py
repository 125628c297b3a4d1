"""Waits on kernel objects whose other party is another process of the node (graph/kernel_objects.py,
probe/kernel_objects.py), on two live captures and edited copies of them where the answer must change:

- fifo_open_writer_wrote_elsewhere (redteam/fifo_handoff_path.py): FeatureSink blocked in open() of
  a FIFO for reading; the producer task wrote another path and FINISHED.
- fifo_open_writer_still_running_healthy (redteam/healthy_fifo_slow_writer.py): the same open while
  the writer task still loads its rows (a sleep per page, its loop moving), then opens the FIFO.
- fifo_child_opens_parent_waits_first (redteam/fifo_child_waits_reader.py): Exporter waits in
  proc.wait() for a child blocked opening a FIFO for writing; the actor opens the read end only after.
- sqlite_transaction_left_open (redteam/trial_store_sqlite.py): MetricsReporter retries SQLite's
  lock in its busy handler; TrialStore, idle, holds the RESERVED lock of a transaction left open.
- sqlite_long_transaction_working_healthy (redteam/healthy_sqlite_long_transaction.py): the same
  retry while TrialStore works in one long transaction (a sleep per row, its loop moving).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.analyse.patterns import catalog
from debug_hang.pipeline import reanalyse
from debug_hang.probe.file_locks import read_locks
from debug_hang.probe.kernel_objects import fifo_opens, locks_held_by_others

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
FIFO = CAPTURES / "fifo_open_writer_wrote_elsewhere"
SQLITE = CAPTURES / "sqlite_transaction_left_open"
CHILD_FIFO = CAPTURES / "fifo_child_opens_parent_waits_first"
SLOW_WRITER = CAPTURES / "fifo_open_writer_still_running_healthy"
LONG_TRANSACTION = CAPTURES / "sqlite_long_transaction_working_healthy"
Doc = dict[str, Any]




def info_of(doc: Doc, actor_class: str) -> Doc:
    pid = next(p["pid"] for p in doc["processes"] if p.get("actor_class") == actor_class)
    return next(i for i in doc["meta"]["info"] if i["pid"] == pid)


def drop(actor_class: str, key: str) -> Callable[[Doc], None]:
    return lambda doc: info_of(doc, actor_class).pop(key)


def pattern_of(diag: Diagnosis, name: str) -> str | None:
    return next(n.pattern for n in diag.graph.nodes.values() if n.name == name)


def culprits(diag: Diagnosis) -> list[str]:
    return [c.name for c in diag.causes[0].culprits] if diag.causes else []


def busy_main_thread(doc: Doc, actor_class: str, function: str, lines: tuple[int, int], code: str) -> None:
    """The actor's main thread computing in a call of its own (two lines: its stack moves), at 95 % CPU."""
    for proc in doc["processes"]:
        if proc.get("actor_class") != actor_class:
            continue
        main = next(t for t in proc["threads"] if t.get("name") == "MainThread")
        frame = dict(main["frames"][0], function=function, name=function.rsplit(".", 1)[-1],
                     line=lines[int(proc.get("sample") or 0) % 2], code=code)
        main.update(active=True, frames=[frame] + [f for f in main["frames"] if "main_loop" in f["function"]
                                                   or f["function"] == "<module>"])
    info = info_of(doc, actor_class)
    info["cpu_percent"] = 95.0
    for thread in (info.get("threads") or {}).values():
        thread.update(cpu=95.0, runnable=98.0)


def running_call(rows: list[Doc], like: str, name: str) -> None:
    """A RUNNING call `name` on the actor that ran `like` (its start now, no end)."""
    row = dict(next(r for r in rows if r["name"] == like))
    row.update(name=name, state="RUNNING", task_id=row["task_id"][:-4] + "beef", end_time_ms=None,
               func_or_class_name=name)
    rows.append(row)


# ---------------------------------------------------------------- a FIFO open nobody will answer

def test_a_fifo_open_whose_only_writer_finished_names_the_writer_task() -> None:
    # GIVEN FeatureSink blocked in open() of run-7/features.fifo (kernel: wait_for_partner, the open's
    # path argument), no process of the node holding it open, the producer task FINISHED meanwhile
    diag = reanalyse(FIFO)
    # THEN a hang whose culprit is the task that ended without opening it; the sink is its victim
    assert diag.verdict == "hang"
    assert diag.causes[0].pattern == "fifo-never-opened"
    assert culprits(diag) == ["produce"]
    assert pattern_of(diag, "FeatureSink") == "fifo-open-wait"
    sink = next(n for n in diag.graph.nodes.values() if n.name == "FeatureSink")
    assert any("run-7/features.fifo for reading" in e and "wait_for_partner" in e for e in sink.evidence)
    assert any("no process of its node has" in e for e in sink.evidence)


def test_without_the_kernel_reading_the_fifo_wait_is_unrecognised(tmp_path: Path) -> None:
    # GIVEN the same capture without the probe's FIFO reading (what the tool had before)
    case = capture_variant(tmp_path, FIFO, stacks=drop("FeatureSink", "fifo_opens"))
    # THEN the open() line alone says nothing: inconclusive, the sink an unrecognised chain end
    diag = reanalyse(case)
    assert diag.verdict == "inconclusive"
    assert culprits(diag) == ["FeatureSink"]


def test_a_writer_still_running_on_the_node_is_no_hang(tmp_path: Path) -> None:
    # GIVEN the producer still RUNNING, writing (its stack moves, 95 % CPU): it may yet open the FIFO
    def stacks(doc: Doc) -> None:
        for proc in [p for p in doc["processes"] if p.get("actor_class") == "FeatureSink"]:
            doc["processes"].append(json.loads(json.dumps(proc)) | {"actor_class": "FeatureWriter",
                                                                     "pid": 999001, "actor_id": "ff" * 8})
        info = dict(info_of(doc, "FeatureSink"), pid=999001)
        info.pop("fifo_opens")
        doc["meta"]["info"].append(info)
        busy_main_thread(doc, "FeatureWriter", "FeatureWriter.write_rows", (41, 42), "out.write(row)")

    def tasks(rows: list[Doc]) -> None:
        sink = next(r for r in rows if r["name"] == "FeatureSink.drain")
        rows.append(dict(sink, name="FeatureWriter.write_rows", func_or_class_name="FeatureWriter.write_rows",
                         task_id=sink["task_id"][:-4] + "beef", actor_id="ff" * 8, worker_pid=999001, state="RUNNING"))
    case = capture_variant(tmp_path, FIFO, stacks=stacks, tasks=tasks)
    diag = reanalyse(case)
    # THEN nothing says the open never ends: no hang, and the finished task is nobody's culprit
    assert diag.verdict != "hang"
    assert all(c.pattern != "fifo-never-opened" for c in diag.causes)
    assert any(e.why == "fifo-open-wait" and e.guessed and diag.graph.nodes[e.dst].name == "FeatureWriter"
               for e in diag.graph.edges)


def test_a_live_writer_that_has_not_opened_the_fifo_yet_is_what_the_open_waits_for() -> None:
    # GIVEN (live) the sink blocked in open() and the writer task RUNNING, asleep between pages
    diag = reanalyse(SLOW_WRITER)
    # THEN the open waits for that writer (a guess: nothing names it), whose loop moves: no hang
    assert diag.verdict == "no-hang"
    assert pattern_of(diag, "FeatureSink") == "fifo-open-wait"
    assert [(diag.graph.nodes[e.dst].name, e.guessed) for e in diag.graph.edges if e.why == "fifo-open-wait"] \
        == [("produce", True)]


def test_with_no_call_ended_during_the_wait_the_openers_own_path_is_the_culprit(tmp_path: Path) -> None:
    # GIVEN the producer's run moved to before the sink's drain began: nothing of the job ran meanwhile
    def tasks(rows: list[Doc]) -> None:
        drain = next(r for r in rows if r["name"] == "FeatureSink.drain")
        for row in rows:
            if row["name"] == "produce":
                row.update(start_time_ms=drain["start_time_ms"] - 2000, end_time_ms=drain["start_time_ms"] - 1000)
    diag = reanalyse(capture_variant(tmp_path, FIFO, tasks=tasks))
    # THEN the FIFO is still never opened, and the opener (the path it opens) is where to look
    assert diag.verdict == "hang"
    assert diag.causes[0].pattern == "fifo-never-opened"
    assert culprits(diag) == ["FeatureSink"]


def test_a_process_holding_the_fifo_open_for_writing_is_what_the_open_waits_for(tmp_path: Path) -> None:
    # GIVEN the probe saw a process of the node with the FIFO open at the write end (a race with its open)
    def stacks(doc: Doc) -> None:
        info_of(doc, "FeatureSink")["fifo_opens"][0]["holders"] = [{"pid": 4242, "title": "cat", "ends": ["write"]}]
    diag = reanalyse(capture_variant(tmp_path, FIFO, stacks=stacks))
    # THEN the edge goes to that process, and nobody is called a writer that never came
    assert all(c.pattern != "fifo-never-opened" for c in diag.causes)
    assert any(e.why == "fifo-open-wait" and diag.graph.nodes[e.dst].pid == 4242 for e in diag.graph.edges)


# ---------------------------------------------------------------- a lock retried in SQLite's busy handler

def test_an_idle_holder_of_sqlites_reserved_lock_is_the_culprit() -> None:
    # GIVEN MetricsReporter asleep (hrtimer_nanosleep) inside executemany, TrialStore idle holding
    # the RESERVED and SHARED lock bytes of trials.db (/proc/locks, no waiter listed)
    diag = reanalyse(SQLITE)
    # THEN a hang: TrialStore's open transaction, the reporter its victim; the fix commits it
    assert diag.verdict == "hang"
    assert diag.causes[0].pattern == "db-transaction-held"
    assert culprits(diag) == ["TrialStore"]
    assert pattern_of(diag, "MetricsReporter") == "file-lock-poll"
    store = diag.causes[0].culprits[0]
    assert any("RESERVED lock: a write transaction is open" in e for e in store.evidence)
    assert not any("SHARED lock" in e for e in store.evidence)  # a writer holds SHARED too
    reporter = next(n for n in diag.graph.nodes.values() if n.name == "MetricsReporter")
    assert any("longer than the busy timeout" in e for e in reporter.evidence)
    assert catalog()["db-transaction-held"].fix.startswith("Commit or roll back before the call returns")


def test_a_live_holder_working_in_its_transaction_is_no_hang() -> None:
    # GIVEN (live) the reporter retrying behind TrialStore's RESERVED lock, TrialStore inside its bulk
    # load (asleep between rows, its loop state advancing)
    diag = reanalyse(LONG_TRANSACTION)
    # THEN the retry waits for the holder (a fact: /proc/locks), which works: no hang, nobody blamed
    assert diag.verdict == "no-hang"
    assert pattern_of(diag, "MetricsReporter") == "file-lock-poll"
    assert [(diag.graph.nodes[e.dst].name, e.guessed) for e in diag.graph.edges if e.why == "file-lock-wait"] \
        == [("TrialStore", False)]
    assert pattern_of(diag, "TrialStore") not in ("db-transaction-held", "file-lock-held")


def test_without_the_lock_reading_the_busy_handler_is_unrecognised(tmp_path: Path) -> None:
    diag = reanalyse(capture_variant(tmp_path, SQLITE, stacks=drop("MetricsReporter", "lock_polls")))
    assert diag.verdict == "inconclusive"
    assert culprits(diag) == ["MetricsReporter"]


def test_a_holder_that_works_is_no_hang(tmp_path: Path) -> None:
    # GIVEN TrialStore inside a call that computes (its stack moves, 95 % CPU) while it holds the lock
    case = capture_variant(tmp_path, SQLITE,
                  stacks=lambda doc: busy_main_thread(doc, "TrialStore", "TrialStore.finish_trial", (36, 37),
                                                      'self.db.execute("UPDATE trials SET score = ? WHERE id = ?",'),
                  tasks=lambda rows: running_call(rows, "TrialStore.start_trial", "TrialStore.finish_trial"))
    diag = reanalyse(case)
    # THEN the holder may commit: no hang, and no open transaction is blamed
    assert diag.verdict != "hang"
    assert all(c.pattern not in ("db-transaction-held", "file-lock-held") for c in diag.causes)


def test_a_retry_younger_than_the_default_busy_timeout_may_end_by_itself(tmp_path: Path) -> None:
    # GIVEN the reporter's call began 2 s before the state was read (sqlite3 gives up after 5 s by default)
    taken = json.loads((SQLITE / "snapshot.json").read_text())["taken_at"]

    def tasks(rows: list[Doc]) -> None:
        for row in rows:
            if row["name"] == "MetricsReporter.report":
                row["start_time_ms"] = taken * 1000.0 - 2000.0
    diag = reanalyse(capture_variant(tmp_path, SQLITE, tasks=tasks))
    # THEN no edge to the holder and no hang: the busy timeout may raise first
    assert diag.verdict == "inconclusive"
    reporter = next(n for n in diag.graph.nodes.values() if n.name == "MetricsReporter")
    assert not diag.graph.out(reporter.key)
    assert any("may give up by itself" in e for e in reporter.evidence)


def test_a_sleep_written_in_python_is_no_lock_retry(tmp_path: Path) -> None:
    # GIVEN the reporter's line a time.sleep (a pause of its own) with the same kernel sleep and locks
    def stacks(doc: Doc) -> None:
        for proc in doc["processes"]:
            if proc.get("actor_class") == "MetricsReporter":
                main = next(t for t in proc["threads"] if t.get("name") == "MainThread")
                main["frames"][0]["code"] = "time.sleep(self.period_s)"
    diag = reanalyse(capture_variant(tmp_path, SQLITE, stacks=stacks))
    assert pattern_of(diag, "MetricsReporter") != "file-lock-poll"
    assert all(c.pattern != "db-transaction-held" for c in diag.causes)


# ---------------------------------------------------------------- a child's FIFO open its waiting parent would answer

def test_a_child_opening_a_fifo_whose_parent_waits_for_its_exit_names_the_parent() -> None:
    # GIVEN Exporter in proc.wait() for its child, the child blocked in open() of rows.fifo for writing
    # (kernel: wait_for_partner), nobody holding the FIFO open, the actor's next line opening the read end
    diag = reanalyse(CHILD_FIFO)
    # THEN the parent's wait before its open is the culprit (a cycle parent -> child's exit -> the
    # FIFO's reader -> parent), not the child, which is its victim
    assert diag.verdict == "hang"
    assert diag.causes[0].pattern == "fifo-never-opened"
    assert culprits(diag) == ["Exporter"]
    exporter = next(n for n in diag.graph.nodes.values() if n.name == "Exporter")
    assert exporter.user_frame is not None and exporter.user_frame.line == 42
    child = next(n for n in diag.graph.nodes.values() if n.kind == "process")
    assert child.pattern == "fifo-open-wait"
    assert any(e.why == "fifo-never-opened" and e.dst == exporter.key for e in diag.graph.out(child.key))


def test_without_the_fifo_reading_the_child_is_one_that_never_exits(tmp_path: Path) -> None:
    # GIVEN the same capture without the probe's FIFO reading of the child
    def stacks(doc: Doc) -> None:
        for info in doc["meta"]["info"]:
            info.pop("fifo_opens", None)
    diag = reanalyse(capture_variant(tmp_path, CHILD_FIFO, stacks=stacks))
    # THEN only the child-process edge is left: the child is the chain's end
    assert diag.causes[0].pattern == "child-process-hang"
    assert diag.causes[0].culprits[0].kind == "process"


# ---------------------------------------------------------------- the node-side readings, on real processes

def test_the_probe_reads_a_blocked_fifo_open_and_a_lock_retried_in_sqlite(tmp_path: Path) -> None:
    # GIVEN a process blocked opening a FIFO for reading (relative path), and an SQLite writer in its
    # busy handler behind another process's open write transaction
    fifo = tmp_path / "run-7" / "features.fifo"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    db = tmp_path / "trials.db"
    hold = ("import sqlite3, sys, time\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('CREATE TABLE t (a)'); c.execute('BEGIN IMMEDIATE'); c.execute('INSERT INTO t VALUES (1)')\n"
            "print('held', flush=True); time.sleep(60)\n")
    wait = "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], timeout=60)\nc.execute('INSERT INTO t VALUES (2)')\n"
    opener = subprocess.Popen([sys.executable, "-c", "open('run-7/features.fifo').read()"], cwd=tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", hold, str(db)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    writer = subprocess.Popen([sys.executable, "-c", wait, str(db)])
    try:
        time.sleep(1.0)
        # WHEN the node-side readers look
        opens = fifo_opens({opener.pid: [(opener.pid, "wait_for_partner")]}, os.uname().machine)[opener.pid]
        polls = locks_held_by_others(writer.pid, read_locks()[0])
    finally:
        for proc in (opener, holder, writer):
            proc.kill()
            proc.wait()
    # THEN the open's path (resolved against its cwd) and end, nobody at the other end; the lock's holder
    assert opens[0]["path"] == str(fifo) and opens[0]["access"] == "read"
    assert opens[0]["holders"] == [] and opens[0]["scanned"] > 0
    assert [p["path"] for p in polls] == [str(db)]
    assert [h["pid"] for h in polls[0]["holders"]] == [holder.pid]
    assert {"type": "POSIX", "access": "WRITE", "range": "1073741825 1073741825"} in polls[0]["holders"][0]["locks"]
