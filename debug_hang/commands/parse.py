"""The command line of parse_stacks.py: read stack dumps of any format, print the stacks/v1
document or a bounded readable summary, optionally grouped with the outliers named."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from debug_hang.errors import EXIT_CODES_HELP, EXIT_OK, DebugHangError, UsageError
from debug_hang.model import STACKS_SCHEMA, Frame, Process, process_to_dict, stacks_to_dict
from debug_hang.parse.aggregate import (
    IDLE_SIGNATURE,
    AggregateOptions,
    Aggregation,
    Group,
    Normalizer,
    aggregate,
    short_file,
)
from debug_hang.parse.parsers import FORMATS_HELP, parse_path

PROG = "parse_stacks.py"
# An agent's harness cuts tool output at 10-30K characters: stay under the lowest common cut.
DEFAULT_MAX_CHARS = 20_000
DEFAULT_SUMMARY_GROUPS = 20
# Members listed per group in the summary; the JSON lists them all.
SUMMARY_MEMBERS = 8
# Frames shown per stack in the summary (innermost first); the JSON has every frame.
SUMMARY_FRAMES = 12
MAX_WARNINGS_SHOWN = 20
# Above this many processes the JSON is written compact and one process at a time: json.dump (and
# any indentation) uses json's pure-Python encoder (20k processes: 3.5 CPU s and 116 MB indented).
COMPACT_JSON_OVER = 1000
# Roles outside Ray are command lines: clip them in the summary.
ROLE_CHARS = 60

EPILOG = f"""{FORMATS_HELP}

output:
  --format json     the debug-hang/stacks/v1 document on stdout ({{"schema", "meta",
                    "processes"}}); with --group also "aggregate": {{"groups", "outliers", ...}};
                    indented, or compact above {COMPACT_JSON_OVER} processes
  --format summary  readable text, cut at --max-chars characters (it says what was cut)
  Warnings (a dump cut short, skipped lines or files) go to stderr, one line each.

examples:
  {PROG} stacks.txt --format summary --group
  {PROG} /tmp/diagnose-out/ --group > stacks.json
  ray stack 2>&1 | {PROG} - --format summary --group

{EXIT_CODES_HELP}"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Read stack dumps in any format responders paste (py-spy text or JSON, `ray stack`,\n"
            "faulthandler, tracebacks, sys._current_frames() dumps, gdb/pstack/eu-stack/lldb\n"
            "backtraces, NCCL watchdog lines, a diagnose folder) into one model; with --group, fold identical stacks\n"
            "across processes and threads into groups and name the processes whose stacks differ\n"
            "from their peers (the odd rank of a collective hang)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", metavar="FILE|DIR|-",
                        help="a dump file, a folder of dumps (a diagnose output folder's "
                             "stacks.json is used alone), or - for stdin")
    parser.add_argument("--format", choices=("json", "summary"), default="json",
                        help="json: the stacks/v1 document (default); summary: readable text")
    parser.add_argument("--group", action="store_true",
                        help="group identical stacks and list the outlier processes")
    parser.add_argument("--show-housekeeping", action="store_true",
                        help="also show Ray's own threads (GC, log and error listeners, idle "
                             "main loop, idle thread pools, gRPC, event loops waiting in select)")
    parser.add_argument("--lines", action="store_true",
                        help="stacks that wait at different line numbers are different groups")
    parser.add_argument("--native", action="store_true",
                        help="native frames are part of a stack's identity (they are ignored "
                             "by default: dumps with and without --native then group together)")
    parser.add_argument("--max-groups", type=int, default=None, metavar="N",
                        help=f"groups to show (summary default {DEFAULT_SUMMARY_GROUPS}, "
                             "JSON default all)")
    parser.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS, metavar="N",
                        help=f"cut the summary at N characters (default {DEFAULT_MAX_CHARS})")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, message already printed)
        return int(exc.code or 0) if isinstance(exc.code, int) or exc.code is None else 2
    try:
        return _run(args, sys.stdout, sys.stderr)
    except DebugHangError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.max_groups is not None and args.max_groups < 0:
        raise UsageError("--max-groups must be 0 or more")
    if args.max_chars < 200:
        raise UsageError("--max-chars must be at least 200")
    if args.input == "-" and sys.stdin is not None and sys.stdin.isatty():
        raise UsageError("reading stdin, which is a terminal: pipe a dump in "
                         "(`ray stack 2>&1 | parse_stacks.py -`) or give a FILE or DIR")
    warnings: list[str] = []
    processes = parse_path(args.input, warnings)
    _print_warnings(warnings, err)
    options = AggregateOptions(lines=args.lines, show_housekeeping=args.show_housekeeping,
                               native=args.native)
    agg = aggregate(processes, options) if (args.group or args.format == "summary") else None
    if args.format == "json":
        meta = _meta(args.input, processes, warnings)
        if len(processes) > COMPACT_JSON_OVER:
            doc: dict[str, Any] = {"schema": STACKS_SCHEMA, "meta": meta, "processes": processes}
        else:
            doc = stacks_to_dict(processes, meta)
        if args.group and agg is not None:
            doc["aggregate"] = agg.to_dict(max_groups=args.max_groups)
        if len(processes) > COMPACT_JSON_OVER:
            write_compact(doc, out)
        else:
            json.dump(doc, out, indent=1)
        out.write("\n")
    else:
        assert agg is not None
        max_groups = DEFAULT_SUMMARY_GROUPS if args.max_groups is None else args.max_groups
        lines = summary_lines(args.input, processes, agg, warnings, group=args.group,
                              max_groups=max_groups)
        write_bounded(lines, out, args.max_chars)
    return EXIT_OK


def write_compact(doc: dict[str, Any], out: TextIO) -> None:
    """The document without indentation, one process at a time: `json.dumps` (C encoder, ~6x
    faster than `json.dump`'s Python one) on bounded pieces; `processes` may hold `Process`
    objects, turned into their JSON form one by one (memory stays at one process)."""
    out.write("{")
    for i, (key, value) in enumerate(doc.items()):
        out.write(("," if i else "") + json.dumps(key) + ":")
        if key == "processes":
            out.write("[")
            for j, proc in enumerate(value):
                row = process_to_dict(proc) if isinstance(proc, Process) else proc
                out.write(("," if j else "") + json.dumps(row, separators=(",", ":")))
            out.write("]")
        else:
            out.write(json.dumps(value, separators=(",", ":")))
    out.write("}")


def _meta(source: str, processes: list[Process], warnings: list[str]) -> dict[str, Any]:
    return {
        "input": source,
        "formats": dict(sorted(Counter(p.source or "unknown" for p in processes).items())),
        "threads": sum(len(p.threads) for p in processes),
        "warnings": warnings,
    }


def _print_warnings(warnings: list[str], err: TextIO) -> None:
    for w in warnings[:MAX_WARNINGS_SHOWN]:
        print(f"{PROG}: warning: {w}", file=err)
    if len(warnings) > MAX_WARNINGS_SHOWN:
        print(f"{PROG}: warning: {len(warnings) - MAX_WARNINGS_SHOWN} more warnings not shown "
              "(all are in the JSON output's meta.warnings)", file=err)


def write_bounded(lines: Iterable[str], out: TextIO, max_chars: int) -> None:
    """Write lines until `max_chars`, then one line saying how much was left out."""
    used = 0
    pending = iter(lines)
    for line in pending:
        if used + len(line) + 1 > max_chars - 160:
            rest = 1 + sum(1 for _ in pending)
            out.write(f"[output cut at {max_chars} characters: {rest} more line(s) not shown; "
                      "raise --max-chars, lower --max-groups, or use --format json]\n")
            return
        out.write(line + "\n")
        used += len(line) + 1


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _frame_text(f: Frame) -> str:
    file = short_file(f.file) if f.file else "?"
    where = file if f.line is None else f"{file}:{f.line}"
    return f"{f.function} ({where})"


def _who(proc_pid: int | None, role: str | None, rank: int | None, node: str | None) -> str:
    text = f"pid {proc_pid}" if proc_pid is not None else "pid ?"
    if role:
        text = f"{role} {text}"
    if rank is not None:
        text += f" rank {rank}"
    if node:
        text += f" node {node[:12]}"
    return text


def summary_lines(source: str, processes: list[Process], agg: Aggregation,
                  warnings: list[str], group: bool, max_groups: int) -> Iterator[str]:
    """The readable summary, one line at a time (testable without capturing stdout)."""
    formats = Counter(p.source or "unknown" for p in processes)
    yield (f"{len(processes)} processes, {agg.threads} threads from {source} "
           f"(formats: {', '.join(f'{k} {v}' for k, v in sorted(formats.items()))})")
    failed = [p for p in processes if p.error]
    for p in failed[:5]:
        yield f"  dump failed for pid {p.pid} ({p.title or '?'}): {p.error}"
    if len(failed) > 5:
        yield f"  ... and {len(failed) - 5} more failed dumps"
    reported = [p for p in processes if p.collective]
    if reported:
        yield "collectives PyTorch reported (TORCH_DISTRIBUTED_DEBUG=DETAIL mismatch): " + "; ".join(
            f"rank {p.rank} {p.collective.get('op', '?')} seq {p.collective.get('sequence', '?')}"
            f" shapes [{p.collective.get('shapes', '?')}]" for p in reported[:16] if p.collective)
    if warnings:
        yield f"{len(warnings)} warning(s) on stderr"
    if agg.hidden:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(agg.hidden.items(), key=lambda kv: -kv[1]))
        verb = "shown, marked [housekeeping]" if agg.options.show_housekeeping else \
            "hidden (--show-housekeeping shows them)"
        yield f"Ray housekeeping threads {verb}: {kinds}"
    yield ""
    if group:
        yield from _outlier_lines(agg)
        yield from _group_lines(agg, max_groups)
    else:
        yield from _process_lines(processes, agg)


def _outlier_lines(agg: Aggregation) -> Iterator[str]:
    if agg.outliers:
        yield (f"OUTLIERS: {len(agg.outliers)} process(es) whose stacks differ from the majority "
               "of their role (fewest alike first: the suspects)")
        for o in agg.outliers:
            role = _clip(o.role, ROLE_CHARS)
            yield (f"  {_who(o.pid, role, o.rank, o.node)}: {o.alike} of {o.role_size} "
                   f"{role} process(es) look like this; {o.majority} share the majority stacks"
                   f"  [title {_clip(o.title or '?', ROLE_CHARS)}]")
            if not o.frames:
                yield f"      {IDLE_SIGNATURE} (its peers are busy elsewhere)"
            for f in o.frames[:6]:
                yield f"      {_frame_text(f)}"
            if o.group_ids:
                yield f"      groups: {', '.join(o.group_ids)}"
    else:
        compared = [r for r, n in agg.roles.items() if n >= 3]
        yield (f"OUTLIERS: none (roles compared: {', '.join(sorted(compared)) or 'none with 3+ '}"
               "processes)")
    for role in agg.no_majority:
        yield f"  role {role}: its processes split evenly between different stacks (no majority)"
    yield ""


def _group_lines(agg: Aggregation, max_groups: int) -> Iterator[str]:
    shown = agg.groups[:max_groups]
    yield (f"GROUPS: {len(agg.groups)} distinct stack(s), largest first"
           + (f"; showing {len(shown)} (--max-groups)" if len(shown) < len(agg.groups) else ""))
    for i, g in enumerate(shown, 1):
        yield from _one_group(i, g)
    if len(shown) < len(agg.groups):
        rest = agg.groups[len(shown):]
        yield (f"... {len(rest)} more group(s) with {sum(g.size for g in rest)} thread(s) not "
               "shown (raise --max-groups)")


def _one_group(i: int, g: Group) -> Iterator[str]:
    states = ", ".join(f"{k} {v}" for k, v in sorted(g.states().items()))
    tag = f" [housekeeping: {g.housekeeping}]" if g.housekeeping else ""
    yield f"#{i} {g.size} thread(s) in {g.processes} process(es) ({states}) id {g.id}{tag}"
    by_role = Counter(_clip(m.role or m.title or "?", ROLE_CHARS) for m in g.members)
    roles = ", ".join(f"{r} x{n}" for r, n in by_role.most_common(4))
    if len(by_role) > 4:
        roles += f", +{len(by_role) - 4} more"
    yield f"   roles: {roles}"
    members = ", ".join(
        _who(m.pid, None, m.rank, m.node) + (f" [{m.thread_name}]" if m.thread_name else "")
        for m in g.members[:SUMMARY_MEMBERS])
    more = f" ... +{g.size - SUMMARY_MEMBERS} more" if g.size > SUMMARY_MEMBERS else ""
    yield f"   members: {members}{more}"
    if not g.frames:
        yield f"      {IDLE_SIGNATURE}"
    for f in g.frames[:SUMMARY_FRAMES]:
        yield f"      {_frame_text(f)}"
    if len(g.frames) > SUMMARY_FRAMES:
        yield f"      ... {len(g.frames) - SUMMARY_FRAMES} outer frame(s)"


def _process_lines(processes: list[Process], agg: Aggregation) -> Iterator[str]:
    norm = Normalizer(agg.options)
    yield "PROCESSES (frames innermost first; Ray wrapper frames left out; --group folds them)"
    for p in processes:
        cls, meth = p.title_parts
        what = f" [{cls}.{meth}]" if cls and meth else (f" [{cls}]" if cls else "")
        py = f" python {p.python}" if p.python else ""
        yield f"pid {p.pid if p.pid is not None else '?'}: {p.title or '?'}{what}{py} ({p.source})"
        if p.error:
            yield f"   dump failed: {p.error}"
        hidden = 0
        system = norm.system_process(p.title)
        for t in p.threads:
            _, kept, kind = norm.classify(t, system)
            if kind is not None and not agg.options.show_housekeeping:
                hidden += 1
                continue
            state = "active" if t.active else ("idle" if t.active is False else "?")
            gil = "+gil" if t.owns_gil else ""
            tag = f" [housekeeping: {kind}]" if kind else ""
            yield f"   thread {t.thread_id} {t.name or ''} ({state}{gil}){tag}"
            inner = next((f for f in t.frames if f.native and not f.function.startswith("0x")), None)
            if t.frames and t.frames[0].native and inner is not None and not agg.options.native:
                yield f"      [native] {_frame_text(inner)}"
            for f in kept[:SUMMARY_FRAMES]:
                yield f"      {_frame_text(f)}"
            if len(kept) > SUMMARY_FRAMES:
                yield f"      ... {len(kept) - SUMMARY_FRAMES} outer frame(s)"
        if hidden:
            yield f"   ({hidden} housekeeping thread(s) hidden)"
