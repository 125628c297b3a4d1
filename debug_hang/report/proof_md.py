"""report.md's first screen (verdict, culprit, the line, one-sentence mechanism, fix) and its
proof section (per root cause: the code at the deciding line, the failed call's traceback, the
counts that show the stall, what stayed unchanged between samples, what would prove it wrong).
Rendered from `Diagnosis.proofs` (analyse/proof.py) only; the job's text goes through the
untrusted-text helpers like every other section.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from debug_hang.analyse.proof import CodeAt, Proof
from debug_hang.untrusted import code_span, fence, md_cell, md_inline

if TYPE_CHECKING:
    from debug_hang.analyse.diagnosis import Diagnosis

GRAPH_FILE = "graph.svg"
HTML_FILE = "report.html"
ROLE_TEXT = {"culprit": "where the culprit is", "raised": "the line that raised", "waiting": "where its waiters are"}


def at_text(code: CodeAt) -> str:
    """`file:line` `code` (function, who): one line."""
    text = f"{code_span(code.where)} in {code_span(code.function)}"
    if code.code:
        text += f": {code_span(code.code, 120)}"
    return text


def first_screen(diag: Diagnosis) -> Iterator[str]:
    """The top cause in four lines, the links to the picture and the page, then the proof below."""
    if not diag.proofs:
        return
    proof, cause = diag.proofs[0], diag.causes[0]
    label = "Culprit" if diag.verdict == "hang" else "Candidate"
    yield f"- **{label}**: {md_inline(proof.culprit)} — `{cause.pattern}`, confidence {cause.confidence:.2f}"
    if proof.deciding is not None:
        yield (f"- **Line**: {at_text(proof.deciding)} ({ROLE_TEXT.get(proof.deciding.role, proof.deciding.role)}) — "
               f"{code_span(proof.deciding.file)}")
    yield f"- **Mechanism**: {md_inline(proof.mechanism, 400)}"
    if proof.fix:
        yield f"- **Fix**: {md_inline(proof.fix, 300)}"
    yield (f"- Proof below ([Proof](#proof)); the wait-for graph: [{GRAPH_FILE}]({GRAPH_FILE}); "
           f"all of it as one page: [{HTML_FILE}]({HTML_FILE})")
    yield ""


def proof_lines(diag: Diagnosis) -> Iterator[str]:
    if not diag.proofs:
        return
    yield "## Proof"
    for i, proof in enumerate(diag.proofs[:3], 1):
        yield from _one(i, proof)
    yield ""


def _one(i: int, proof: Proof) -> Iterator[str]:
    yield f"### {i}. `{proof.pattern}`: {md_inline(proof.culprit, 200)}"
    for code in proof.code:
        yield f"- {_upper(ROLE_TEXT.get(code.role, code.role))} ({md_inline(code.who, 80)}): {at_text(code)}"
        if code.context:
            yield from fence(code.context, "python job-source", indent="  ")
    failure = proof.failure
    if failure is not None:
        call = f"{code_span(failure.call)} " if failure.call else ""
        yield (f"- Failure: {call}{md_cell(failure.who, 80)}: {code_span(failure.exception, 200)} "
               f"(from the {md_cell(failure.source)})")
        if failure.traceback:
            yield from fence(failure.traceback, "text job-output", indent="  ")
    if proof.calls:
        yield "- Calls: " + "; ".join(md_inline(c.text(), 160) for c in proof.calls)
    for sign in proof.last_signs:
        when = "" if sign.seconds_before is None else (
            " (in the window)" if sign.seconds_before == 0 else f" ({sign.seconds_before:.1f}s before the window)")
        if sign.source == "log":
            yield f"- Last printed by {md_inline(sign.who, 80)}{when}: {code_span(sign.text, 200)}"
        else:
            yield f"- {_upper(md_inline(sign.text, 200))}{when.replace('window', 'first reading')}"
    if proof.unchanged:
        yield "- Unchanged between the samples: " + "; ".join(md_inline(line, 300) for line in proof.unchanged)
    yield f"- **Would prove it wrong**: {md_inline(proof.disproved_by, 300)}"


def _upper(text: str) -> str:
    return text[:1].upper() + text[1:]
