"""The pattern catalog is valid, closed, and classifies real recorded dumps correctly."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args

import pytest
from conftest import ROOT

from debug_hang.analyse.patterns import CATALOG_PATH, catalog, load_catalog, match_process
from debug_hang.commands.match import load_processes
from debug_hang.errors import BadInputError

pytestmark = pytest.mark.unit
DUMPS = ROOT / "tests" / "data" / "dumps"


def test_catalog_loads_and_covers_the_required_patterns() -> None:
    ids = set(catalog())
    required = {
        "ray-get-wait", "actor-call-cycle", "actor-call-queued", "infeasible-resource", "resource-starvation",
        "placement-group-infeasible", "pg-ready-wait", "poll-never-satisfied", "queue-get-wait", "lock-wait",
        "lock-order-deadlock", "async-loop-blocked", "collective-wait", "collective-mismatch", "collective-skipped",
        "peer-rank-dead", "rendezvous-wait", "child-process-wait", "dataloader-wait", "io-wait", "busy-loop",
        "idle-worker", "ray-housekeeping", "producer-gone", "child-process-hang", "idle-no-work",
    }
    assert required <= ids, required - ids
    for pattern in catalog().values():
        assert pattern.meaning and pattern.leads_to and pattern.title
        if pattern.kind == "root-cause":
            assert pattern.fixes, pattern.id
            # The report's proof ends with the observation that would show the finding wrong.
            assert pattern.disproved_by, f"{pattern.id}: a root cause needs disproved_by"


# Every closed vocabulary the analysis writes as hyphenated string literals.
def _vocabularies() -> set[str]:
    from debug_hang.analyse import flight_recorder
    from debug_hang.analyse.busy import BusyState, LoopKind
    from debug_hang.analyse.diagnosis import Verdict
    from debug_hang.analyse.graph.model import EdgeReason
    from debug_hang.analyse.pattern_ids import PatternId
    from debug_hang.analyse.patterns import DETECTS, EDGES, KINDS
    from debug_hang.collect.state import ProgressReading
    from debug_hang.model import ErrorKind, StackSource

    def args(t: object) -> set[str]:
        out: set[str] = set()
        for a in get_args(t):
            out |= args(a) if get_args(a) else {a}
        return out

    mode = ProgressReading.__dataclass_fields__["mode"].type
    modes = set(re.findall(r"[\"']([a-z-]+)[\"']", str(mode)))
    return (args(PatternId) | args(EdgeReason) | args(Verdict) | args(ErrorKind) | args(StackSource) | args(LoopKind)
            | args(BusyState)
            | set(EDGES) | set(KINDS)
            | set(DETECTS) | set(flight_recorder.KINDS) | modes | {"utf-8", "debug-hang"})


def test_pattern_ids_type_is_the_catalog() -> None:
    from debug_hang.analyse.pattern_ids import PatternId

    assert list(get_args(PatternId)) == list(catalog()), "run tools/catalog_doc.py --write"


def test_every_hyphenated_literal_in_the_analysis_is_a_known_word() -> None:
    # A misspelt pattern id, verdict, edge reason or error kind anywhere in the analysis, the
    # renderers or the pipeline is a string no vocabulary holds (mypy sees assignments and
    # comparisons; this sees the rest: membership tuples, dict keys, defaults).
    known = _vocabularies()
    modules = [*(ROOT / "debug_hang" / "analyse").rglob("*.py"), *(ROOT / "debug_hang" / "report").glob("*.py"),
               ROOT / "debug_hang" / "commands" / "match.py", ROOT / "debug_hang" / "pipeline.py"]
    word = re.compile(r"^[a-z]+(?:-[a-z0-9]+)+$")
    unknown: dict[str, str] = {}
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and word.match(node.value) \
                    and node.value not in known:
                unknown.setdefault(node.value, f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not unknown, f"words in no vocabulary (a typo, or a new word to add to its Literal): {unknown}"


def test_the_node_side_error_kinds_are_error_kinds() -> None:
    from debug_hang.collect import nodes
    from debug_hang.model import ERROR_KINDS
    from debug_hang.probe import commands, node_probe, pyspy

    kinds = {v for mod in (pyspy, node_probe, commands, nodes) for k, v in vars(mod).items()
             if k.isupper() and isinstance(v, str) and re.fullmatch(r"[a-z]+(?:-[a-z]+)+", v) and k != "NAMESPACE"}
    assert kinds <= ERROR_KINDS, f"kinds the node side reports that ErrorKind lacks: {kinds - ERROR_KINDS}"


def test_a_broken_catalog_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: debug-hang/patterns/v1\npatterns:\n  - id: x\n    kind: nonsense\n")
    with pytest.raises(BadInputError, match="kind, detect and edge"):
        load_catalog(bad)
    bad.write_text("schema: [unclosed")
    with pytest.raises(BadInputError, match="not valid YAML"):
        load_catalog(bad)
    # an unquoted list item with ': ' in it parses as a mapping, not text
    bad.write_text("schema: debug-hang/patterns/v1\npatterns:\n  - {id: x, kind: symptom, detect: state, edge: none, "
                   "title: t, meaning: m, leads_to: l}\n    \n")
    good = bad.read_text()
    bad.write_text(good.replace("leads_to: l}", "leads_to: l, fixes: [{a: b}]}"))
    with pytest.raises(BadInputError, match="must be text"):
        load_catalog(bad)
    assert load_catalog(CATALOG_PATH)


@pytest.mark.parametrize(("dump", "pattern"), [
    ("actor_call_cycle/Learner-18140.json", "ray-get-wait"),
    ("actor_call_cycle/ParameterServer-18142.txt", "ray-get-wait"),
    ("chain_three_actors/Trainer-21931.json", "ray-get-wait"),
    # DDP's forward waiting for a peer (bucket rebuild), inside Ray Train's training thread.
    ("ray_train_report_rank0/RayTrainWorker-20454.stacks.json", "ddp-wait"),
])
def test_real_dumps_are_classified(dump: str, pattern: str) -> None:
    path = DUMPS / dump
    if not path.exists():
        pytest.skip(f"no capture {dump}")
    procs = load_processes(str(path))
    verdict = match_process(procs[0])
    assert verdict.verdict == "blocked"
    assert verdict.pattern == pattern
    assert verdict.main is not None and verdict.main.user_frame is not None


def test_collective_ranks_in_real_dumps() -> None:
    folder = DUMPS / "gloo_skipped_allreduce"
    if not folder.exists():
        pytest.skip("no gloo capture")
    patterns = {}
    for path in sorted(folder.glob("TrainWorker-*.json")):
        proc = load_processes(str(path))[0]
        patterns[path.name] = match_process(proc).pattern
    assert "collective-wait" in patterns.values(), patterns
    # The rank that skipped the all_reduce is not in a collective: it is the odd one out.
    assert any(p != "collective-wait" for p in patterns.values()), patterns
