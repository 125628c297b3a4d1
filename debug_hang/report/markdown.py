"""Render a Diagnosis as the seed's Markdown report, and stacks as py-spy-like text.

Output is bounded: a responder's chat and an agent's context both truncate, so tables and
evidence are capped and the full material stays in the output folder. Everything the job controls
(names, titles, frames, log lines) goes in through `redact`'s Markdown helpers: escaped in
cells and lines, in code spans, or fenced and labelled as job output, so that it can add no
structure (a heading, a fence, a link) to the report an agent or a person reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from debug_hang.analyse import next_steps
from debug_hang.analyse.failures import tool_problem
from debug_hang.analyse.fixes import cause_fix
from debug_hang.analyse.flight_recorder import describe
from debug_hang.analyse.graph import proc_key
from debug_hang.analyse.patterns import catalog
from debug_hang.model import Frame, Process
from debug_hang.report.proof_md import first_screen, proof_lines
from debug_hang.untrusted import code_span, fence, md_cell, md_inline, strip_controls

if TYPE_CHECKING:
    from debug_hang.analyse.diagnosis import Diagnosis
    from debug_hang.analyse.patterns import ProcessVerdict
    from debug_hang.analyse.rootcause import RootCause

MAX_TABLE_ROWS = 40
MAX_EVIDENCE = 8
ODD_GROUP = 3  # in a folded table, a group this small is listed process by process (the odd ones out)
MAX_CULPRITS = 10  # culprits named in a root cause's line (all are in diagnosis.json)
MAX_NATIVE_FRAMES = 12  # a culprit's native frames shown under its root cause (all are in stacks.json)
MAX_FR_GROUPS = 8  # process groups shown in the Flight Recorder table (all are in diagnosis.json)


def render_stacks_text(processes: list[Process]) -> str:
    """All stacks, sample by sample, in py-spy's text layout (what 05_stacks.txt holds)."""
    return "\n".join(_stack_lines(processes)) + "\n"


def _stack_lines(processes: list[Process]) -> Iterator[str]:
    for proc in sorted(processes, key=lambda p: (p.sample, p.node_id or "", p.pid or 0)):
        tags = ", ".join(x for x in (
            proc.role, proc.actor_class, None if proc.rank is None else f"rank {proc.rank}",
            f"node {proc.node_id[:12]}" if proc.node_id else None, f"sample {proc.sample}") if x)
        yield f"--- PID {proc.pid} ({_line(tags)}) ---"
        yield f"Process {proc.pid}: {_line(proc.title or '')}"
        for thread in proc.threads:
            state = "active" if thread.active else "idle"
            if thread.owns_gil:
                state += "+gil"
            yield f'Thread {thread.os_thread_id or thread.thread_id} ({state}): "{_line(thread.name or "")}"'
            for frame in thread.frames:
                where = f"{frame.short_file}:{frame.line}" if frame.line else frame.short_file
                yield f"    {_line(frame.function)} ({_line(where)})"
        yield ""


def _line(text: str) -> str:
    """Job-controlled text on one line of 05_stacks.txt: a newline in it would forge a record."""
    return strip_controls(text, newlines=False)


def _user_context(diag: Diagnosis, key: str) -> list[str]:
    """Source lines around the job's innermost frame of a culprit process (read on its node)."""
    for v in diag.verdicts:
        if v.main is not None and v.main.user_frame is not None and v.main.user_frame.context \
                and f"proc:{v.process.node_id}:{v.process.pid}" == key:
            return v.main.user_frame.context
    return []


def location(frame: Frame | None, user: Frame | None) -> str:
    """`user_fn (file:line) `code`` → `deciding_fn`: where the job's code waits, and on what."""
    parts: list[str] = []
    for f in (user, frame):
        if f is None or (parts and f is user):
            continue
        text = f"{code_span(f.function)} ({md_cell(f.short_file)}:{f.line})"
        if f.code:
            text += f" {code_span(f.code, 80)}"
        parts.append(text)
    if user is not None and frame is not None and user is not frame:
        return f"{parts[0]} → {code_span(frame.function)}"
    return parts[0] if parts else "—"


def native_lines(verdicts: list[ProcessVerdict], key: str) -> Iterator[str]:
    """A culprit process's deciding thread below Python (dumped with --native): its innermost
    native frames, and what the other threads wait on when it holds the GIL."""
    verdict = next((v for v in verdicts if proc_key(v.process) == key), None)
    if verdict is None or verdict.main is None:
        return
    thread = next((t for t, m in verdict.threads if m is verdict.main), None)
    natives: list[Frame] = []
    for frame in thread.frames if thread is not None else []:
        if not frame.native or len(natives) >= MAX_NATIVE_FRAMES:
            break  # the wait's own native frames: those under the innermost Python frame
        natives.append(frame)
    if thread is not None and natives:
        yield f"  - native frames of thread {md_cell(thread.name or thread.thread_id or '?')} (innermost first):"
        yield from fence([f"{strip_controls(f.function, newlines=False)[:200]} ({strip_controls(f.short_file, newlines=False)}"
                          + (f":{f.line})" if f.line else ")") for f in natives], "text", indent="  ")
    waiting = [(t, m) for t, m in verdict.threads if m.waits_for and "GIL" in m.waits_for]
    if waiting:
        names = ", ".join(md_cell(t.name or t.thread_id or "?") for t, _ in waiting[:MAX_CULPRITS])
        yield f"  - {len(waiting)} other thread(s) wait for {md_cell(waiting[0][1].waits_for or '')}: {names}"


def _progress_lines(diag: Diagnosis) -> Iterator[str]:
    """What each process that matters did between the first and the last sample."""
    if not diag.signals:
        return
    yield ""
    yield "## Progress in the sampling window"
    yield ("Read on each process's node between the first and the last stack sample: bytes read and written "
           "(/proc/PID/io), log lines (progress counters compared with the line before), CPU, whether a loop moved.")
    yield ""
    shown = diag.signals
    if len(shown) > MAX_TABLE_ROWS:
        # Many processes: those that moved or were not read first; the silent rest are counted.
        shown = sorted(shown, key=lambda s: (not s.read or bool([f for f in s.findings if f.strength != "info"])),
                       reverse=True)[:MAX_TABLE_ROWS]
        yield f"{len(diag.signals) - len(shown)} more process(es) not listed (diagnosis.json `progress` has all)."
    for sig in shown:
        window = f" ({sig.window_s:.1f}s)" if sig.window_s else ""
        if not sig.read:
            yield f"- {_cell(sig.name)}: not read{window}" + (f" — {_cell('; '.join(sig.errors))[:200]}" if sig.errors else "")
            continue
        moved = [f for f in sig.findings if f.strength != "info"]
        if moved:
            yield f"- {_cell(sig.name)}{window}: " + "; ".join(f"{f.strength}: `{_cell(f.text)[:200]}`" for f in moved)
        else:
            r = sig.readings
            yield (f"- {_cell(sig.name)}{window}: silent — wrote {r.get('wchar_beyond_logs', 0):.0f} B, logged "
                   f"{r.get('log_lines', 0):.0f} line(s), CPU {r.get('cpu_percent', 0):.0f}% "
                   f"({', '.join(sig.silent) or 'nothing read'})")


def _row_cells(diag: Diagnosis, v: ProcessVerdict) -> tuple[str, str, str]:
    """(blocking location, CPU, pattern) of one process's row in the Blocked tasks table."""
    where = "—"
    if v.main is not None and v.verdict != "idle":
        where = location(v.main.frame, v.main.user_frame)
    cpu = diag.collection.info_of(v.process).get("cpu_percent")
    cpu_text = "—" if cpu is None else f"{cpu:.0f}%"
    waits = next((m.waits_for for _, m in v.threads if m is v.main and m.waits_for), None)
    if waits:
        where += f" (waits for {md_cell(waits)})"
    graph_node = diag.graph.nodes.get(proc_key(v.process))
    shown = v.pattern
    if shown == "unknown" and graph_node is not None and graph_node.pattern:
        shown = graph_node.pattern  # read from more than the stack (a file lock from /proc/locks)
    return where, cpu_text, shown or "—"


def _folded_rows(rows: list[ProcessVerdict], cells: list[tuple[str, str, str]]) -> Iterator[str]:
    """Many processes: one row per group of processes of one kind blocked at one place (with
    counts, rank ranges, nodes), then the odd ones out (groups of at most ODD_GROUP) one by one."""
    groups: dict[tuple[str, str, str, str], list[tuple[ProcessVerdict, str]]] = {}
    for v, (where, cpu_text, shown) in zip(rows, cells, strict=True):
        kind = v.process.actor_class or v.process.task_name or v.process.label
        groups.setdefault((kind if v.process.rank is not None or v.process.actor_class else v.process.label,
                           v.verdict, where, shown), []).append((v, cpu_text))
    big = sorted((g for g in groups.items() if len(g[1]) > ODD_GROUP), key=lambda g: -len(g[1]))
    odd = [m for g in groups.items() if len(g[1]) <= ODD_GROUP for m in g[1]]
    cell_of = {id(v): c for v, c in zip(rows, cells, strict=True)}
    for (kind, verdict, where, shown), members in big:
        procs = [v.process for v, _ in members]
        ranks = sorted({p.rank for p in procs if p.rank is not None})
        nodes = {p.node_id for p in procs}
        cpus = sorted(c for _, c in members if c != "—")
        name = f"{kind} × {len(procs)}" + (f" (ranks {rank_ranges(ranks)})" if ranks else "")
        node_text = (nodes.pop() or "?")[:8] if len(nodes) == 1 else f"{len(nodes)} nodes"
        cpu_text = "—" if not cpus else cpus[0] if cpus[0] == cpus[-1] else f"{cpus[0]}–{cpus[-1]}"
        yield (f"| {md_cell(name)} | {len({p.pid for p in procs})} pids | {md_cell(node_text)} | {verdict} | "
               f"{cpu_text} | {where} | {shown} |")
    room = max(MAX_TABLE_ROWS - len(big), 10)
    for v, cpu_text in odd[:room]:
        where, _, shown = cell_of[id(v)]
        yield (f"| {md_cell(v.process.label)} (odd one out) | {v.process.pid} | "
               f"{md_cell((v.process.node_id or '?')[:8])} | {v.verdict} | {cpu_text} | {where} | {shown} |")
    if len(odd) > room:
        yield f"| … {len(odd) - room} more odd ones out in 05_stacks.txt and stacks.json | | | | | | |"
    yield ""
    yield (f"{len(rows)} processes folded: {len(big)} group(s) of processes of one kind blocked at one place, "
           f"{len(odd)} odd one(s) out listed alone; every stack is in stacks.json and 05_stacks.txt.")


def rank_ranges(ranks: list[int], most: int = 6) -> str:
    """Sorted ranks as ranges: `0-1, 3-1336, 1338-1999` (at most `most`, then how many more)."""
    spans: list[tuple[int, int]] = []
    for r in ranks:
        if spans and r == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], r)
        else:
            spans.append((r, r))
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans[:most])
    return text + (f", … {len(spans) - most} more ranges" if len(spans) > most else "")


def _cell(text: object) -> str:
    """Text the tool composed around the job's words, for a line or a cell (see redact.md_inline)."""
    return md_inline(text)


def _finished_text(done: next_steps.FinishedCall) -> str:
    code = f": {code_span(done.code.strip(), 80)}" if done.code and done.peers_at else ""
    return f"{_cell(done.describe())}{code}. Read that code, not the culprit's idle stack"


_EDGE_LINE = re.compile(r"^(?P<src>.+?) → (?P<rest>.+)$")


def fold_evidence(lines: list[str], most: int = 2) -> list[str]:
    """Evidence lines `A → B: why` that differ only in A, folded into one line naming the first
    `most` of them, then `…` (a thousand ranks in one collective are one line; the Impact line
    counts them)."""
    out: list[str] = []
    index: dict[str, int] = {}
    sources: dict[str, list[str]] = {}
    for line in lines:
        m = _EDGE_LINE.match(line)
        if m is None:
            out.append(line)
            continue
        rest = m["rest"]
        if rest not in index:
            index[rest] = len(out)
            out.append(line)
        sources.setdefault(rest, []).append(m["src"])
    for rest, i in index.items():
        srcs = sources[rest]
        if len(srcs) > 1:
            more = ", …" if len(srcs) > most else ""
            out[i] = f"{', '.join(srcs[:most])}{more} → {rest}"
    return out


def _read_next(diag: Diagnosis, guide: next_steps.Guide) -> Iterator[str]:
    """What to open or run next: one line per root cause, the job's code, the next command."""
    lines: list[str] = []
    for i, (cause, g) in enumerate(zip(diag.causes[:5], guide.causes, strict=False), 1):
        if "#" not in g.pattern_doc and g.case is None:
            continue  # a wait the catalog does not name: nothing to open for it
        # Link text relative to the skill folder (as SKILL.md names files), target absolute (the
        # report lives in the output folder, not beside the references).
        root = guide.references_root
        case = f"; closest recorded case [{g.case}]({root}/{g.case}) ({g.case_why})" if g.case else f" ({g.case_why})"
        lines.append(f"- Root cause {i} `{cause.pattern}`: [{g.pattern_doc}]({root}/{g.pattern_doc}){case}")
        done = g.finished_call
        if done is not None:
            line = done.peers_at.split(":", 1)[1].split(" ", 1)[0] if done.peers_at and ":" in done.peers_at else "?"
            lines.append(f"  - {_cell(done.describe())}: read "
                         + (f"{code_span(done.file)} at line {_cell(line)}," if done.file else "that call's code,")
                         + " not the culprit's idle stack")
    code = guide.job_code
    if code is not None and (code.entrypoint or code.working_dir or code.driver_script):
        parts = [f"entrypoint {code_span(code.entrypoint)}" if code.entrypoint else None,
                 f"driver pid {code.driver_pid} on node {(code.driver_node_id or '?')[:8]}" if code.driver_pid else None,
                 f"driver script {code_span(code.driver_script)}" if code.driver_script and not code.working_dir else None,
                 (f"working_dir {_cell(code.working_dir_uri or '')} unpacked at {code_span(code.working_dir)} on node(s) "
                  f"{_some_nodes(code.working_dir_nodes)}") if code.working_dir else None]
        lines.append("- Job code: " + "; ".join(p for p in parts if p))
    if guide.next_command:
        lines.append(f"- Next command: {code_span(guide.next_command)} — {_cell(guide.next_why)}")
    if not lines:
        return
    yield "## Read next"
    yield from lines
    yield f"- Paths `references/...` and `scripts/...` are in the skill folder `{guide.references_root}`."
    yield ""


def _tool_problem_lines(diag: Diagnosis) -> Iterator[str]:
    """A failure of the tool itself (versions, its own helper), before the summary: fix it first."""
    problem = tool_problem(diag)
    if problem is None:
        return
    yield f"**{_with_spans(problem.headline)}**"
    yield ""
    yield f"Fix: {_with_spans(problem.fix)}"
    yield ""


def _with_spans(text: str) -> str:
    """Tool-composed text whose `backticked` parts are commands: each a code span (copied as
    written), the rest escaped as a line."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # unbalanced: no spans at all
        return md_inline(text.replace("`", "'"))
    return "".join(code_span(part) if i % 2 else md_inline(part) for i, part in enumerate(parts))


def _some_nodes(nodes: list[str], most: int = 5) -> str:
    shown = ", ".join(n[:8] for n in nodes[:most])
    return shown + (f" and {len(nodes) - most} more" if len(nodes) > most else "")


def render_markdown(diag: Diagnosis) -> str:
    return "\n".join(_markdown_lines(diag)) + "\n"


def _markdown_lines(diag: Diagnosis) -> Iterator[str]:
    """report.md, section by section."""
    guide = next_steps.guide(diag)
    yield f"# Ray hang diagnosis — job {md_cell(diag.job_id)}: **{diag.verdict}**"
    yield ""
    yield from _tool_problem_lines(diag)
    yield md_inline(diag.summary)
    yield ""
    yield from first_screen(diag)
    yield from proof_lines(diag)
    yield from _read_next(diag, guide)
    yield from _cluster_summary(diag)
    yield from _blocked_table(diag)
    yield from _progress_lines(diag)
    yield from _chain_lines(diag)
    yield from _root_cause_lines(diag, guide)
    yield from _flight_recorder_lines(diag)
    yield from _locals_lines(diag)
    yield from _driver_log_lines(diag)
    yield from _fix_lines(diag)
    yield from _uncollected_lines(diag)


def _cluster_summary(diag: Diagnosis) -> Iterator[str]:
    from debug_hang.snapshot import resource_usage

    snap = diag.snapshot
    yield "## Cluster summary"
    if snap is not None:
        alive = sum(1 for n in diag.rows.nodes if n.state == "ALIVE")
        yield f"- Nodes alive: {alive} / {len(diag.rows.nodes)}"
        usage = resource_usage(snap)
        for res in ("CPU", "GPU"):
            if res in usage:
                used, total = usage[res]
                yield f"- {res} reserved: {used:g} / {total:g} (reserved by tasks and actors, not real load)"
        demands = (snap.cluster_status.get("loadMetricsReport") or {}).get("resourceDemand") or []
        if demands:
            yield f"- Pending resource demands: {md_inline(demands, 300)}"
        for warning in snap.warnings[:5]:
            yield f"- ⚠ {md_inline(warning)}"
    yield f"- Address: {md_inline(diag.address)}; job {md_inline(diag.job_id)} chosen: {md_inline(diag.job_choice)}"
    others = [f"{j.get('job_id')} ({j.get('status')})" for j in diag.other_jobs if j.get("job_id")]
    if others:
        yield f"- Other jobs: {md_inline(', '.join(others[:10]))}{' …' if len(others) > 10 else ''}"
    coll = diag.collection
    yield (f"- Collection: {len({p.ref for p in coll.processes})} processes on {coll.nodes} node(s), "
           f"{len(coll.processes)} stacks in {coll.seconds:.1f}s; whole diagnosis {diag.seconds:.1f}s")
    sampled = diag.sampling
    if sampled.get("samples"):
        span = f" over {sampled['span_s']:.1f}s" if sampled.get("span_s") else ""
        rounds = (f", in {sampled['rounds']} rounds: more were taken because {md_inline('; '.join(sampled.get('why') or []))[:600]}"
                if int(sampled.get("rounds") or 1) > 1 else
                f" (more were needed: {md_inline('; '.join(sampled['why']))[:400]})" if sampled.get("why") else "")
        yield f"- Samples: up to {sampled['samples']} per process{span}{rounds}"
    for note in sampled.get("readings") or []:
        yield f"- Read again: {md_inline(str(note))[:400]}"
    for work in diag.busy:
        yield f"- {'Thread sleeping in a loop' if work.sleeping else 'Busy thread'}: {md_inline(work.text())[:600]}"
    if diag.progress:
        yield f"- Progress seen: {md_inline('; '.join(diag.progress[:3]))}"
    yield ""


def _blocked_table(diag: Diagnosis) -> Iterator[str]:
    yield "## Blocked tasks"
    yield "CPU = real CPU use of the process over the sampling window (a spin shows ~100%, a wait ~0%)."
    yield ""
    yield "| Process | PID | Node | State | CPU | Blocking location | Pattern |"
    yield "|---|---|---|---|---|---|---|"
    rows = sorted(diag.verdicts, key=lambda v: (v.verdict == "idle", v.process.pid or 0))
    cells = [_row_cells(diag, v) for v in rows]
    if len(rows) > MAX_TABLE_ROWS:
        yield from _folded_rows(rows, cells)
    else:
        for v, (where, cpu_text, shown) in zip(rows, cells, strict=True):
            yield (f"| {md_cell(v.process.label)} | {v.process.pid} | {md_cell((v.process.node_id or '?')[:8])} | "
                   f"{v.verdict} | {cpu_text} | {where} | {shown} |")
    stopped = [n for n in diag.graph.nodes.values()
               if n.state in ("dead", "pending", "restarting") and n.kind in ("actor", "rank", "task")]
    for node in stopped[:MAX_TABLE_ROWS]:
        yield (f"| {md_cell(node.name)}{'' if node.rank is None else f' (rank {node.rank})'} | "
               f"{node.pid or '—'} | {md_cell((node.node_id or '?')[:8])} | {node.state} | — | — | "
               f"{node.pattern or '—'} |")
    if len(stopped) > MAX_TABLE_ROWS:
        yield f"| … {len(stopped) - MAX_TABLE_ROWS} more dead or pending in diagnosis.json | | | | | | |"


def _chain_lines(diag: Diagnosis) -> Iterator[str]:
    yield ""
    yield "## Blocking chain"
    all_chains = diag.chains
    if not all_chains:
        yield "No wait-for chain was found."
    for i, chain in enumerate(all_chains[:5], 1):
        if len(all_chains) > 1:
            yield f"Chain {i}:"
        lines = []
        for j, (node, why) in enumerate(chain):
            what = node.pattern or node.state
            marker = "  ← root cause" if j == len(chain) - 1 else ""
            lines.append(f"{node.label()} [{what}]{marker}")
            node_ev = diag.evidence.per_node.get(node.key) if diag.evidence is not None else None
            if node_ev is not None and node_ev.highlights:
                lines.append(f"    log: {node_ev.highlights[-1][:160]}")
            if why:
                lines.append(f"  ↓ {why}")
        yield from fence(lines, "text")
    yield ""


def _root_cause_lines(diag: Diagnosis, guide: next_steps.Guide) -> Iterator[str]:
    yield "## Root cause"
    if not diag.causes:
        yield "None identified."
        yield ""
    for i, cause in enumerate(diag.causes[:5], 1):
        done = guide.causes[i - 1].finished_call if i <= len(guide.causes) else None
        yield from _one_cause(diag, i, cause, done)


def _one_cause(diag: Diagnosis, i: int, cause: RootCause, done: next_steps.FinishedCall | None) -> Iterator[str]:
    pattern = catalog().get(cause.pattern)
    title = pattern.title if pattern else cause.pattern
    yield f"### {i}. {title} (`{cause.pattern}`, confidence {cause.confidence:.2f})"
    named = ", ".join(c.label() for c in cause.culprits[:MAX_CULPRITS])
    more = len(cause.culprits) - MAX_CULPRITS
    yield f"- **Culprit**: {md_inline(named)}" + (f" and {more} more (in diagnosis.json)" if more > 0 else "")
    if done is not None:
        yield f"  - {_finished_text(done)}"
    for c in cause.culprits[:MAX_CULPRITS]:
        if c.frame is not None and c.state != "idle":
            yield (f"  - {md_cell(c.name)}: at {code_span(c.frame.function)} "
                   f"({md_cell(c.frame.short_file)}{'' if c.frame.line is None else f':{c.frame.line}'})"
                   + (f": {code_span(c.frame.code)}" if c.frame.code else ""))
        if not diag.proofs:  # else the proof above shows the lines around it
            source = _user_context(diag, c.key)
            if source:
                yield from fence(source, "python job-source", indent="  ")
        yield from native_lines(diag.verdicts, c.key)
    if pattern:
        yield f"- **Mechanism**: {pattern.meaning}"
    yield f"- **Impact**: {len(cause.victims)} process(es) wait on it"
    for ev in fold_evidence(cause.evidence)[:MAX_EVIDENCE]:
        yield f"- evidence: {md_inline(ev, 300)}"
    if diag.evidence is not None:
        for c in cause.culprits[:MAX_CULPRITS]:
            node_ev = diag.evidence.per_node.get(c.key)
            if node_ev is None:
                continue
            for line in node_ev.history:
                yield f"- task history ({md_cell(c.name)}): {md_inline(line, 300)}"
            for line in node_ev.highlights:
                yield f"- own log ({md_cell(c.name)} pid {c.pid}): {code_span(line, 240)}"
    yield ""


def _locals_lines(diag: Diagnosis) -> Iterator[str]:
    diffs = locals_differences(diag)
    if diffs:
        yield "## Locals that differ between peers (--locals)"
        for line in diffs[:10]:
            yield f"- {md_inline(line)}"
        yield ""


def _driver_log_lines(diag: Diagnosis) -> Iterator[str]:
    if diag.evidence is not None and diag.evidence.driver_highlights:
        yield "## Driver log (lines that matter)"
        yield "Printed by the job (not by debug-hang):"
        yield from fence(diag.evidence.driver_highlights, "text job-output")
        yield ""


def _fix_lines(diag: Diagnosis) -> Iterator[str]:
    yield "## Fix suggestions"
    seen: set[str] = set()
    for cause in diag.causes[:3]:
        pattern = catalog().get(cause.pattern)
        if pattern is None or cause.pattern in seen:
            continue
        seen.add(cause.pattern)
        first = cause_fix(cause)  # the one this cause's rule chose, then the others
        for fix in sorted(pattern.fixes, key=lambda f: f != first):
            yield f"- ({cause.pattern}) {fix}"
    if not seen and diag.verdict == "no-hang":
        yield "- Nothing is stuck. If the job is too slow, profile it: `py-spy record --pid PID` on its node."
    elif not seen:
        yield "- Collect again with `--samples 5 --interval 2` and read 05_stacks.txt."


def _uncollected_lines(diag: Diagnosis) -> Iterator[str]:
    errors = diag.collection.errors + diag.errors
    if errors:
        yield ""
        yield "## What could not be collected"
        for err in errors[:15]:
            yield (f"- node {md_cell((err.node_id or '?')[:12])} pid {md_cell(err.pid or '—')}: "
                   f"{md_inline(err.error, 300)}")
        if len(errors) > 15:
            yield f"- … {len(errors) - 15} more in diagnosis.json"


_COUNTER = re.compile(r"^(step|steps|epoch|it|iter|iteration|i|idx|batch_idx|global_step|round|n|count|done)$")


def locals_differences(diag: Diagnosis) -> list[str]:
    """Loop counters in the deciding user frames that differ across processes of one class:
    `TrainWorker.step: rank 2: 7; ranks 0, 1, 3: 6`. Needs a run with --locals."""
    groups: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for v in diag.verdicts:
        frame = v.main.user_frame if v.main else None
        if frame is None or not frame.locals or not v.process.actor_class:
            continue
        who = f"rank {v.process.rank}" if v.process.rank is not None else f"pid {v.process.pid}"
        groups.setdefault(v.process.actor_class, []).append((who, frame.locals))
    out = []
    for cls, members in groups.items():
        if len(members) < 2:
            continue
        names = set.intersection(*(set(loc) for _, loc in members))
        for name in sorted(n for n in names if _COUNTER.match(n)):
            by_value: dict[str, list[str]] = {}
            for who, loc in members:
                by_value.setdefault(loc[name][:40], []).append(who)
            if len(by_value) > 1:
                parts = sorted(by_value.items(), key=lambda kv: len(kv[1]))
                out.append(f"{cls}.{name}: " + "; ".join(f"{', '.join(w)}: {val}" for val, w in parts))
    return out


def _flight_recorder_lines(diag: Diagnosis) -> Iterator[str]:
    """A short per-group table of the PyTorch Flight Recorder dumps, and what they add to the stacks."""
    fr = diag.flight_recorder
    if fr is None and not diag.fr_notes:
        return
    yield "## Flight Recorder (PyTorch collectives)"
    for note in diag.fr_notes:
        yield f"- {md_inline(note, 400)}"
    if fr is not None and fr.ranks_dumped:
        yield f"- dumps read: rank(s) {', '.join(str(r) for r in fr.ranks_dumped)}"
        yield ""
        yield "| Process group | Members | Pending collective | Entered | Never entered (its last collective) | No dump | Desync |"
        yield "|---|---|---|---|---|---|---|"
        for g in fr.groups[:MAX_FR_GROUPS]:
            if g.kind == "idle":
                yield f"| {md_inline(g.label)} | {len(g.members)} | none (all completed) | | | | |"
                continue
            never = "; ".join(f"{r} ({describe(g.ranks[r].last, g.ranks[r].last_enqueued)})" for r in g.not_entered)
            desync = "; ".join(f"{r}: {op}" for r, op in sorted(g.desync_ops.items())) if g.desync_seq is not None else ""
            yield (f"| {md_inline(g.label)} | {len(g.members)} | #{g.pending_seq} {md_inline(g.pending_op())} | "
                   f"{', '.join(map(str, g.entered))} | {md_inline(never, 300)} | {', '.join(map(str, g.missing))} | "
                   f"{md_inline(desync, 200)} |")
        if len(fr.groups) > MAX_FR_GROUPS:
            yield f"| … {len(fr.groups) - MAX_FR_GROUPS} more groups in diagnosis.json | | | | | | |"
    if fr is not None:
        for err in fr.errors[:5]:
            yield f"- not read: {md_inline(err, 300)}"
    yield ""
