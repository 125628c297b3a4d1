"""Render the hang-pattern catalog (references/patterns.yaml) as references/patterns.md.

The catalog is the single source of truth; the Markdown page is generated from it, never edited
by hand:

    tools/catalog_doc.py --write        # references/patterns.md and debug_hang/analyse/pattern_ids.py
    tools/catalog_doc.py --check        # exit 1 when either is stale

`render()` returns the page and `render_ids()` the `PatternId` Literal module (so that a misspelt
pattern id in the code is a mypy error); tests check the shipped files equal them.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from debug_hang.analyse.patterns import CATALOG_PATH, KINDS, load_catalog  # noqa: E402
from debug_hang.errors import EXIT_OK, run_main  # noqa: E402

PROG = "tools/catalog_doc.py"
PAGE_PATH = CATALOG_PATH.parent / "patterns.md"
IDS_PATH = Path(__file__).resolve().parent.parent / "debug_hang" / "analyse" / "pattern_ids.py"
CASES_DIR = CATALOG_PATH.parent / "cases"
# A reference case names its root-cause pattern on a line of this shape (tools/make_reference_cases.py).
_CASE_PATTERN = re.compile(r"^\*\*Pattern\*\*: \[`([a-z0-9-]+)`\]", re.MULTILINE)

KIND_TEXT = {
    "symptom": "symptom — a process waits on something else: follow the edge to find why",
    "root-cause": "root cause — where a wait-for chain ends: the reason the job does not progress",
    "benign": "benign — Ray's own idle machinery: never a finding (hidden unless `--all`)",
}
DETECT_TEXT = {
    "stack": "from a thread's stack (py-spy, faulthandler, tracebacks; gdb, eu-stack, lldb for native frames)",
    "state": "from Ray state (tasks, actors, placement groups, resources)",
    "graph": "by the wait-for graph (cycles, collective peers, chain ends)",
}
EDGE_TEXT = {
    "submitted-tasks": "the unfinished tasks this process submitted (parent_task_id) and who runs them",
    "own-calls": "its own unfinished calls, when its poll loop waits on them (else the chain ends here)",
    "collective-peers": "the other ranks of the process group",
    "placement-group": "the job's PENDING placement groups",
    "queue-producers": "the producers (or consumers) of the queue: other actors, or threads of the same process",
    "child-process": "the child processes (dumped too)",
    "train-barrier": "the Ray Train ranks that have not reached the barrier",
    "lock-holder": "the process holding the OS file lock (by PID in /proc/locks, read on the node)",
    "socket-peer": "the one process at the other end of its TCP connections on its node that no Ray call explains (/proc)",
    "serve-replicas": "the replicas of the Serve deployment it has requests in flight at (Serve controller state, Serve metrics)",
    "dataset-operators": "the Ray Data operator whose output stopped and the actors and tasks running its work (dashboard Ray Data endpoint)",
    "pool-holders": "the threads of the same process that hold a slot of the pool (in its library's request, or job code that may release one)",
    "none": "nowhere: the chain ends here (lock and event holders are read from the same process's other threads)",
}


def _regex_words(regex: str) -> str:
    """A signature regex as a reader would say it: anchors and escapes dropped."""
    if regex in (".", ".*"):
        return "any"
    text = regex.strip()
    text = text.removeprefix("^").removesuffix("$")
    text = text.replace("(^|/)", "").replace("\\.", ".").replace("\\s*", " ").replace("\\s+", " ")
    text = text.replace("\\b", "").replace("\\(", "(")
    return text


def _rule_words(rule: dict[str, Any]) -> str:
    parts = ["a **native** frame" if rule.get("native") else "a Python frame"] if _has_native_words(rule) else []
    function = rule.get("function")
    if function and function not in (".", ".*"):
        parts.append(f"function `{_regex_words(function)}`")
    if rule.get("file") and rule["file"] not in (".", ".*"):
        parts.append(f"in a file matching `{_regex_words(rule['file'])}`")
    if rule.get("code"):
        parts.append(f"source line matching `{_regex_words(rule['code'])}`")
    for key, words in _RULE_CONDITIONS.items():
        if rule.get(key):
            parts.append(words)
    return " ".join(parts) if parts else "any frame"


_RULE_CONDITIONS = {
    "innermost": "(the innermost Python frame)",
    "below_python": "called directly by a Python frame",
    "below_job_code": "called directly by the job's own Python code",
    "without_python": "(only in a stack with no Python frame)",
    "without_native": "(only in a stack with no native frame)",
}


def _has_native_words(rule: dict[str, Any]) -> bool:
    """Rules are told Python from native only on patterns that have native rules (kept as they were
    for the Python-only patterns)."""
    return bool(rule.get("_native_pattern"))


def _signature_lines(raw: dict[str, Any]) -> Iterator[str]:
    stack = raw.get("stack") or {}
    states = raw.get("states") or []
    if raw["detect"] == "stack":
        where = "the innermost Python frame is" if stack.get("innermost") else "a frame on the stack is"
        yield f"- **Stack signature**: {where} one of:"
        native = any(r.get("native") for r in stack.get("frames") or [])
        for rule in stack.get("frames") or []:
            yield f"  - {_rule_words({**rule, '_native_pattern': native})}"
        for rule in stack.get("requires") or []:
            yield f"  - and the stack also holds a frame: {_rule_words(rule)}"
        if stack.get("requires_any"):
            yield ("  - and the stack also holds a frame of one of these kinds: "
                   + "; or ".join(_rule_words(rule) for rule in stack["requires_any"]))
        for rule in stack.get("excludes") or []:
            yield f"  - and no frame of the stack is: {_rule_words(rule)}"
        if native:
            yield ("  - (Python frames decide first; native frames when none does"
                   + ("; the deciding native frame is the outermost of the wait's native frames, the API called"
                      if stack.get("extend") else "") + ")")
        if stack.get("single_thread"):
            yield "  - and the dump shows every thread of the process, and it has only this one"
        if stack.get("gil_holder"):
            yield "  - read only on the thread holding the GIL while other threads of the process wait for it"
        if stack.get("active") is True:
            yield "  - and py-spy reports the thread **active** (running on CPU) in the sample"
        elif stack.get("active") is False:
            yield "  - and py-spy reports the thread **idle** (blocked)"
    elif raw["detect"] == "state":
        yield f"- **Signature**: no stack shows it; decided {DETECT_TEXT['state']}."
    else:
        yield f"- **Signature**: decided {DETECT_TEXT['graph']} from the symptoms of several processes."
    if states:
        yield f"- **Ray task/actor/group states**: {', '.join(f'`{s}`' for s in states)}"


def _cases_by_pattern(cases_dir: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    if not cases_dir.is_dir():
        return found
    for path in sorted(cases_dir.glob("*.md")):
        match = _CASE_PATTERN.search(path.read_text(encoding="utf-8"))
        if match:
            found.setdefault(match.group(1), []).append(path.name)
    return found


def _raw_patterns(path: Path) -> list[dict[str, Any]]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    patterns: list[dict[str, Any]] = doc["patterns"]
    return patterns


def render(catalog_path: Path = CATALOG_PATH, cases_dir: Path = CASES_DIR) -> str:
    """references/patterns.md, generated from the catalog (and the case files that cite a pattern)."""
    load_catalog(catalog_path)  # validates; raises BadInputError naming what is wrong
    return "\n".join(_lines(_raw_patterns(catalog_path), _cases_by_pattern(cases_dir))) + "\n"


def _lines(raws: list[dict[str, Any]], cases: dict[str, list[str]]) -> Iterator[str]:
    yield "# Hang patterns"
    yield ""
    yield "<!-- Generated from references/patterns.yaml by `tools/catalog_doc.py`; do not edit. -->"
    yield ""
    yield ("Every thread the tool classifies, every root cause it reports, is one of these patterns. Open "
           "this page when `diagnosis.json` or `match_patterns.py` names a pattern you need to act on: each "
           "section says what the pattern means, how it is recognised, where the wait leads (the next "
           "process to look at), the usual root causes and the fixes.")
    yield ""
    yield "Kinds:"
    for kind in KINDS:
        yield f"- {KIND_TEXT[kind]}"
    yield ""
    yield "| id | kind | detected | title |"
    yield "|---|---|---|---|"
    for raw in raws:
        yield f"| [`{raw['id']}`](#{raw['id']}) | {raw['kind']} | {raw['detect']} | {raw['title']} |"
    yield ""
    for raw in raws:
        yield f"## {raw['id']}"
        yield ""
        yield f"**{raw['title']}** — kind `{raw['kind']}`, detected {DETECT_TEXT[raw['detect']]}."
        yield ""
        yield f"- **What it means**: {str(raw['meaning']).strip()}"
        yield from _signature_lines(raw)
        yield f"- **Where the wait leads**: {raw['leads_to']}"
        if raw.get("disproved_by"):
            yield f"- **What would prove it wrong**: {raw['disproved_by']}"
        yield f"- **Edge followed by the wait-for graph**: `{raw['edge']}` — {EDGE_TEXT[raw['edge']]}"
        root_causes = raw.get("root_causes") or []
        if root_causes:
            yield "- **Root causes**:"
            for cause in root_causes:
                yield f"  - {cause}"
        fixes = raw.get("fixes") or []
        if fixes:
            yield "- **Fixes**:"
            for fix in fixes:
                yield f"  - {fix}"
        for ref in raw.get("references") or []:
            yield f"- **Reference**: {ref}"
        for case in cases.get(raw["id"], []):
            yield f"- **Recorded case**: [cases/{case}](cases/{case})"
        yield ""


def render_ids(path: Path = CATALOG_PATH) -> str:
    """debug_hang/analyse/pattern_ids.py: every catalog id as one Literal type."""
    ids = [p.id for p in load_catalog(path)]
    members = "".join(f'    "{i}",\n' for i in ids)
    return (f'"""Every pattern id of the catalog, as a type. Generated by {PROG} from references/patterns.yaml:\n'
            'do not edit (a test checks it is current)."""\n\n'
            "from typing import Literal\n\n"
            f"PatternId = Literal[\n{members}]\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Render references/patterns.yaml as Markdown (references/patterns.md) on stdout, "
                    "or write it and the PatternId module (debug_hang/analyse/pattern_ids.py).",
        epilog="examples:\n  tools/catalog_doc.py --write\n"
               "  tools/catalog_doc.py --check\n\n"
               "exit codes:\n  0  success (or --check: both files are current)\n"
               "  1  --check: a file differs from the catalog (run --write)\n"
               "  3  the catalog is invalid",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--catalog", type=Path, default=CATALOG_PATH,
                        help="catalog YAML (default references/patterns.yaml)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="compare with references/patterns.md and pattern_ids.py instead of printing; exit 1 when stale")
    mode.add_argument("--write", action="store_true", help="write references/patterns.md and pattern_ids.py")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    text = render(args.catalog)
    outputs = {PAGE_PATH: text, IDS_PATH: render_ids(args.catalog)}
    if args.write:
        for path, content in outputs.items():
            path.write_text(content, encoding="utf-8")
        return EXIT_OK
    if args.check:
        stale = [path for path, content in outputs.items()
                 if (path.read_text(encoding="utf-8") if path.exists() else "") != content]
        for path in stale:
            print(f"{path} is stale: run `{PROG} --write`", file=sys.stderr)
        return 1 if stale else EXIT_OK
    sys.stdout.write(text)
    return EXIT_OK


if __name__ == "__main__":
    run_main(main, PROG)
