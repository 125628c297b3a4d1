#!/usr/bin/env python3
"""Generate references/cases/<example>.md from recorded real runs in tests/data/cases/<example>/.

A maintainer tool. Each page is few-shot evidence for an agent, at most ~3 KB: the scenario in two
lines (the example's first docstring line and its EXPECTED notes), the one decisive stack or state
row (from the recorded stacks.json / snapshot.json), the chain and the verdict (from the recorded
diagnosis.json), and what misleads (the example docstring's "What misleads" section). Nothing is
typed by hand here. Each page also carries a `case:` line with its mechanism (pattern, chain), which
`debug_hang.analyse.next_steps` reads to point a live diagnosis at the closest recorded case.

The captures are recorded with
    DEBUG_HANG_RECORD=1 python -m pytest tests/test_examples.py -k EXAMPLE
into tests/data/cases/EXAMPLE/ (snapshot.json, stacks.json, report.md, diagnosis.json); they stay in
the repository, not in the skill bundle. Run with --check in CI to find pages that drift.
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

from debug_hang.analyse.next_steps import waits_of  # noqa: E402
from debug_hang.analyse.patterns import Reading, catalog, match_thread  # noqa: E402
from debug_hang.analyse.progress import rules  # noqa: E402
from debug_hang.errors import EXIT_OK, NotFoundError, run_main  # noqa: E402
from debug_hang.model import Process, Thread, stacks_from_dict  # noqa: E402
from debug_hang.untrusted import strip_controls  # noqa: E402

PROG = "make_reference_cases.py"
CAPTURES = ROOT / "tests" / "data" / "cases"
OUT = ROOT / "references" / "cases"
EXAMPLES = ROOT / "examples"
MAX_FRAMES = 8
MAX_PAGE_BYTES = 3200
QUEUED = ("SUBMITTED_TO_WORKER", "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY")
_LIBRARY = re.compile(r"/(site|dist)-packages/|/lib/python3\.\d+/")


def example_doc(example: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """(first line, {section: text}, EXPECTED) of examples/<example>.py."""
    tree = ast.parse((EXAMPLES / f"{example}.py").read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    expected: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPECTED" for t in node.targets):
            expected = ast.literal_eval(node.value)
    first, _, rest = doc.partition("\n")
    sections: dict[str, str] = {}
    for block in re.split(r"\n(?=\S)", rest.strip()):
        heading, _, para = block.partition("\n")
        text = " ".join(textwrap.dedent(para).split()).replace("\\ ", "").replace("``", "`")
        if heading.strip() and text:
            sections[heading.strip()] = text
    return first.strip(), sections, expected


def misleads(example: str) -> str:
    """The example's "What misleads" section ('' when it has none)."""
    return example_doc(example)[1].get("What misleads", "")


def _cell(value: object) -> str:
    """A recorded name or message as one table cell: one line, no column break."""
    return strip_controls(str(value), newlines=False).replace("|", "\\|")


def _tail(message: object, n: int = 120) -> str:
    text = " ".join(str(message or "").split())
    return text if len(text) <= n else "…" + text[-n:]


def _death(actor: dict[str, Any]) -> str:
    death = actor.get("death_cause") or {}
    for ctx in death.values() if isinstance(death, dict) else []:
        if isinstance(ctx, dict):
            head = " ".join(str(ctx.get("error_message") or "").split())[:100]
            return f"{ctx.get('reason', '')}: {head}".strip(": ")
    return "—"


def _frames_shown(thread: Thread) -> list[str]:
    """The innermost frame, then the job's own frames (library frames between them folded)."""
    frames = [f for f in thread.frames if not f.native]
    keep = [f for i, f in enumerate(frames) if i == 0 or not _LIBRARY.search(f.file or "")]
    lines = []
    for frame in keep[:MAX_FRAMES]:
        where = f"{frame.short_file}:{frame.line}" if frame.line else frame.short_file
        code = f"   `{frame.code.strip()[:70]}`" if frame.code and not _LIBRARY.search(frame.file or "") else ""
        lines.append(f"    {frame.function} ({where}){code}")
    return lines


def _deciding_threads(proc: Process) -> list[tuple[Thread, Reading]]:
    """The threads that decide a process's verdict: non-benign ones in job code first, at most 3."""
    cat = catalog()
    scored = []
    for i, thread in enumerate(proc.threads):
        pattern = match_thread(thread).pattern
        benign = pattern != "unknown" and cat[pattern].kind == "benign"
        in_job = any(not _LIBRARY.search(f.file or "") for f in thread.frames if not f.native)
        scored.append(((0 if benign else 2) + (1 if in_job else 0), i, thread, pattern))
    best = max((s for s, *_ in scored), default=0)
    return [(thread, pattern) for s, _, thread, pattern in sorted(scored, key=lambda x: (-x[0], x[1]))
            if s == best and s >= 2][:3] or [(thread, pattern) for s, _, thread, pattern in scored if s == best][:1]


def _with_deciding(proc: Process, picked: list[tuple[Thread, Reading]], top: dict[str, Any]) -> list[tuple[Thread, Reading]]:
    """`picked`, with the thread at the root cause's deciding line first when it was not among them
    (a consumer blocked among producers at the same wait: the culprit's thread, not a victim's)."""
    deciding = (top.get("proof") or {}).get("deciding") or {}
    where = (deciding.get("function"), deciding.get("line"))
    if not where[1] or any(any((f.function, f.line) == where for f in t.frames) for t, _p in picked):
        return picked
    found = next((t for t in proc.threads if any((f.function, f.line) == where for f in t.frames)), None)
    return [(found, match_thread(found).pattern), *picked[:2]] if found is not None else picked


def _decisive(diag: dict[str, Any], snap: dict[str, Any], processes: list[Process]) -> Iterator[str]:
    """The one stack or state row the verdict rests on, chosen by what the culprit is."""
    top = (diag.get("root_causes") or [{}])[0]
    culprits = top.get("culprits") or []
    chain = (diag.get("chains") or [[]])[0]
    end = chain[-1] if chain else {}
    actors = {a.get("actor_id"): a for a in snap.get("actors") or []}
    tasks = [t for t in snap.get("tasks") or [] if t.get("job_id") == diag.get("job_id")] + [
        t for t in snap.get("tasks") or [] if t.get("job_id") != diag.get("job_id")
        and any(t.get("actor_id") == c.get("actor_id") for c in culprits)]
    rows: list[str] = []
    for c in culprits:
        actor = actors.get(c.get("actor_id"))
        if c.get("kind") == "placement_group":
            for g in snap.get("placement_groups") or []:
                if (g.get("name") and g["name"] in str(c.get("name"))) or g.get("placement_group_id") == c.get("actor_id"):
                    stats = g.get("stats") or {}
                    rows.append(f"placement group `{g.get('name')}`: state {g.get('state')}, scheduling_state "
                                f"{stats.get('scheduling_state')}, bundles "
                                f"`{json.dumps([b.get('unit_resources') for b in g.get('bundles') or []], sort_keys=True)}`")
        elif actor is not None and actor.get("state") in ("DEAD", "PENDING_CREATION", "RESTARTING", "DEPENDENCIES_UNREADY"):
            rows.append(f"actor {actor.get('class_name')}: state {actor.get('state')}, pid {actor.get('pid') or 0}, "
                        f"required `{json.dumps(actor.get('required_resources') or {}, sort_keys=True)}`, "
                        f"death cause: {_death(actor)}")
        elif c.get("kind") == "resource":
            rows.append(f"request {c.get('name')}: {'; '.join(e for e in top.get('evidence') or [] if 'largest node' in e)[:200]}")
    groups = [g for g in (diag.get("flight_recorder") or {}).get("groups") or [] if g.get("culprits")]
    if groups:
        yield f"Flight Recorder (`references/flight-recorder.md`): {_cell(groups[0].get('summary'))[:300]}"
        yield ""
    if rows:
        yield "State rows (`ray list actors` / `ray list placement-groups --detail`):"
        yield ""
        yield from (f"- {_cell(r)}" for r in rows)
        return
    first = culprits[0] if culprits else {}
    if end.get("state") == "idle" and first.get("actor_id"):
        own = [t for t in tasks if t.get("actor_id") == first.get("actor_id")]
        done = [t for t in own if t.get("state") in ("FINISHED", "FAILED")
                and t.get("type") == "ACTOR_TASK" and not str(t.get("name")).endswith("poll_status")]
        if not [t for t in own if t.get("type") == "ACTOR_TASK"]:
            yield "State row (`ray list tasks`): the culprit is idle and was never called:"
            yield ""
            yield f"- {first.get('class_name')}: ALIVE; its only task: " + ", ".join(
                f"{_cell(t.get('name'))} ({t.get('type')}, {t.get('state')})" for t in own[:2])
            return
        if done:
            last = max(done, key=lambda t: t.get("end_time_ms") or 0)
            err = f", {last.get('error_type')}: {_tail(last.get('error_message'))}" if last.get("state") == "FAILED" else ""
            yield "State row (`ray list tasks`): the culprit is idle because its call already returned:"
            yield ""
            yield f"- {_cell(last.get('name'))}: **{last.get('state')}**{_cell(err)} (rank {first.get('rank')})" if first.get(
                "rank") is not None else f"- {_cell(last.get('name'))}: **{last.get('state')}**{_cell(err)}"
            return
    queued = [t for t in tasks if t.get("state") in QUEUED and not t.get("worker_pid")
              and any(t.get("actor_id") == c.get("actor_id") for c in culprits if c.get("actor_id"))]
    proc = next((p for p in sorted(processes, key=lambda p: p.sample) if p.pid and p.pid == first.get("pid")), None)
    picked = _with_deciding(proc, _deciding_threads(proc), top) if proc else []
    if proc is not None and picked:
        yield f"Stack (py-spy, first sample, innermost first; job frames and the innermost only): pid {proc.pid} `{proc.title or ''}`"
        yield ""
        yield "```"
        for thread, pattern in picked:
            state = ("active" if thread.active else "idle") + ("+gil" if thread.owns_gil else "")
            yield f'Thread {thread.os_thread_id or thread.thread_id} ({state}): "{thread.name or ""}"   [{pattern}]'
            yield from _frames_shown(thread)
        yield "```"
    yield from _unread_culprit(top, first, found=proc is not None or bool(queued))
    if queued:
        yield ""
        yield "Queued on it (`ray list tasks`): " + ", ".join(
            f"{_cell(t.get('name'))} {t.get('state')} (no worker_pid)" for t in queued[:3])


def _unread_culprit(top: dict[str, Any], first: dict[str, Any], found: bool) -> Iterator[str]:
    """A culprit whose stack was not read (not a process of the job), when nothing else was
    `found`: the evidence that named it."""
    if found or not first.get("pid"):
        return
    yield "Root-cause evidence (diagnosis.json):"
    yield ""
    yield from (f"- {_cell(str(e))[:400]}" for e in (top.get("evidence") or [])[-2:])


def _chain_lines(diag: dict[str, Any], processes: list[Process]) -> Iterator[str]:
    ranks = {(p.node_id, p.pid): p.rank for p in processes if p.rank is not None}
    for cause in diag.get("root_causes") or []:
        ranks.update({(c.get("node_id"), c.get("pid")): c["rank"] for c in cause.get("culprits") or []
                      if c.get("rank") is not None and c.get("pid")})
    chain = (diag.get("chains") or [[]])[0]
    for i, node in enumerate(chain):
        known = node.get("rank", ranks.get((node.get("node_id"), node.get("pid"))))
        rank = f"[rank {known}]" if known is not None else ""
        mark = "  ← root cause" if i == len(chain) - 1 else ""
        yield strip_controls(f"{node.get('name')}{rank} [{node.get('pattern') or node.get('state')}]{mark}", newlines=False)
        if node.get("waits_on") and i < len(chain) - 1:
            yield strip_controls(f"  ↓ {str(node['waits_on'])[:110]}", newlines=False)


def case_features(diag: dict[str, Any]) -> dict[str, Any]:
    """The mechanism of the recorded diagnosis, as `next_steps.closest_case` compares it."""
    hang = diag.get("verdict") == "hang"
    chain = (diag.get("chains") or [[]])[0] if hang else []
    end = chain[-1] if chain else {}
    top = (diag.get("root_causes") or [{}])[0].get("pattern")
    # A pattern never called a hang on the stacks alone (verdict_rules' inconclusive_when_silent)
    # is recorded by its inconclusive case.
    by_design = diag.get("verdict") == "inconclusive" and top in rules().inconclusive_when_silent
    return {"verdict": diag.get("verdict"),
            "pattern": top if hang or by_design else None,
            "chain": [n.get("pattern") or n.get("state") for n in chain],
            "waits": waits_of([n.get("waits_on") for n in chain]),
            "culprit_kind": end.get("kind"), "culprit_state": end.get("state")}


def render_case(example: str, folder: Path) -> str:
    return "\n".join(_case_lines(example, folder)) + "\n"


def _case_lines(example: str, folder: Path) -> Iterator[str]:
    diag = json.loads((folder / "diagnosis.json").read_text(encoding="utf-8"))
    snap = json.loads((folder / "snapshot.json").read_text(encoding="utf-8"))
    doc = json.loads((folder / "stacks.json").read_text(encoding="utf-8"))
    first, sections, expected = example_doc(example)
    processes = stacks_from_dict(doc)
    hang = diag.get("verdict") == "hang"
    top = (diag.get("root_causes") or [{}])[0] if hang else {}
    pattern = top.get("pattern")
    cat = catalog()
    title = cat[pattern].title if pattern in cat else f"verdict {diag.get('verdict')}"
    yield f"# Case: {example} — {title}"
    yield ""
    yield (f"<!-- Generated by tools/{PROG} from the recorded run of examples/{example}.py; do not edit. "
           f"case: {json.dumps(case_features(diag), sort_keys=True)} -->")
    yield ""
    yield f"**Scenario.** {first} {expected.get('notes') or ''}".rstrip()
    yield ""
    if hang:
        yield f"**Pattern**: [`{pattern}`](../patterns.md#{pattern}) · **Verdict**: {_cell(diag.get('summary'))} " \
              f"(confidence {top.get('confidence', 0):.2f})"
    else:
        yield f"**Pattern**: none · **Verdict**: `{diag.get('verdict')}` — {_cell(diag.get('summary'))}"
    if hang:
        yield ""
        yield "**Culprit**: " + ", ".join(sorted({
            f"{c.get('class_name') or c.get('name')}" + (f" rank {c['rank']}" if c.get("rank") is not None else "")
            + (f" (pid {c['pid']})" if c.get("pid") else "") for c in top.get("culprits") or []}))
    yield ""
    if hang:
        yield "## Decisive evidence"
        yield ""
        yield from _decisive(diag, snap, processes)
        yield ""
        yield "## Chain"
        yield ""
        yield "```"
        yield from _chain_lines(diag, processes)
        yield "```"
        yield ""
    yield "## What misleads"
    yield ""
    yield sections.get("What misleads") or "(missing: add a \"What misleads\" section to the example's docstring)"


def recorded_examples(captures: Path = CAPTURES) -> list[str]:
    """Examples with a complete recorded capture."""
    need = ("snapshot.json", "stacks.json", "report.md", "diagnosis.json")
    return sorted(p.name for p in captures.iterdir()
                  if p.is_dir() and all((p / n).exists() for n in need) and (EXAMPLES / f"{p.name}.py").exists()) \
        if captures.is_dir() else []


def render_index(examples: list[str], captures: Path = CAPTURES) -> str:
    lines = ["# Reference cases", "",
             f"<!-- Generated by tools/{PROG}; do not edit. -->", "",
             "Real hangs diagnosed by this tool, one page each (scenario, decisive evidence, chain, verdict, "
             "what misleads). The report names the closest one for each root cause; this index lists them by "
             "pattern.", "",
             "| pattern | case | scenario |", "|---|---|---|"]
    rows = []
    for ex in examples:
        diag = json.loads((captures / ex / "diagnosis.json").read_text(encoding="utf-8"))
        pattern = case_features(diag)["pattern"] or f"none ({diag.get('verdict')})"
        rows.append((pattern, ex, example_doc(ex)[0]))
    for pattern, ex, first in sorted(rows):
        shown = f"[`{pattern}`](../patterns.md#{pattern})" if pattern in catalog() else f"`{pattern}`"
        lines.append(f"| {shown} | [{ex}]({ex}.md) | {_cell(first)} |")
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
    big = [f"{p.name} ({len(t.encode())} B)" for p, t in files.items() if p.name != "README.md" and len(t.encode()) > MAX_PAGE_BYTES]
    if big:
        print(f"{PROG}: warning: pages over {MAX_PAGE_BYTES} bytes: {', '.join(big)}", file=sys.stderr)
    print(f"wrote {len(files)} file(s) into {os.path.relpath(OUT, ROOT)}: {', '.join(examples)}")
    return EXIT_OK


if __name__ == "__main__":
    run_main(main, PROG)
