"""The stdout summary of `debug-hang diagnose`: the lines after the verdict, bounded."""

from __future__ import annotations

from debug_hang.analyse import next_steps
from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.analyse.failures import tool_problem


def full_summary(diag: Diagnosis) -> str:
    """The diagnosis' summary, with a failure of the tool itself (a version mismatch, a helper of
    its own that failed) said first: it is what the reader must fix before reading the rest."""
    problem = tool_problem(diag)
    return f"{problem.headline} {diag.summary}" if problem is not None else diag.summary


def fix_line(diag: Diagnosis) -> str | None:
    """The fix of the tool's own failure, for the line after the summary (None: no such failure)."""
    problem = tool_problem(diag)
    return f"fix: {problem.fix}" if problem is not None else None


def summary_lines(diag: Diagnosis) -> list[str]:
    """The stdout summary after the verdict: each cause with what to read next, the job's code,
    the next command when inconclusive (paths relative to the skill folder, printed last)."""
    guide = next_steps.guide(diag)
    lines = []
    for cause, g in zip(diag.causes[:3], guide.causes, strict=False):
        lines.append(f"  - {cause.pattern}: {', '.join(c.label() for c in cause.culprits)} (confidence {cause.confidence:.2f})")
        done = g.finished_call
        if done is not None:
            lines.append(f"    {done.describe()}")
        if "#" in g.pattern_doc or g.case:
            lines.append(f"    read: {g.pattern_doc}" + (f"  case: {g.case}" if g.case else ""))
    code = guide.job_code
    if code is not None and (code.entrypoint or code.working_dir):
        lines.append("code: " + "; ".join(x for x in (
            code.entrypoint, f"working_dir {code.working_dir}" if code.working_dir else None) if x))
    if guide.next_command:
        lines.append(f"next: {guide.next_command}")
        lines.append(f"  ({guide.next_why})")
    if guide.causes or guide.next_command:
        lines.append(f"skill folder: {guide.references_root}")
    return lines
