#!/usr/bin/env python3
"""The scoreboard of tests/data/native: for every recorded input, whether it parses (processes,
threads with frames) and whether each labelled thread is classified with the right mechanism at
the right frame (labels and their known misses: tests/data/native/labels.json).

    python tools/native_scoreboard.py            # the table, by dumper, then the misses
    python tools/native_scoreboard.py --json

`check()` is what tests/test_native.py asserts on.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from debug_hang.analyse.patterns import ProcessVerdict, ThreadMatch  # noqa: E402
from debug_hang.commands.match import classify, latest_samples  # noqa: E402
from debug_hang.errors import BadInputError  # noqa: E402
from debug_hang.model import Thread  # noqa: E402
from debug_hang.parse.parsers import parse_path  # noqa: E402

NATIVE = Path(__file__).resolve().parent.parent / "tests" / "data" / "native"
LABELS = NATIVE / "labels.json"


@dataclass
class Outcome:
    """One label on one file: met or not, and why not."""

    file: str
    select: str
    expected: list[str]
    frame: str | None
    got: list[str]
    hit: bool
    miss: str | None = None  # the label's recorded reason, when it is a known miss


@dataclass
class FileResult:
    file: str
    parsed: bool
    processes: int = 0
    threads: int = 0
    error: str | None = None
    outcomes: list[Outcome] = field(default_factory=list)


def labelled_files(labels: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """file (relative to tests/data/native) → its labels; a group's labels apply to its files."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, group in labels["groups"].items():
        files = [f"{name}/{f}.txt" for f in group["files"]] if "files" in group else \
            [name if name.endswith((".log", ".json")) else f"{name}.txt"]
        for rel in files:
            out.setdefault(rel, []).extend(group["labels"])
    return out


def _selected(verdicts: list[ProcessVerdict], select: str) -> list[tuple[Thread | None, ThreadMatch | None]]:
    kind, _, arg = select.partition(":")
    if kind == "rank":
        return [(None, v.main) for v in verdicts if v.process.rank == int(arg)]
    rows = [(t, m) for v in verdicts for t, m in v.threads if t.frames]
    if kind == "all":
        return list(rows)
    regex = re.compile(arg)
    if kind == "name":
        return [(t, m) for t, m in rows if t.name and regex.search(t.name)]
    return [(t, m) for t, m in rows if any(regex.search(f.function) for f in t.frames)]


def _meets(match: ThreadMatch | None, label: dict[str, Any]) -> bool:
    if match is None or match.pattern not in label["pattern"]:
        return False
    if label.get("frame") is None:
        pass
    elif match.frame is None or not re.search(label["frame"], match.frame.function):
        return False
    return not label.get("waits_for") or (match.waits_for is not None and label["waits_for"] in match.waits_for)


def score_file(rel: str, labels: list[dict[str, Any]]) -> FileResult:
    path = NATIVE / rel
    try:
        processes = latest_samples(parse_path(str(path), []))
    except BadInputError as exc:
        return FileResult(rel, False, error=str(exc))
    verdicts, _ = classify(processes)
    result = FileResult(rel, True, len(processes), sum(1 for p in processes for t in p.threads if t.frames))
    for label in labels:
        picked = _selected(verdicts, label["select"])
        got = [f"{m.pattern}@{m.frame.function if m.frame else None}" if m else "none" for _, m in picked]
        hit = len(picked) == label["count"] and all(_meets(m, label) for _, m in picked)
        result.outcomes.append(Outcome(rel, label["select"], label["pattern"], label.get("frame"), got, hit,
                                       label.get("miss")))
    return result


def recorded_inputs() -> list[str]:
    """Every recorded input file of tests/data/native (captures, reshaped pastes, torch logs)."""
    out = []
    for path in sorted(NATIVE.rglob("*")):
        rel = path.relative_to(NATIVE).as_posix()
        if path.is_file() and (path.suffix in (".txt", ".log") or path.name == "stacks.json") \
                and not rel.startswith("targets/") \
                and not path.name.startswith("commands"):
            out.append(rel)
    return out


def check() -> list[FileResult]:
    labels = labelled_files(json.loads(LABELS.read_text(encoding="utf-8")))
    return [score_file(rel, labels.get(rel, [])) for rel in recorded_inputs()]


def _dumper(rel: str) -> str:
    name = Path(rel).stem
    if rel.startswith("diagnose-native/"):
        return "diagnose --native (stacks.json)"
    return "torchrun log" if rel.startswith("torch/") else ("reshaped paste" if rel.startswith("reshaped/") else name)


def render(results: list[FileResult]) -> str:
    rows: dict[str, list[int]] = {}
    for r in results:
        row = rows.setdefault(_dumper(r.file), [0, 0, 0, 0])
        row[0] += 1
        row[1] += int(r.parsed and r.threads > 0 or any(o.got for o in r.outcomes))
        row[2] += sum(o.hit for o in r.outcomes)
        row[3] += len(r.outcomes)
    lines = ["| form (dumper) | files | parsed | labelled threads at the right frame |", "|---|---|---|---|"]
    for form, (files, parsed, hits, total) in sorted(rows.items()):
        lines.append(f"| {form} | {files} | {parsed} | {hits}/{total} |")
    files = len(results)
    hits = sum(o.hit for r in results for o in r.outcomes)
    total = sum(len(r.outcomes) for r in results)
    lines.append(f"| **all** | {files} | {sum(r.parsed for r in results)} | {hits}/{total} |")
    misses = [o for r in results for o in r.outcomes if not o.hit]
    if misses:
        lines += ["", "Misses:"]
        lines += [f"- {o.file} [{o.select}] expected {'/'.join(o.expected)} at {o.frame}, got {o.got}"
                  + (f" — {o.miss}" if o.miss else " — NOT A KNOWN MISS") for o in misses]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="one record per file instead of the table")
    args = p.parse_args(argv)
    results = check()
    if args.json:
        print(json.dumps([r.__dict__ | {"outcomes": [o.__dict__ for o in r.outcomes]} for r in results], indent=1))
    else:
        print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
