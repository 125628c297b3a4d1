"""report.html: the whole diagnosis as one self-contained page — the first screen (verdict,
culprit, the line, mechanism, fix), the wait-for graph inline, the proof of each cause, the
chains, the evidence, and every process's stacks folded by group, each group expandable.

Self-contained and inert: styles inline, no script, font, image or link fetched; a
Content-Security-Policy that forbids every fetch and every script keeps it so even if a text
slipped through. Every text from the cluster is redacted, then escaped (`untrusted.html_text`);
none ever lands in an href, src, style or on* attribute. Rendered from the Diagnosis only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from debug_hang.analyse.graph import proc_key
from debug_hang.analyse.patterns import ProcessVerdict, catalog
from debug_hang.analyse.proof import CodeAt, Proof
from debug_hang.model import Process
from debug_hang.redact import redact
from debug_hang.report.graph_view import rank_text, thousands
from debug_hang.report.proof_md import ROLE_TEXT
from debug_hang.untrusted import html_text

if TYPE_CHECKING:
    from debug_hang.analyse.diagnosis import Diagnosis

MAX_GROUPS = 80  # stack groups shown; the rest are counted (stacks.json has every stack)
MAX_STACK_BYTES = 600_000  # stack text in the page at most, whatever the number of processes
MAX_FRAMES = 40  # frames per thread shown
MAX_MEMBERS = 24  # processes named per group
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
STYLE = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#212121;background:#fafafa}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #cfd8dc}
h3{font-size:15px;margin:18px 0 6px}
code,pre{font:12.5px/1.4 'DejaVu Sans Mono',Menlo,Consolas,monospace}
pre{background:#fff;border:1px solid #e0e0e0;padding:8px;overflow-x:auto;white-space:pre}
.verdict{padding:1px 8px;border-radius:4px;color:#fff;background:#607d8b}
.verdict.hang{background:#c62828}.verdict.no-hang{background:#2e7d32}.verdict.inconclusive{background:#ef6c00}
.first{background:#fff;border:2px solid #c62828;border-radius:6px;padding:10px 16px;margin:12px 0}
.first dt{font-weight:bold;float:left;width:110px;clear:left}.first dd{margin:0 0 6px 120px}
.culprit{color:#b71c1c;font-weight:bold}
.graph{overflow:auto;background:#fff;border:1px solid #e0e0e0}
details{background:#fff;border:1px solid #e0e0e0;border-radius:4px;margin:4px 0;padding:2px 8px}
details[open]{padding-bottom:8px}summary{cursor:pointer}
.muted{color:#607d8b}.tag{font-size:12px;border:1px solid #b0bec5;border-radius:3px;padding:0 4px;margin-left:4px}
table{border-collapse:collapse}td,th{border:1px solid #e0e0e0;padding:2px 6px;text-align:left;vertical-align:top}
"""
_CODE = re.compile(r"`([^`]+)`")


def esc(text: object, limit: int | None = None, newlines: bool = False) -> str:
    """Cluster text for the page: secrets redacted first (escaping would hide them from the
    writer's pass), then escaped."""
    return html_text(redact(str(text)), limit, newlines)


def inline(text: object, limit: int | None = None) -> str:
    """A sentence the tool composed around the job's words, `code` spans as <code>: escaped
    first, so a span can hold only escaped text."""
    return _CODE.sub(r"<code>\1</code>", esc(text, limit))


def render_html(diag: Diagnosis, svg: str) -> str:
    """The page; `svg` is graph.svg (written by svg.render_svg: escaped there)."""
    title = f"Ray hang diagnosis — job {diag.job_id}: {diag.verdict}"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{esc(title)}</title>", f"<style>{STYLE}</style></head><body><main>",
             f'<h1>Ray hang diagnosis — job {esc(diag.job_id)}: <span class="verdict {esc(diag.verdict)}">'
             f"{esc(diag.verdict)}</span></h1>", f"<p>{esc(diag.summary)}</p>"]
    parts += _first_screen(diag)
    parts += ['<h2 id="graph">Wait-for graph</h2>',
              '<p class="muted">A → B: A waits on B. Victims above, culprits below, in red. The same picture is graph.svg.</p>',
              f'<div class="graph">{_svg_body(svg)}</div>']
    parts += _proofs(diag)
    parts += _chains(diag)
    parts += _causes(diag)
    parts += _progress(diag)
    parts += _stacks(diag)
    parts += _errors(diag)
    parts.append('<p class="muted">Written by debug-hang. The output folder holds report.md, diagnosis.json '
                 "(schema references/diagnosis.schema.json), graph.svg, stacks.json and the phase files.</p>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _svg_body(svg: str) -> str:
    """graph.svg without its XML prolog, inline in the page."""
    return svg[svg.index("<svg"):] if "<svg" in svg else ""


def _first_screen(diag: Diagnosis) -> Iterator[str]:
    if not diag.proofs:
        return
    proof, cause = diag.proofs[0], diag.causes[0]
    label = "Culprit" if diag.verdict == "hang" else "Candidate"
    yield '<dl class="first" id="first">'
    yield (f'<dt>{label}</dt><dd><span class="culprit" id="culprit">{esc(proof.culprit)}</span> '
           f'<span class="tag">{esc(cause.pattern)}</span> <span class="muted">confidence {cause.confidence:.2f}</span></dd>')
    if proof.deciding is not None:
        yield f"<dt>Line</dt><dd>{_at(proof.deciding)} <span class='muted'>({esc(ROLE_TEXT.get(proof.deciding.role, ''))})</span></dd>"
    yield f"<dt>Mechanism</dt><dd>{esc(proof.mechanism)}</dd>"
    if proof.fix:
        yield f"<dt>Fix</dt><dd>{esc(proof.fix)}</dd>"
    yield '<dt>Below</dt><dd><a href="#proof">proof</a> · <a href="#graph">graph</a> · <a href="#stacks">stacks</a></dd>'
    yield "</dl>"


def _at(code: CodeAt) -> str:
    text = f"<code>{esc(code.where)}</code> in <code>{esc(code.function)}</code>"
    return text + (f": <code>{esc(code.code, 200)}</code>" if code.code else "")


def _proofs(diag: Diagnosis) -> Iterator[str]:
    if not diag.proofs:
        return
    yield '<h2 id="proof">Proof</h2>'
    for i, proof in enumerate(diag.proofs, 1):
        yield from _proof(i, proof)


def _proof(i: int, proof: Proof) -> Iterator[str]:
    yield f"<h3>{i}. <code>{esc(proof.pattern)}</code>: {esc(proof.culprit)}</h3><ul>"
    for code in proof.code:
        role = ROLE_TEXT.get(code.role, code.role)
        yield f"<li>{esc(role[:1].upper() + role[1:])} ({esc(code.who)}): {_at(code)}"
        if code.context:
            yield f"<pre>{esc(chr(10).join(code.context), newlines=True)}</pre>"
        yield "</li>"
    failure = proof.failure
    if failure is not None:
        call = f"<code>{esc(failure.call)}</code> " if failure.call else ""
        yield (f"<li>Failure: {call}{esc(failure.who)}: <code>{esc(failure.exception, 300)}</code> "
               f"<span class='muted'>(from the {esc(failure.source)})</span>")
        if failure.traceback:
            yield f"<pre>{esc(chr(10).join(failure.traceback), newlines=True)}</pre>"
        yield "</li>"
    if proof.calls:
        yield "<li>Calls: " + "; ".join(esc(c.text()) for c in proof.calls) + "</li>"
    for sign in proof.last_signs:
        when = "" if sign.seconds_before is None else f" ({sign.seconds_before:.1f}s before the " + (
            "window)" if sign.source == "log" else "first reading)")
        text = f"Last printed by {esc(sign.who)}{when}: <code>{esc(sign.text)}</code>" if sign.source == "log" else \
            f"{esc(sign.text[:1].upper() + sign.text[1:])}{when}"
        yield f"<li>{text}</li>"
    for line in proof.unchanged:
        yield f"<li>Unchanged between the samples: {esc(line)}</li>"
    yield f"<li><b>Would prove it wrong</b>: {esc(proof.disproved_by)}</li></ul>"


def _chains(diag: Diagnosis) -> Iterator[str]:
    yield '<h2 id="chain">Blocking chain</h2>'
    if not diag.chains:
        yield "<p>No wait-for chain was found.</p>"
    for chain in diag.chains[:5]:
        lines = []
        for j, (node, why) in enumerate(chain):
            mark = "  ← root cause" if j == len(chain) - 1 else ""
            lines.append(f"{node.label()} [{node.pattern or node.state}]{mark}")
            if why:
                lines.append(f"  ↓ {why}")
        yield f"<pre>{esc(chr(10).join(lines), newlines=True)}</pre>"


def _causes(diag: Diagnosis) -> Iterator[str]:
    yield '<h2 id="causes">Root causes</h2>'
    if not diag.causes:
        yield "<p>None identified.</p>"
    for i, cause in enumerate(diag.causes[:5], 1):
        pattern = catalog().get(cause.pattern)
        yield (f"<h3>{i}. {esc(pattern.title if pattern else cause.pattern)} (<code>{esc(cause.pattern)}</code>, "
               f"confidence {cause.confidence:.2f})</h3><ul>")
        yield f"<li><b>Culprit</b>: <span class='culprit'>{esc(', '.join(c.label() for c in cause.culprits[:10]))}</span></li>"
        if pattern:
            yield f"<li><b>Mechanism</b>: {esc(pattern.meaning)}</li>"
            yield "".join(f"<li><b>Fix</b>: {esc(fix)}</li>" for fix in pattern.fixes)
        yield f"<li><b>Impact</b>: {thousands(len(cause.victims))} process(es) wait on it</li>"
        for ev in cause.evidence[:12]:
            yield f"<li>evidence: {inline(ev, 400)}</li>"
        if diag.evidence is not None:
            for c in cause.culprits[:10]:
                node_ev = diag.evidence.per_node.get(c.key)
                for line in (node_ev.highlights if node_ev else [])[:6]:
                    yield f"<li>own log ({esc(c.name)}): <code>{esc(line, 300)}</code></li>"
        yield "</ul>"
    if diag.evidence is not None and diag.evidence.driver_highlights:
        yield "<h3>Driver log (lines that matter, printed by the job)</h3>"
        yield f"<pre>{esc(chr(10).join(diag.evidence.driver_highlights), newlines=True)}</pre>"


def _progress(diag: Diagnosis) -> Iterator[str]:
    if not diag.signals:
        return
    yield '<h2 id="progress">Progress in the sampling window</h2><ul>'
    for sig in diag.signals[:60]:
        moved = [f.text for f in sig.findings if f.strength != "info"]
        state = "not read" if not sig.read else ("; ".join(moved) if moved else "silent (" + ", ".join(sig.silent) + ")")
        yield f"<li>{esc(sig.name)}: {esc(state, 400)}</li>"
    if len(diag.signals) > 60:
        yield f"<li>… {len(diag.signals) - 60} more in diagnosis.json</li>"
    yield "</ul>"


def _signature(proc: Process) -> tuple[object, ...]:
    return tuple(tuple((f.function, f.short_file, f.line) for f in t.frames) for t in proc.threads)


def _stack_text(v: ProcessVerdict) -> str:
    """One process's threads, innermost frame first, each with what the matcher read in it."""
    lines: list[str] = []
    for thread, match in v.threads:
        state = "active" if thread.active else "idle"
        lines.append(f'Thread {thread.os_thread_id or thread.thread_id} ({state}) "{thread.name or ""}" — {match.pattern}')
        for frame in thread.frames[:MAX_FRAMES]:
            where = f"{frame.short_file}:{frame.line}" if frame.line else frame.short_file
            lines.append(f"    {frame.function} ({where})" + (f"  {frame.code}" if frame.code else ""))
        if len(thread.frames) > MAX_FRAMES:
            lines.append(f"    … {len(thread.frames) - MAX_FRAMES} more frames")
    return "\n".join(lines)


def _stacks(diag: Diagnosis) -> Iterator[str]:
    """Each group of processes of one kind with the same stacks: one expandable block, culprits
    and the chains' processes first, then the largest groups."""
    yield '<h2 id="stacks">Stacks, folded by group</h2>'
    chain = set(diag.chain_keys())
    culprits = {c.key for cause in diag.causes for c in cause.culprits}
    groups: dict[tuple[object, ...], list[ProcessVerdict]] = {}
    for v in diag.verdicts:
        groups.setdefault((v.process.actor_class or v.process.task_name or v.process.role, _signature(v.process)), []).append(v)

    def rank(members: list[ProcessVerdict]) -> tuple[bool, bool, int]:
        keys = {proc_key(v.process) for v in members}
        return (not keys & culprits, not keys & chain, -len(members))

    ordered = sorted(groups.values(), key=rank)
    yield (f'<p class="muted">{thousands(len(diag.verdicts))} process(es) (their last sample) in '
           f"{thousands(len(ordered))} group(s) of identical stacks; every sample is in stacks.json and 05_stacks.txt.</p>")
    size = 0
    for n, members in enumerate(ordered):
        if n >= MAX_GROUPS or size > MAX_STACK_BYTES:
            rest = ordered[n:]
            yield (f"<p>… {thousands(len(rest))} more group(s) of {thousands(sum(len(m) for m in rest))} process(es) "
                   "not shown: stacks.json has them.</p>")
            break
        block = _group(members, culprits)
        size += len(block)
        yield block


def _group(members: list[ProcessVerdict], culprits: set[str]) -> str:
    first = members[0]
    procs = [v.process for v in members]
    ranks = [p.rank for p in procs if p.rank is not None]
    name = first.process.label if len(procs) == 1 else (
        f"{first.process.actor_class or first.process.task_name or first.process.role or 'process'} × {thousands(len(procs))}")
    where = ""
    if first.main is not None and first.main.frame is not None and first.verdict != "idle":
        frame = first.main.user_frame or first.main.frame
        where = f" at {frame.function} ({frame.short_file}:{frame.line})"
    is_culprit = any(proc_key(p) in culprits for p in procs)
    head = (f"<b>{esc(name)}</b>" + (f" ranks {esc(rank_text(ranks, 6))}" if len(procs) > 1 and ranks else "")
            + f" — {esc(first.verdict)} · {esc(first.pattern or '—')}{esc(where)}"
            + (' <span class="culprit">culprit</span>' if is_culprit else ""))
    named = ", ".join(f"pid {p.pid}" + (f" (rank {p.rank})" if p.rank is not None else "")
                      + (f" on {(p.node_id or '?')[:8]}" if p.node_id else "") for p in procs[:MAX_MEMBERS])
    more = f", … {thousands(len(procs) - MAX_MEMBERS)} more" if len(procs) > MAX_MEMBERS else ""
    return (f"<details{' open' if is_culprit else ''}><summary>{head}</summary>"
            f'<p class="muted">{esc(named)}{more}</p><pre>{esc(_stack_text(first), newlines=True)}</pre></details>')


def _errors(diag: Diagnosis) -> Iterator[str]:
    errors = diag.collection.errors + diag.errors
    if not errors:
        return
    yield '<h2 id="errors">What could not be collected</h2><ul>'
    for err in errors[:30]:
        yield f"<li>node {esc((err.node_id or '?')[:12])} pid {esc(err.pid or '—')}: {esc(err.error, 400)}</li>"
    if len(errors) > 30:
        yield f"<li>… {len(errors) - 30} more in diagnosis.json</li>"
    yield "</ul>"
