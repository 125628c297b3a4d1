"""An async actor's call awaiting `asyncio.Queue.join()` whose consumer skips task_done().

Recorded (tests/data/captures/README.md):
- `asyncio_queue_join_skipped_task_done`: IndexWriter.flush RUNNING with no frame (a coroutine
  suspended in `await self.q.join()`), its loop idle in select; `_consume` `continue`s past
  `self.q.task_done()` on empty documents. The live run printed `selectors.py:468` as the culprit
  line. Recorded before the probe read joins: its `awaiting` is empty; a variant carries the facts
  the probe reads from the job's source (`awaited_in` on redteam/asyncio_queue_join_skipped_task_done.py).
- `healthy_asyncio_queue_join_slow_worker`: its healthy twin, task_done in a `finally`.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.analyse.fixes import chosen
from debug_hang.pipeline import reanalyse
from debug_hang.probe.setters import awaited_in

CAPTURES = ROOT / "tests" / "data" / "captures"
SKIPPED = CAPTURES / "asyncio_queue_join_skipped_task_done"
HEALTHY = CAPTURES / "healthy_asyncio_queue_join_slow_worker"
JOB = ROOT / "redteam" / "asyncio_queue_join_skipped_task_done.py"
HEALTHY_JOB = ROOT / "redteam" / "healthy_asyncio_queue_join_slow_worker.py"
Doc = dict[str, Any]
pytestmark = pytest.mark.unit


def _node(diag: Any, cls: str) -> Any:
    return next(n for n in diag.graph.nodes.values() if n.class_name == cls)


def _with_awaiting(cls: str, facts: dict[str, object]) -> Any:
    """stacks.json with the `awaiting` facts the probe reads for the actor's running call, its
    file the path the actor ran it from (the recorded driver frame's working dir)."""
    def apply(doc: Doc) -> None:
        path = next(f["file"] for p in doc["processes"] for t in p["threads"] for f in t["frames"]
                    if f["file"].endswith(Path(str(facts["file"])).name))
        for proc in doc["processes"]:
            if proc.get("actor_class") == cls:
                proc["awaiting"] = {**facts, "file": path}
    return apply


def test_the_culprit_line_of_an_idle_async_actor_is_never_the_loops_selector() -> None:
    # GIVEN the recorded run: IndexWriter's only Python stack is its loop's EpollSelector.select
    diag = reanalyse(SKIPPED)
    # THEN still a hang of IndexWriter, but no line of selectors.py is printed as the culprit's
    assert diag.verdict == "hang"
    assert [(c.pattern, [n.class_name for n in c.culprits]) for c in diag.causes] == [("async-await-stuck", ["IndexWriter"])]
    proof = diag.proofs[0]
    assert all("selectors.py" not in c.file for c in proof.code)
    assert proof.deciding is None or "selectors.py" not in proof.deciding.file
    assert "selectors.py" not in proof.mechanism
    assert any("line not visible" in e for e in _node(diag, "IndexWriter").evidence)


def test_the_probe_reads_a_join_and_the_task_done_a_continue_skips() -> None:
    # GIVEN the job's source: flush awaits self.q.join(); _consume's task_done follows `if ...: continue`
    found = awaited_in(str(JOB), "IndexWriter", "flush")
    assert found is not None
    assert found["line"] == 43
    assert found["joins"] == ["self.q:43 await self.q.join()"]
    assert found["task_done"] == ["IndexWriter._consume:35 self.q.task_done() skipped by continue:32"]
    # the healthy twin's task_done is in a finally
    healthy = awaited_in(str(HEALTHY_JOB), "Reranker", "rerank")
    assert healthy is not None and healthy["task_done"] == ["Reranker._consume:48 self.q.task_done() in finally"]


def test_a_task_done_every_path_reaches_is_not_flagged(tmp_path: Path) -> None:
    src = tmp_path / "w.py"
    src.write_text(textwrap.dedent("""\
        import asyncio
        class W:
            async def marked_first(self):
                while True:
                    x = await self.q.get()
                    if not x:
                        self.q.task_done()
                        continue
                    self.q.task_done()
            async def except_continue(self):
                while True:
                    x = await self.q.get()
                    try:
                        work(x)
                    except ValueError:
                        continue
                    self.q.task_done()
            async def flush(self):
                await self.q.join()
        """))
    found = awaited_in(str(src), "W", "flush")
    assert found is not None
    assert found["task_done"] == ["W.marked_first:7 self.q.task_done()", "W.marked_first:9 self.q.task_done()",
                                  "W.except_continue:17 self.q.task_done() skipped by continue:16"]


def test_a_join_whose_task_done_a_continue_skips_names_that_continue_and_the_finally_fix(tmp_path: Path) -> None:
    # GIVEN the same readings with the facts a live run reads from the job's source
    facts = awaited_in(str(JOB), "IndexWriter", "flush")
    assert facts is not None
    diag = reanalyse(capture_variant(tmp_path, SKIPPED, stacks=_with_awaiting("IndexWriter", facts)))
    # THEN a hang of IndexWriter at the `continue` of _consume that skips task_done, fixed by a finally
    assert diag.verdict == "hang"
    cause = diag.causes[0]
    assert (cause.pattern, [n.class_name for n in cause.culprits]) == ("async-await-stuck", ["IndexWriter"])
    node = _node(diag, "IndexWriter")
    assert node.user_frame is not None
    assert (node.user_frame.function, node.user_frame.line) == ("IndexWriter._consume", 32)
    text = " ".join(node.evidence)
    assert "`await self.q.join()`" in text and "skipped on the `continue` at line 32" in text
    proof = diag.proofs[0]
    assert proof.deciding is not None and proof.deciding.line == 32 and proof.deciding.role == "culprit"
    assert proof.fix == chosen("asyncio_task_done_skipped") and "finally" in proof.fix


def test_a_join_whose_task_done_is_in_a_finally_is_no_skip_cause(tmp_path: Path) -> None:
    # GIVEN the same readings, the class's task_done in a finally (the healthy twin's shape)
    fixed = tmp_path / JOB.name
    fixed.write_text(JOB.read_text().replace(
        "            if not doc[\"text\"]:\n                continue\n"
        "            for tok in doc[\"text\"].split():\n"
        "                self.index.setdefault(tok, []).append(doc[\"id\"])\n"
        "            self.q.task_done()\n",
        "            try:\n                if not doc[\"text\"]:\n                    continue\n"
        "            finally:\n                self.q.task_done()\n"))
    facts = awaited_in(str(fixed), "IndexWriter", "flush")
    assert facts is not None and facts["task_done"] == ["IndexWriter._consume:35 self.q.task_done() in finally"]
    diag = reanalyse(capture_variant(tmp_path, SKIPPED, stacks=_with_awaiting("IndexWriter", facts)))
    # THEN no skipped task_done is claimed; the line is the running method's await, not the selector
    node = _node(diag, "IndexWriter")
    assert "skipped on the" not in " ".join(node.evidence)
    assert node.user_frame is not None
    assert (node.user_frame.function, node.user_frame.line, node.user_frame.code) == (
        "IndexWriter.flush", 43, "await self.q.join()")
    assert "finally" not in (diag.proofs[0].fix or "")


def test_the_healthy_twin_stays_not_hung_with_its_join_facts(tmp_path: Path) -> None:
    # GIVEN the healthy twin, recorded and with the facts the probe reads from its source
    facts = awaited_in(str(HEALTHY_JOB), "Reranker", "rerank")
    assert facts is not None
    for folder in (HEALTHY, capture_variant(tmp_path, HEALTHY, stacks=_with_awaiting("Reranker", facts))):
        diag = reanalyse(folder)
        # THEN never a hang
        assert diag.verdict != "hang"
