#!/usr/bin/env python3
"""Generate references/cases/<example>.md from recorded real runs in tests/data/cases/<example>/.

A maintainer tool: each case page is built only from a capture the tool recorded on a real hang
(snapshot.json, stacks.json, report.md, diagnosis.json, written by
`DEBUG_HANG_RECORD=1 python -m pytest tests/test_examples.py -k EXAMPLE`) and from the example's
docstring; nothing in it is typed by hand except the closing lessons. Run with --check in CI to
find pages that no longer match their capture.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from debug_hang.analyse.patterns import catalog, match_thread  # noqa: E402
from debug_hang.errors import EXIT_OK, NotFoundError, run_main  # noqa: E402
from debug_hang.model import Process, Thread, stacks_from_dict  # noqa: E402

PROG = "make_reference_cases.py"
CAPTURES = ROOT / "tests" / "data" / "cases"
OUT = ROOT / "references" / "cases"
EXAMPLES = ROOT / "examples"
MAX_TASK_ROWS = 25
MAX_FRAMES = 12
MAX_PROCESSES = 6

# What each case teaches: the trap a responder falls into and the step that avoids it. The only
# hand-written part of a page (everything else is the recorded output of the tool).
LESSONS: dict[str, list[str]] = {
    "actor_call_cycle": [
        "Both actors are idle in `ray.get`: neither is busy, so no single stack looks guilty. The "
        "evidence is the queued call (`SUBMITTED_TO_WORKER`, no `worker_pid`) on the actor that is "
        "itself waiting: follow `parent_task_id` both ways and the cycle closes.",
        "Dumping the Learner to look for `get_stats` finds nothing: that call never started.",
    ],
    "hangs_after_warmup": [
        "Twenty healthy steps came first: `Trainer.train_step FINISHED x20` is history, not progress. "
        "What marks the hang is that the task summary and the log stopped moving at step 20, the "
        "first evaluation - what `debug-hang watch` notices and captures at that moment.",
        "The cycle needs the rare path (evaluation) to close: a short test run that never reaches "
        "step 20 never shows it.",
    ],
    "chain_three_actors": [
        "Four processes wait in `ray.get`; only the last link is not in `ray.get`. Walk the chain to "
        "the end before reading any code: the trainer, the buffer and the rollout worker are victims.",
        "The culprit looks healthy (idle, no error, no pending resource): the poll's condition is the bug.",
    ],
    "producer_never_produces": [
        "`ray status` shows idle CPUs and no demands: an actor-only hang. The stacks are the only evidence.",
        "A sleep-poll can be sampled between sleeps and look busy; the `time.sleep(` line decides it "
        "is a poll. Read the loop condition against the config defaults.",
    ],
    "gloo_skipped_allreduce": [
        "Three ranks sit in the same `all_reduce`: the culprit is the rank that is *not* there. Its "
        "task FINISHED, without an error, one collective early (gloo pairs collectives by call order).",
        "Restarting or blaming the network fixes nothing; the branch that skips a collective does.",
    ],
    "dead_rank": [
        "Ranks whose task FAILED with a gloo \"Connection reset by peer\" error are ring neighbours of the dead "
        "rank, not the cause. The DEAD actor is; `death_cause` only says the worker died - its own "
        "`.err` log says why (`ray logs actor --id ID --err`).",
    ],
    "infeasible_resource": [
        "No process is at fault: the driver waits in `ray.get` on an actor that was never placed "
        "(`PENDING_CREATION`, pid 0). `ray status` lists the request as an ordinary pending demand; "
        "compare it with the largest node.",
    ],
    "lock_order_deadlock": [
        "py-spy shows no `acquire` frame for `with lock:` - only the user line of the `with`. Two "
        "threads of one actor idle at `with` lines of two different locks is the whole evidence.",
        "Threads of a threaded actor are unnamed or `Dummy-N`: identify them by their frames.",
    ],
    "pending_placement_group": [
        "`pg.ready()` is not a task: no task state links the waiting controller to the group. "
        "`ray list placement-groups --detail` shows `PENDING` with `scheduling_state: INFEASIBLE`.",
    ],
    "starvation": [
        "Every CPU is reserved and feasible tasks stay `PENDING_NODE_ASSIGNMENT` with no event and "
        "no warning: the holders are actors blocked in `ray.get` (actors keep their CPUs while "
        "blocked; normal tasks release theirs). Adding nodes only moves the ceiling.",
    ],
    "blocked_async_actor": [
        "For an async actor RUNNING only means \"handed to the event loop\": both methods are "
        "RUNNING, but only the one blocking the loop is on a stack. A synchronous `time.sleep` or "
        "`ray.get` inside `async def` stops every other coroutine of the actor.",
    ],
    "actor_self_call": [
        "A cycle of one: the actor waits in `ray.get` on a call queued on itself (`SUBMITTED_TO_WORKER`, "
        "no `worker_pid`, same `actor_id` as the waiting task). The handle looked like another actor's.",
    ],
    "child_process_hang": [
        "The actor waits in `Popen.wait`; the reason is in the child's stack (idle reading stdin), "
        "so dump the children too - the tool does, `py-spy dump --subprocesses` may not.",
    ],
    "queue_producer_gone": [
        "The producer's actor is ALIVE and idle, so it looks healthy: its `produce` task is FAILED "
        "and the error sits in an ObjectRef nobody fetched. Check the job's FAILED tasks before "
        "reading the consumer's code.",
    ],
    "healthy_slow": [
        "Every process is idle in `ray.get` or `time.sleep` in any single dump, and one of them even "
        "matches a poll pattern - yet the job is healthy: tasks keep reaching FINISHED between two "
        "listings. Check progress before calling a hang; the tool does (verdict `no-hang`).",
    ],
    "busy_loop": [
        "The only pattern where the culprit burns CPU: `(active+gil)` at the same job line in every "
        "sample. Check two samples before calling a loop a spin.",
    ],
}


def example_doc(example: str) -> tuple[str, str, dict[str, Any]]:
    """(first line, the Scenario+Mechanism text, EXPECTED) of examples/<example>.py."""
    tree = ast.parse((EXAMPLES / f"{example}.py").read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    expected: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPECTED" for t in node.targets):
            expected = ast.literal_eval(node.value)
    first, _, rest = doc.partition("\n")
    body = rest.split("Expected diagnosis")[0].strip()
    return first.strip(), body, expected


def _scenario_lines(body: str) -> Iterator[str]:
    """The docstring's sections (a heading line, then an indented paragraph) as Markdown."""
    for block in re.split(r"\n(?=\S)", body):
        heading, _, para = block.partition("\n")
        text = " ".join(textwrap.dedent(para).split()).replace("\\ ", "").replace("``", "`")
        if text:
            yield f"**{heading.strip()}.** {text}"
            yield ""


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _short(value: object, n: int = 8) -> str:
    return str(value)[:n] if value else "—"


def _error_end(message: object, n: int = 140) -> str:
    """The end of a task's error message (Ray keeps the end; the exception line is last)."""
    if not message:
        return "—"
    text = " ".join(str(message).split())
    return text if len(text) <= n else "…" + text[-n:]


def _task_rows(tasks: list[dict[str, Any]], actors: dict[str, dict[str, Any]]) -> Iterator[str]:
    waiting = [t for t in tasks if t.get("state") != "FINISHED"]
    finished = len(tasks) - len(waiting)
    yield "| name | state | type | worker_pid | actor | node | error_type | error (end) |"
    yield "|---|---|---|---|---|---|---|---|"
    order = {"RUNNING": 0, "SUBMITTED_TO_WORKER": 1, "PENDING_NODE_ASSIGNMENT": 2, "FAILED": 3}
    waiting.sort(key=lambda t: (order.get(str(t.get("state")), 9), str(t.get("name"))))
    for t in waiting[:MAX_TASK_ROWS]:
        actor = actors.get(str(t.get("actor_id")), {}).get("class_name") if t.get("actor_id") else None
        yield (f"| {_cell(t.get('name'))} | {t.get('state')} | {t.get('type')} | {t.get('worker_pid') or '—'} | "
               f"{actor or '—'} | {_short(t.get('node_id'))} | {t.get('error_type') or '—'} | "
               f"{_cell(_error_end(t.get('error_message')))} |")
    if len(waiting) > MAX_TASK_ROWS:
        yield f"| … {len(waiting) - MAX_TASK_ROWS} more | | | | | | | |"
    yield ""
    yield f"{finished} other task(s) of the job were FINISHED."


def _actor_rows(actors: list[dict[str, Any]]) -> Iterator[str]:
    yield "| class | state | pid | node | required resources | death cause |"
    yield "|---|---|---|---|---|---|"
    for a in sorted(actors, key=lambda a: (str(a.get("class_name")), a.get("pid") or 0)):
        death = a.get("death_cause") or {}
        ctx = death.get("actor_died_error_context") or {}
        cause = f"{ctx.get('reason', '')}: {ctx.get('error_message', '')}"[:160] if ctx else (
            json.dumps(death)[:160] if death else "—")
        res = json.dumps(a.get("required_resources") or {}, sort_keys=True)
        yield (f"| {a.get('class_name')} | {a.get('state')} | {a.get('pid') or '—'} | {_short(a.get('node_id'))} | "
               f"`{res}` | {_cell(cause)} |")


def _pg_lines(groups: list[dict[str, Any]]) -> Iterator[str]:
    for g in groups:
        stats = g.get("stats") or {}
        yield (f"- `{g.get('name') or g.get('placement_group_id')}`: state **{g.get('state')}**, strategy "
               f"{g.get('strategy')}, scheduling_state **{stats.get('scheduling_state')}**, bundles "
               f"`{json.dumps([b.get('unit_resources') for b in g.get('bundles') or []], sort_keys=True)}`")


def _thread_lines(thread: Thread) -> Iterator[str]:
    match = match_thread(thread)
    state = "active" if thread.active else "idle"
    if thread.owns_gil:
        state += "+gil"
    yield f'Thread {thread.os_thread_id or thread.thread_id} ({state}): "{thread.name or ""}"   [{match.pattern}]'
    frames = [f for f in thread.frames if not f.native]
    for frame in frames[:MAX_FRAMES]:
        where = f"{frame.short_file}:{frame.line}" if frame.line else frame.short_file
        yield f"    {frame.function} ({where})"
    if len(frames) > MAX_FRAMES:
        yield f"    … {len(frames) - MAX_FRAMES} outer frames"


def _relevant(processes: list[Process], diag: dict[str, Any]) -> list[Process]:
    """Sample 0 of the processes on the chains and the culprits, chain order first."""
    wanted: list[int] = []
    for chain in diag.get("chains") or []:
        for node in chain:
            if node.get("pid") and node["pid"] not in wanted:
                wanted.append(node["pid"])
    for cause in diag.get("root_causes") or []:
        for c in cause.get("culprits") or []:
            if c.get("pid") and c["pid"] not in wanted:
                wanted.append(c["pid"])
    first: dict[int | None, Process] = {}
    for proc in sorted(processes, key=lambda p: p.sample):
        first.setdefault(proc.pid, proc)
    chosen = [first[pid] for pid in wanted if pid in first]
    if not chosen:
        chosen = list(first.values())
    return chosen[:MAX_PROCESSES]


def _stack_lines(processes: list[Process], diag: dict[str, Any]) -> Iterator[str]:
    cat = catalog()
    for proc in _relevant(processes, diag):
        tags = ", ".join(x for x in (proc.role, proc.actor_class,
                                     None if proc.rank is None else f"rank {proc.rank}") if x)
        yield f"Process {proc.pid}: {proc.title or ''}   ({tags})"
        shown = 0
        for thread in proc.threads:
            pattern = match_thread(thread).pattern
            if pattern != "unknown" and cat[pattern].kind == "benign" and pattern != "idle-worker":
                continue
            if pattern == "idle-worker" and len(proc.threads) > 1 and any(
                    match_thread(t).pattern not in ("idle-worker", "ray-housekeeping") for t in proc.threads):
                continue
            yield from _thread_lines(thread)
            shown += 1
        hidden = len(proc.threads) - shown
        if hidden:
            yield f"    ({hidden} Ray housekeeping thread(s) not shown)"
        yield ""


def _demote(report: str) -> Iterator[str]:
    in_code = False
    for line in report.rstrip("\n").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("#"):
            line = "##" + line
        yield line


def render_case(example: str, folder: Path) -> str:
    return "\n".join(_case_lines(example, folder)) + "\n"


def _case_lines(example: str, folder: Path) -> Iterator[str]:
    diag = json.loads((folder / "diagnosis.json").read_text(encoding="utf-8"))
    snap = json.loads((folder / "snapshot.json").read_text(encoding="utf-8"))
    doc = json.loads((folder / "stacks.json").read_text(encoding="utf-8"))
    report = (folder / "report.md").read_text(encoding="utf-8")
    first, body, expected = example_doc(example)
    job_id = diag.get("job_id")
    hang = diag.get("verdict") == "hang"
    top = (diag.get("root_causes") or [{}])[0] if hang else {}
    pattern = top.get("pattern", "none")
    cat = catalog()
    title = cat[pattern].title if pattern in cat else f"verdict {diag.get('verdict')}"
    culprits = ", ".join(
        f"{c.get('class_name') or c.get('name')}" + (f" rank {c['rank']}" if c.get("rank") is not None else "")
        + (f" (pid {c['pid']})" if c.get("pid") else "") for c in top.get("culprits") or [])
    yield f"# Case: {example} — {title}"
    yield ""
    yield (f"<!-- Generated by tools/make_reference_cases.py from the recorded run in "
           f"tests/data/cases/{example}/; do not edit. -->")
    yield ""
    if hang:
        yield f"**Root-cause pattern**: `{pattern}`"
    else:
        yield f"**Root-cause pattern**: none — the verdict is `{diag.get('verdict')}`: {diag.get('summary')}"
    yield ""
    yield f"**Culprit**: {culprits or '—'}"
    yield ""
    confidence = f", confidence {top.get('confidence', 0):.2f}" if hang else ""
    yield (f"**Verdict**: {diag.get('verdict')}{confidence}; "
           f"{diag['collection']['processes']} processes on {diag['collection']['nodes']} node(s) dumped in "
           f"{doc.get('meta', {}).get('seconds', 0):.1f}s, whole diagnosis {diag['collection']['seconds']:.1f}s")
    yield ""
    yield "## Scenario"
    yield ""
    yield f"{first} (`examples/{example}.py`)"
    yield ""
    yield from _scenario_lines(body)
    if expected.get("notes"):
        planted = f"`{expected['pattern']}`" if expected.get("pattern") else f"none (`{expected.get('verdict')}`)"
        yield f"**Planted root cause** (the example's `EXPECTED`): {planted} — {expected['notes']}"
        yield ""
    yield "## How it was captured"
    yield ""
    yield (f"A real run on a 4-CPU Ray 2.60 cluster on loopback: the example was submitted as a job "
           f"(job `{job_id}`), and once it hung the one-command diagnosis ran against it:")
    yield ""
    yield "```bash"
    yield f"bash scripts/diagnose_ray_hang.sh {diag.get('address')} OUT --job-id {job_id}"
    yield "```"
    yield ""
    yield (f"Recorded with `DEBUG_HANG_RECORD=1 python -m pytest tests/test_examples.py -k {example}`; "
           f"the raw capture is in `tests/data/cases/{example}/` of the repository. Below: the phase "
           "outputs, trimmed, then the report exactly as the tool wrote it.")
    yield ""
    yield "## Phase 1: cluster (`ray status`)"
    yield ""
    yield "```"
    text = (snap.get("cluster_status_text") or "(unavailable)").strip().splitlines()
    yield from (line for line in text[1:] if line.strip() and not set(line.strip()) <= {"-"})
    yield "```"
    events = [e for e in snap.get("events") or [] if e.get("message")]
    if events:
        yield ""
        yield "Cluster events:"
        for e in events[:5]:
            yield f"- {e.get('source_type')} {e.get('severity')}: {_cell(e.get('message'))[:200]}"
    yield ""
    job_tasks = [t for t in snap.get("tasks") or [] if t.get("job_id") == job_id]
    job_actors = [a for a in snap.get("actors") or [] if a.get("job_id") == job_id]
    by_id = {str(a.get("actor_id")): a for a in job_actors}
    yield "## Phase 2: the job's unfinished tasks (`ray list tasks --filter job_id=...`)"
    yield ""
    yield from _task_rows(job_tasks, by_id)
    yield ""
    yield "## Phase 4: the job's actors (`ray list actors --filter job_id=... --detail`)"
    yield ""
    yield from _actor_rows(job_actors)
    groups = [g for g in snap.get("placement_groups") or [] if g.get("creator_job_id") in (job_id, None)]
    if groups:
        yield ""
        yield "Placement groups (`ray list placement-groups --detail`):"
        yield from _pg_lines(groups)
    yield ""
    yield "## Phase 3: the relevant stacks (py-spy, first sample, innermost frame first)"
    yield ""
    yield "The processes on the blocking chain and the culprits; `[pattern]` is the thread's classification."
    yield ""
    yield "```"
    yield from _stack_lines(stacks_from_dict(doc), diag)
    yield "```"
    yield ""
    yield "## Final report (`report.md`, as written by the tool)"
    yield ""
    yield from _demote(report)
    yield ""
    lessons = LESSONS.get(example)
    if lessons:
        yield "## What to take from it"
        yield ""
        for lesson in lessons:
            yield f"- {lesson}"
        yield ""


def recorded_examples(captures: Path = CAPTURES) -> list[str]:
    """Examples with a complete recorded capture."""
    need = ("snapshot.json", "stacks.json", "report.md", "diagnosis.json")
    return sorted(p.name for p in captures.iterdir()
                  if p.is_dir() and all((p / n).exists() for n in need) and (EXAMPLES / f"{p.name}.py").exists()) \
        if captures.is_dir() else []


def render_index(examples: list[str], captures: Path = CAPTURES) -> str:
    lines = ["# Reference cases", "",
             "<!-- Generated by tools/make_reference_cases.py; do not edit. -->", "",
             "Real runs of this tool on real hangs from `examples/`, one page each: the scenario, the key "
             "phase outputs (trimmed), the final report. Open the page whose pattern the diagnosis names, to "
             "see what the same hang looked like end to end.", "",
             "| case | root-cause pattern | culprit | what misleads |", "|---|---|---|---|"]
    cat = catalog()
    for ex in examples:
        diag = json.loads((captures / ex / "diagnosis.json").read_text(encoding="utf-8"))
        top = (diag.get("root_causes") or [{}])[0] if diag.get("verdict") == "hang" else {}
        culprit = ", ".join(sorted({str(c.get("class_name") or c.get("name")) + (
            f" rank {c['rank']}" if c.get("rank") is not None else "") for c in top.get("culprits") or []}))
        pattern = top.get("pattern", f"none: {diag.get('verdict')}")
        trap = (LESSONS.get(ex) or [""])[0].split(". ")[0].rstrip(".") + "."
        kind = f" ({cat[pattern].kind})" if pattern in cat else ""
        lines.append(f"| [{ex}]({ex}.md) | `{pattern}`{kind} | "
                     f"{_cell(culprit) or '—'} | {_cell(trap)} |")
    return "\n".join(lines) + "\n"


def outputs(examples: list[str], captures: Path = CAPTURES) -> dict[Path, str]:
    files = {OUT / f"{ex}.md": render_case(ex, captures / ex) for ex in examples}
    files[OUT / "README.md"] = render_index(examples, captures)
    return files


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Generate references/cases/<example>.md (and the index README.md) from the recorded real "
                    "captures in tests/data/cases/<example>/. A maintainer tool: it needs the repository's "
                    "tests/data, not a cluster.",
        epilog="examples:\n  tools/make_reference_cases.py                 # every recorded example\n"
               "  tools/make_reference_cases.py --check         # exit 1 when a page is stale\n\n"
               "record a capture first (one example at a time, ~30 s, starts a loopback cluster):\n"
               "  DEBUG_HANG_RECORD=1 DEBUG_HANG_TEST_PORT=6403 python -m pytest tests/test_examples.py -k EXAMPLE\n\n"
               "exit codes:\n  0  success\n  1  --check: some page differs from its capture\n"
               "  5  no recorded capture found",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--captures", type=Path, default=CAPTURES, help="recorded captures (default tests/data/cases)")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 when stale")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    examples = recorded_examples(args.captures)
    if not examples:
        raise NotFoundError(f"no recorded capture under {args.captures}: record one first (see --help)")
    files = outputs(examples, args.captures)
    if args.check:
        stale = [p for p, text in files.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
        extra = [p for p in OUT.glob("*.md") if p not in files]
        for p in stale + extra:
            print(f"stale: {p.relative_to(ROOT)}", file=sys.stderr)
        return 1 if stale or extra else EXIT_OK
    OUT.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    for path in OUT.glob("*.md"):
        if path not in files:
            path.unlink()
    print(f"wrote {len(files)} file(s) into {os.path.relpath(OUT, ROOT)}: {', '.join(examples)}")
    return EXIT_OK


if __name__ == "__main__":
    run_main(main, PROG)
