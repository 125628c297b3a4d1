"""`debug-hang match` / scripts/match_patterns.py: classify every thread by what it waits for."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from debug_hang.analyse.patterns import ProcessVerdict, catalog, load_catalog, match_process
from debug_hang.errors import EXIT_CODES_HELP, EXIT_OK, BadInputError
from debug_hang.model import STACKS_SCHEMA, Process, stacks_from_dict

MATCHES_SCHEMA = "debug-hang/matches/v1"

DESCRIPTION = """Match stacks against the hang-pattern catalog (references/patterns.yaml).

INPUT is a parse_stacks.py JSON document (debug-hang/stacks/v1), a diagnose output folder, or any
stack dump parse_stacks.py reads (py-spy text/JSON, ray stack, faulthandler); `-` reads stdin.
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
    last: dict[tuple[str | None, int | None], Process] = {}
    for proc in processes:
        key = (proc.node_id, proc.pid)
        if key not in last or proc.sample >= last[key].sample:
            last[key] = proc
    return list(last.values())


def to_document(verdicts: list[ProcessVerdict], show_all: bool) -> dict[str, Any]:
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
        out.append({"pid": p.pid, "title": p.title, "node_id": p.node_id, "actor_class": p.actor_class,
                    "rank": p.rank, "verdict": v.verdict, "pattern": v.pattern, "threads": threads})
    counts = Counter(v.pattern or v.verdict for v in verdicts)
    return {"schema": MATCHES_SCHEMA, "summary": dict(counts.most_common()), "processes": out}


def render_summary(doc: dict[str, Any]) -> str:
    lines = [f"{len(doc['processes'])} process(es): " + ", ".join(f"{k} ×{n}" for k, n in doc["summary"].items())]
    for proc in doc["processes"]:
        lines.append(f"pid {proc['pid']} {proc['title'] or ''} → {proc['verdict']}"
                     f"{' on ' + proc['pattern'] if proc['pattern'] and proc['pattern'] != 'unknown' else ''}")
        for t in proc["threads"]:
            f = t.get("user_frame") or t.get("frame") or {}
            where = f"{f.get('function')} ({Path(str(f.get('file'))).name}:{f.get('line')})" if f else "?"
            lines.append(f"    [{t['pattern']} {t['confidence']:.2f}] {t['name'] or t['thread_id']}: {where}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    patterns = load_catalog(args.catalog) if args.catalog else None
    processes = latest_samples(load_processes(args.input))
    if not processes:
        raise BadInputError(f"{args.input}: no stacks found")
    verdicts = [match_process(p, patterns) for p in processes[: args.max_processes]]
    doc = to_document(verdicts, args.all)
    if len(processes) > args.max_processes:
        doc["truncated"] = f"{len(processes) - args.max_processes} more processes not shown (--max-processes)"
    print(json.dumps(doc, indent=1) if args.format == "json" else render_summary(doc))
    return EXIT_OK
