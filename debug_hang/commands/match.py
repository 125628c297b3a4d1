"""`debug-hang match` / scripts/match_patterns.py: classify every thread by what it waits for."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from debug_hang.analyse.collectives import mismatches, progress_findings
from debug_hang.analyse.pattern_ids import PatternId
from debug_hang.analyse.patterns import Pattern, ProcessVerdict, ThreadMatch, catalog, load_catalog, match_process
from debug_hang.errors import EXIT_CODES_HELP, EXIT_OK, BadInputError
from debug_hang.model import STACKS_SCHEMA, Process, stacks_from_dict

MATCHES_SCHEMA = "debug-hang/matches/v1"

DESCRIPTION = """Match stacks against the hang-pattern catalog (references/patterns.yaml).

INPUT is a parse_stacks.py JSON document (debug-hang/stacks/v1), a diagnose output folder, or any
stack dump parse_stacks.py reads (py-spy text/JSON, ray stack, faulthandler, tracebacks, gdb,
eu-stack, lldb, NCCL watchdog lines; see parse_stacks.py --help); `-` reads stdin.
For each thread: the matching pattern, its confidence and the deciding frame; for each process a
verdict: blocked (on a pattern), busy, idle, unknown. Threads that match nothing are `unknown`,
never forced into a pattern. Ray housekeeping threads are hidden unless --all."""

EPILOG = f"""examples:
  parse_stacks.py dump.txt --format json | match_patterns.py -
  match_patterns.py /tmp/ray_hang_diag_20261129_101500        # a diagnose output folder
  match_patterns.py stacks.json --format summary --all

{EXIT_CODES_HELP}"""


def build_parser(prog: str = "match_patterns.py") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="stacks JSON, dump file, diagnose folder, or - for stdin")
    p.add_argument("--format", choices=("json", "summary"), default="json", help="output format (default json)")
    p.add_argument("--all", action="store_true", help="also show benign threads (Ray housekeeping, idle workers)")
    p.add_argument("--catalog", help="use another pattern catalog YAML (default references/patterns.yaml)")
    p.add_argument("--max-processes", type=int, default=200, help="cap on processes printed (default 200)")
    return p


def load_processes(source: str) -> list[Process]:
    """Read INPUT: stacks/v1 JSON directly, anything else through the stack parsers."""
    if source != "-":
        path = Path(source)
        if path.is_dir() and (path / "stacks.json").exists():
            path = path / "stacks.json"
        if path.is_file() and path.suffix == ".json":
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError, OSError):
                doc = None
            if isinstance(doc, dict) and doc.get("schema") == STACKS_SCHEMA:
                try:
                    return stacks_from_dict(doc)
                except ValueError as exc:
                    raise BadInputError(f"{source}: {exc}") from None
    from debug_hang.parse.parsers import parse_path

    return parse_path(source)


def latest_samples(processes: list[Process]) -> list[Process]:
    """The last dump of each process; processes of unknown pid (pasted tracebacks, frame lists,
    ranks known only by number) are each their own process."""
    last: dict[tuple[str | None, int | None], Process] = {}
    for proc in processes:
        key = (proc.node_id, proc.pid if proc.pid is not None else -id(proc))
        if key not in last or proc.sample >= last[key].sample:
            last[key] = proc
    return list(last.values())


def to_document(verdicts: list[ProcessVerdict], show_all: bool,
                reasons: dict[int, str] | None = None) -> dict[str, Any]:
    """The matches document; `reasons` (rank → text) explain verdicts not read from a stack."""
    cat = catalog()
    out = []
    for v in verdicts:
        threads = []
        for thread, match in v.threads:
            benign = match.pattern in cat and cat[match.pattern].kind == "benign"
            if benign and not show_all:
                continue
            threads.append({"thread_id": thread.thread_id, "os_thread_id": thread.os_thread_id,
                            "name": thread.name, "active": thread.active, **match.to_dict()})
        p = v.process
        row: dict[str, Any] = {"pid": p.pid, "title": p.title, "node_id": p.node_id, "actor_class": p.actor_class,
                               "rank": p.rank, "verdict": v.verdict, "pattern": v.pattern, "threads": threads}
        if p.collective:
            row["collective"] = p.collective
        if reasons and p.rank in reasons:
            row["reason"] = reasons[p.rank]
        out.append(row)
    counts = Counter(v.pattern or v.verdict for v in verdicts)
    return {"schema": MATCHES_SCHEMA, "summary": dict(counts.most_common()), "processes": out}


def render_summary(doc: dict[str, Any]) -> str:
    lines = [f"{len(doc['processes'])} process(es): " + ", ".join(f"{k} ×{n}" for k, n in doc["summary"].items())]
    for proc in doc["processes"]:
        who = f"pid {proc['pid'] if proc['pid'] is not None else '?'}"
        if proc.get("rank") is not None:
            who += f" rank {proc['rank']}"
        lines.append(f"{who} {proc['title'] or ''} → {proc['verdict']}"
                     f"{' on ' + proc['pattern'] if proc['pattern'] and proc['pattern'] != 'unknown' else ''}")
        if proc.get("reason"):
            lines.append(f"    {proc['reason']}")
        for t in proc["threads"]:
            f = t.get("user_frame") or t.get("frame") or {}
            where = f"{f.get('function')} ({Path(str(f.get('file'))).name}:{f.get('line')})" if f else "?"
            lines.append(f"    [{t['pattern']} {t['confidence']:.2f}] {t['name'] or t['thread_id']}: {where}")
    return "\n".join(lines)


def collective_mismatch_match(verdict: ProcessVerdict) -> ThreadMatch:
    """The verdict of a rank PyTorch reported in a collective mismatch: `collective-mismatch`,
    decided by the rank's collective frame when its stack is in the input (none otherwise)."""
    main = verdict.main
    if main is not None and main.pattern == "collective-wait":
        return ThreadMatch("collective-mismatch", 0.95, main.frame, main.frame_index,
                           also=["collective-wait"], user_frame=main.user_frame)
    return ThreadMatch("collective-mismatch", 0.9, None, None)


def collective_progress_match(verdict: ProcessVerdict, pattern: PatternId) -> ThreadMatch:
    """A rank the NCCL watchdog / desync report / monitored_barrier facts place: `collective-wait`
    keeps the rank's collective frame when its stack shows one; `collective-skipped` keeps the
    frame where its stack waits instead (what keeps it out of the collective)."""
    main = verdict.main
    frame, index, user = (main.frame, main.frame_index, main.user_frame) if main is not None else (None, None, None)
    also: list[PatternId] = [main.pattern] if main is not None and main.pattern != "unknown" \
        and main.pattern != pattern else []
    return ThreadMatch(pattern, 0.9, frame, index, also=also, user_frame=user)


def fact_only_ranks(processes: list[Process], progress: dict[int, tuple[PatternId, str]]) -> list[ProcessVerdict]:
    """Rows for ranks the facts name that the input has no process for (a rank that never reports)."""
    present = {p.rank for p in processes if p.rank is not None}
    return [ProcessVerdict(Process(rank=rank, source="collective-facts"), [], "blocked",
                           ThreadMatch(pattern, 0.8, None, None))
            for rank, (pattern, _) in sorted(progress.items()) if rank not in present]


def classify(processes: list[Process], patterns: list[Pattern] | None = None,
             max_processes: int | None = None) -> tuple[list[ProcessVerdict], dict[int, str]]:
    """Each process's verdict, with what the collective facts of the input say about its rank
    (a mismatch PyTorch reported, a watchdog's sequence numbers), and rank → why."""
    verdicts = [match_process(p, patterns) for p in processes[:max_processes]]
    reported = mismatches(processes)
    progress = progress_findings(processes)
    for v in verdicts:
        if v.process.rank in reported and v.process.collective:
            v.main = collective_mismatch_match(v)
            v.verdict = "blocked"
        elif v.process.rank in progress:
            v.main = collective_progress_match(v, progress[v.process.rank][0])
            v.verdict = "blocked"
    reasons = {**{r: why for r, (_, why) in progress.items()}, **reported}
    return verdicts + fact_only_ranks(processes, progress), reasons


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    patterns = load_catalog(args.catalog) if args.catalog else None
    processes = latest_samples(load_processes(args.input))
    if not processes:
        raise BadInputError(f"{args.input}: no stacks found")
    verdicts, reasons = classify(processes, patterns, args.max_processes)
    doc = to_document(verdicts, args.all, reasons)
    if len(processes) > args.max_processes:
        doc["truncated"] = f"{len(processes) - args.max_processes} more processes not shown (--max-processes)"
    print(json.dumps(doc, indent=1) if args.format == "json" else render_summary(doc))
    return EXIT_OK
