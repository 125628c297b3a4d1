"""Name the party that is missing or dead from what the processes hold (issue 25), on real captures
recorded live (tests/data/captures/README.md), each with the variants where the answer must change.

Ranks in init_process_group state the world size they wait for (their torch frames' locals): when
fewer ranks exist, none can still start and none is elsewhere, the launch that created them is the
culprit (rank-never-launched); ranks still starting are no hang.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
RENDEZVOUS = CAPTURES / "rendezvous_for_a_rank_never_started"

Doc = dict[str, Any]




def _driver_pid(case: Path) -> int:
    doc = json.loads((case / "stacks.json").read_text())
    return next(int(p["pid"]) for p in doc["processes"] if p["role"] == "driver")


def world_size(size: int) -> Callable[[Doc], None]:
    """Every torch.distributed frame of every sample states `world_size` = size."""
    def edit(doc: Doc) -> None:
        for proc in doc["processes"]:
            for thread in proc["threads"]:
                for frame in thread["frames"]:
                    facts = frame.get("facts") or {}
                    if "torch/distributed/" in frame["file"] and "world_size" in facts:
                        facts["world_size"] = size
    return edit


def pending_actor(class_name: str) -> Callable[[Doc], None]:
    """One more actor of the job, not yet created (waiting for resources)."""
    def edit(doc: Doc) -> None:
        first = doc["actors"][0]
        doc["actors"].append(dict(first, actor_id="c" * 24 + str(first["job_id"]), class_name=class_name,
                                  state="PENDING_CREATION", pid=0, node_id=None,
                                  required_resources={"CPU": 0.5}))
    return edit


def test_ranks_waiting_for_a_world_larger_than_the_ranks_started_name_the_launch() -> None:
    # GIVEN two ranks in init_process_group(world_size=3), started by the driver, which waits on them
    diag = reanalyse(RENDEZVOUS)
    # THEN the launch is the culprit (the driver started 2 of 3 ranks), the ranks are victims
    top = diag.causes[0]
    assert diag.verdict == "hang" and top.pattern == "rank-never-launched"
    assert [(c.kind, c.pid) for c in top.culprits] == [("driver", _driver_pid(RENDEZVOUS))]
    said = " ".join(e.evidence for e in diag.graph.edges if e.why == "rank-never-launched")
    assert "world_size 3, ranks 0 and 1 exist, rank 2 was never started" in said
    assert sorted(-1 if n.rank is None else n.rank for n in diag.graph.nodes.values() if n.pattern == "rendezvous-wait") == [0, 1]


def test_without_the_rule_the_same_capture_stays_inconclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the rule disabled (what the tool said before it): the test above depends on it
    from debug_hang.analyse.graph import collectives
    monkeypatch.setattr(collectives, "mark_never_launched", lambda b, waiting: False)
    diag = reanalyse(RENDEZVOUS)
    assert diag.verdict == "inconclusive" and diag.causes[0].pattern == "rendezvous-wait"


def test_a_world_size_equal_to_the_ranks_present_is_not_a_rank_never_launched(tmp_path: Path) -> None:
    # GIVEN the same ranks stating world_size 2: every member exists (slow, or waiting elsewhere)
    diag = reanalyse(capture_variant(tmp_path, RENDEZVOUS, stacks=world_size(2)))
    # THEN nothing is named missing, and no hang is claimed from the rendezvous alone
    assert all(c.pattern != "rank-never-launched" for c in diag.causes)
    assert diag.verdict != "hang"


@pytest.mark.parametrize("cls", ["EvalRank", "Preprocessor"])
def test_a_pending_actor_that_may_become_the_missing_rank_is_no_launch_failure(tmp_path: Path, cls: str) -> None:
    # GIVEN the same capture with one more actor of the job still waiting to be created (a rank of
    # the same class, or another actor that could start rank 2 once it runs)
    diag = reanalyse(capture_variant(tmp_path, RENDEZVOUS, snapshot=pending_actor(cls)))
    # THEN the launch is not blamed: the ranks may still be starting
    assert all(c.pattern != "rank-never-launched" for c in diag.causes)
    assert not any(e.why == "rank-never-launched" for e in diag.graph.edges)


def test_a_pending_actor_of_another_class_is_said_on_the_ranks(tmp_path: Path) -> None:
    diag = reanalyse(capture_variant(tmp_path, RENDEZVOUS, snapshot=pending_actor("Preprocessor")))
    ranks = [n for n in diag.graph.nodes.values() if n.pattern == "rendezvous-wait"]
    assert ranks and all(any("rank(s) 2 may still be starting (actor Preprocessor PENDING_CREATION" in e
                             for e in n.evidence) for n in ranks)
    assert diag.verdict != "hang"


def test_the_reading_needs_the_torch_frames_facts(tmp_path: Path) -> None:
    # GIVEN a dump without locals' facts (a pasted plain dump): no world size is read, no claim made
    def no_facts(doc: Doc) -> None:
        for proc in doc["processes"]:
            for thread in proc["threads"]:
                for frame in thread["frames"]:
                    frame["facts"] = None
    diag = reanalyse(capture_variant(tmp_path, RENDEZVOUS, stacks=no_facts))
    assert all(c.pattern != "rank-never-launched" for c in diag.causes) and diag.verdict != "hang"


# A multiprocessing.Queue reader SIGKILLed inside get(): the live readers wait at the queue's reader
# lock (a SemLock) and the parent joins them. Recorded before the probe read the parent's pipes
# (KILLED_READER: no reading, nothing named) and after (HOLDER_ENDED: the ended child named).
KILLED_READER = CAPTURES / "mp_queue_lock_of_a_killed_reader"
HOLDER_ENDED = CAPTURES / "mp_queue_lock_holder_ended"


def _parent_info(doc: Doc) -> dict[str, Any]:
    children = {i.get("child_of") for i in doc["meta"]["info"]} - {None}
    return next(i for i in doc["meta"]["info"] if i["pid"] in children)


def no_widowed_pipes(doc: Doc) -> None:
    _parent_info(doc).pop("widowed_pipes", None)


def only_live_process_objects(doc: Doc) -> None:
    """The parent's frames hold only the Process objects its live children run."""
    live: set[str] = set()
    for proc in doc["processes"]:
        if proc["role"] == "child":
            for frame in proc["threads"][0]["frames"]:
                if frame["file"].endswith("multiprocessing/process.py") and (frame.get("facts") or {}).get("self"):
                    live.add(frame["facts"]["self"])
    parent = _parent_info(doc)["pid"]
    for proc in doc["processes"]:
        for thread in proc["threads"] if proc["pid"] == parent else []:
            for frame in thread["frames"]:
                for name, value in list((frame.get("facts") or {}).items()):
                    if isinstance(value, str) and "Process@" in value:
                        kept = [v.strip() for v in value.strip("[]").split(",") if v.strip() in live]
                        if not kept:
                            del frame["facts"][name]
                        else:
                            frame["facts"][name] = ("[" + ", ".join(kept) + "]") if value.startswith("[") else kept[0]


def test_a_semlock_whose_holder_ended_names_the_ended_child() -> None:
    # GIVEN the live readers at the SemLock, and the parent holding a Process object no live child
    # runs and a pipe nobody writes to any more (the killed reader's sentinel)
    diag = reanalyse(HOLDER_ENDED)
    top = diag.causes[0]
    # THEN the ended child is the likely holder; the live readers are its victims
    assert top.pattern == "native-wait-holder-died" and diag.verdict == "hang"
    [culprit] = top.culprits
    assert culprit.state == "dead" and culprit.name.startswith("ended child of DecodePool (ForkProcess@")
    readers = [n.key for n in diag.graph.nodes.values() if n.pattern == "lock-wait"]
    assert len(readers) == 2 and set(readers) <= set(top.victims)
    assert any("a child it started has ended" in e for e in culprit.evidence)


def test_without_the_rule_the_ended_holder_is_not_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from debug_hang.analyse.graph import locks
    monkeypatch.setattr(locks, "mark_ended_semlock_holders", lambda b: None)
    diag = reanalyse(HOLDER_ENDED)
    assert diag.verdict == "inconclusive" and diag.causes[0].pattern == "lock-wait"


@pytest.mark.parametrize("edit", [no_widowed_pipes, only_live_process_objects], ids=lambda f: f.__name__)
def test_without_both_readings_no_holder_is_named(tmp_path: Path, edit: Callable[[Doc], None]) -> None:
    # GIVEN no pipe left without its writer, or no Process object beyond the live children's: nothing
    # shows that a child ended (a Process never started has no pipe; a pipe may be closed on purpose)
    diag = reanalyse(capture_variant(tmp_path, HOLDER_ENDED, stacks=edit))
    # THEN the waiters stay victims of an unseen holder: inconclusive, as before the reading
    assert diag.verdict == "inconclusive" and diag.causes[0].pattern == "lock-wait"
    assert not any(n.key.startswith("ended-child:") for n in diag.graph.nodes.values())


def test_the_recording_without_the_pipe_reading_stays_inconclusive() -> None:
    diag = reanalyse(KILLED_READER)
    assert diag.verdict == "inconclusive" and diag.causes[0].pattern == "lock-wait"


def test_a_child_reading_inside_the_lock_is_its_live_holder(tmp_path: Path) -> None:
    # GIVEN one child past the lock, in the queue's read (it holds the lock and lives)
    def one_child_reads(doc: Doc) -> None:
        reader = min(p["pid"] for p in doc["processes"] if p["role"] == "child")
        for proc in doc["processes"]:
            if proc["pid"] == reader:
                frames = proc["threads"][0]["frames"]
                frames[0].update(function="Connection._recv", file=frames[0]["file"].replace("synchronize.py", "connection.py"),
                                 line=395, code="chunk = read(handle, remaining)")
                frames[1].update(line=103, code="res = self._recv_bytes()")
    diag = reanalyse(capture_variant(tmp_path, HOLDER_ENDED, stacks=one_child_reads))
    assert not any(n.key.startswith("ended-child:") for n in diag.graph.nodes.values())
    assert all(c.pattern != "native-wait-holder-died" for c in diag.causes)


def _read_forever(q: Any) -> None:
    while True:
        q.get()


def test_the_probe_reads_the_sentinel_pipe_a_killed_child_leaves_without_a_writer() -> None:
    # GIVEN a parent with three forked multiprocessing children, one then SIGKILLed and joined
    import multiprocessing as mp
    import os
    import signal
    import time

    from debug_hang.probe.pipes import widowed_pipes

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_read_forever, args=(q,), daemon=True) for _ in range(3)]
    for p in procs:
        p.start()
    try:
        time.sleep(0.2)
        before = widowed_pipes(os.getpid())
        os.kill(procs[0].pid or 0, signal.SIGKILL)
        procs[0].join()
        after = widowed_pipes(os.getpid())
    finally:
        for p in procs[1:]:
            p.kill()
            p.join()
    # THEN only the killed child's sentinel pipe is left without a writer (the live children hold
    # theirs; a Process never started has none)
    assert before is not None and after is not None
    assert len(set(after) - set(before)) == 1


STILL_STARTING = CAPTURES / "rendezvous_rank_still_starting_healthy"


def test_a_rank_still_in_its_constructor_is_starting_not_never_launched() -> None:
    # GIVEN ranks 0 and 1 in init_process_group(world_size=3) and rank 2's actor in its constructor
    diag = reanalyse(STILL_STARTING)
    # THEN no launch is blamed and no hang claimed: the missing rank is on its way
    assert diag.verdict != "hang"
    assert all(c.pattern != "rank-never-launched" for c in diag.causes)


def test_the_same_job_without_its_starting_rank_blames_the_launch(tmp_path: Path) -> None:
    # GIVEN the same capture with the starting actor gone from every reading (never created)
    snap = json.loads((STILL_STARTING / "snapshot.json").read_text())
    late = next(a for a in snap["actors"] if a["state"] == "PENDING_CREATION")

    def drop_rows(doc: Doc) -> None:
        doc["actors"] = [a for a in doc["actors"] if a["actor_id"] != late["actor_id"]]
        doc["tasks"] = [t for t in doc["tasks"] if t.get("actor_id") != late["actor_id"]]

    def drop_process(doc: Doc) -> None:
        doc["processes"] = [p for p in doc["processes"] if p["pid"] != late["pid"]]
        doc["meta"]["info"] = [i for i in doc["meta"]["info"] if i["pid"] != late["pid"]]

    out = capture_variant(tmp_path, STILL_STARTING, stacks=drop_process, snapshot=drop_rows)
    after = json.loads((out / "tasks_after.json").read_text())
    (out / "tasks_after.json").write_text(json.dumps([t for t in after if t.get("actor_id") != late["actor_id"]]))
    diag = reanalyse(out)
    # THEN the two ranks wait for a rank nobody started: the driver's launch is the culprit
    assert diag.verdict == "hang" and diag.causes[0].pattern == "rank-never-launched"
    assert [c.kind for c in diag.causes[0].culprits] == ["driver"]
