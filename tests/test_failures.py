"""A failed collection says what failed, first when it is the tool's own, with the next step that
fits that kind of failure — on recorded real failures (tests/data/failures/README.md says how each
was made), re-analysed.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import pytest

from debug_hang.analyse import next_steps
from debug_hang.analyse.failures import MATCH_MINOR, tool_problem
from debug_hang.commands.diagnose import build_parser as diagnose_parser
from debug_hang.commands.diagnose import exit_code
from debug_hang.commands.nodes import build_parser as nodes_parser
from debug_hang.commands.nodes import parse_command
from debug_hang.errors import EXIT_INCONCLUSIVE
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.report.markdown import render_markdown
from debug_hang.report.summary import fix_line, full_summary

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
FAILURES = ROOT / "tests" / "data" / "failures"
SCHEMA = json.loads((ROOT / "references" / "diagnosis.schema.json").read_text())
KIND = {
    "helper_error_ray293": "helper-error",
    "version_mismatch_tool260_cluster293": "version-mismatch",
    "version_mismatch_python_patch": "version-mismatch",
    "pyspy_missing_ray210": "pyspy-missing",
    "permission_denied_other_user": "permission-denied",
}
TOOL_OWN = [c for c, k in KIND.items() if k in ("helper-error", "version-mismatch")]
GENERIC = "check that the node's Ray is healthy"


def test_every_recorded_failure_is_named_here() -> None:
    assert {p.name for p in FAILURES.iterdir() if p.is_dir()} == set(KIND)


@pytest.mark.parametrize("case", sorted(KIND))
def test_a_recorded_failure_is_inconclusive_and_names_the_kind_that_hid_the_processes(case: str) -> None:
    diag = reanalyse(FAILURES / case)
    assert diag.verdict == "inconclusive" and exit_code(diag) == EXIT_INCONCLUSIVE
    assert diag.uninspected and {b["kind"] for b in diag.uninspected} == {KIND[case]}
    jsonschema.validate(to_json(diag), SCHEMA)
    command, why = next_steps.next_command(diag)
    assert command and why and "--samples 5" not in command  # more samples cannot help a failed collection


@pytest.mark.parametrize("case", TOOL_OWN)
def test_a_failure_of_the_tool_itself_is_said_first_with_both_sides_versions_and_the_fix(case: str) -> None:
    diag = reanalyse(FAILURES / case)
    problem = tool_problem(diag)
    assert problem is not None and problem.kind == KIND[case]
    versions = diag.snapshot.versions if diag.snapshot else {}
    tool, cluster = versions["tool"], versions["cluster"]
    # THEN the summary, diagnosis.json and report.md open with it, naming both sides' Ray and Python
    assert problem.headline.startswith(("Version problem, not a finding about the job", "Tool problem, not a finding"))
    for side in (tool, cluster):
        assert f"Ray {side['ray']} / Python {side['python']}" in problem.headline
    doc = to_json(diag)
    assert doc["summary"].startswith(problem.headline) and full_summary(diag).startswith(problem.headline)
    assert doc["tool_problem"]["kind"] == problem.kind and doc["tool_problem"]["hidden"] == len(diag.uninspected)
    report = render_markdown(diag)
    first = report.split("\n\n")[1]  # the paragraph after the title
    assert first.startswith("**") and ("Version problem" in first or "Tool problem" in first)
    assert report.index("Fix: ") < report.index("inconclusive, the blocked processes could not be inspected")
    assert str(fix_line(diag)).startswith("fix: ")
    # and never the generic advice for a node's Ray
    assert GENERIC not in report and GENERIC not in json.dumps(doc)


def _nodes_args(command: str) -> tuple[object, list[str]]:
    argv = shlex.split(command)
    assert argv[:2] == ["python3", next_steps.NODE_RUNNER]
    args = nodes_parser().parse_args(argv[2:])
    return args, parse_command(args.command)


def test_a_helper_that_could_not_be_unpickled_leads_to_the_stacks_taken_without_it() -> None:
    diag = reanalyse(FAILURES / "helper_error_ray293")
    command, why = next_steps.next_command(diag)
    assert command and why
    # a plain py-spy command on the node of a hidden process, for one of them
    args, argv = _nodes_args(command)
    hidden = {str(b["pid"]) for b in diag.uninspected}
    assert argv[:3] == ["py-spy", "dump", "--pid"] and argv[3] in hidden
    assert [str(b["node_id"]).startswith(args.node[0]) for b in diag.uninspected] == [True] * len(hidden)  # type: ignore[attr-defined]
    # the error and the versions on both sides, and how to read the dumps afterwards
    assert "KeyError: '__module__'" in why and "Ray 2.9.3 / Python 3.11.7 on both sides" in why
    assert "ray.cloudpickle: 2.0.0 here" in why and "parse_stacks.py" in why and "match_patterns.py" in why
    fix = tool_problem(diag).fix  # type: ignore[union-attr]
    assert all(pid in fix for pid in hidden) and "DEBUG_HANG_TRACEBACK=1" in fix


def test_a_tool_of_another_ray_than_the_cluster_installs_the_clusters_ray_beside_it() -> None:
    diag = reanalyse(FAILURES / "version_mismatch_tool260_cluster293")
    command, why = next_steps.next_command(diag)
    assert command and why and "this side runs Ray 2.60.0" in why and "the cluster runs Ray 2.9.3" in why
    install, _, rerun = command.partition(" && DEBUG_HANG_PYTHON=")
    assert install.startswith("python3.11 -m venv /tmp/debug-hang-ray-2.9.3 && /tmp/debug-hang-ray-2.9.3/bin/pip install")
    assert "'ray[default]==2.9.3'" in install and "py-spy" in install and "'setuptools<81'" in install
    python, _, script = rerun.partition(" bash ")
    assert python == "/tmp/debug-hang-ray-2.9.3/bin/python"
    argv = shlex.split(script)
    assert argv[0] == next_steps.DIAGNOSE
    assert diagnose_parser().parse_args(argv[1:]).job_id == diag.job_id
    assert "ray job submit --address http://" in tool_problem(diag).fix  # type: ignore[union-attr]


def test_a_python_of_another_patch_release_is_allowed_instead_of_reinstalled() -> None:
    diag = reanalyse(FAILURES / "version_mismatch_python_patch")
    command, why = next_steps.next_command(diag)
    assert command and why and command.startswith(f"{MATCH_MINOR} bash {next_steps.DIAGNOSE} ")
    assert "-m venv" not in command and "Python 3.11.2" in why and "Python 3.11.7" in why
    assert diagnose_parser().parse_args(shlex.split(command)[2:]).job_id == diag.job_id


@pytest.mark.parametrize(("case", "words"), [("pyspy_missing_ray210", "pip install py-spy"),
                                              ("permission_denied_other_user", "SYS_PTRACE")])
def test_a_node_side_failure_says_what_to_fix_there_and_is_not_blamed_on_the_tool(case: str, words: str) -> None:
    diag = reanalyse(FAILURES / case)
    assert tool_problem(diag) is None  # a Python patch release apart (the permission case) changed nothing here
    command, why = next_steps.next_command(diag)
    assert command == f"bash {next_steps.DIAGNOSE} {diag.address} --job-id {diag.job_id}" and why and words in why


def test_each_kind_of_failure_gets_its_own_next_step() -> None:
    steps = {case: next_steps.next_command(reanalyse(FAILURES / case)) for case in KIND}
    by_kind: dict[str, set[str]] = {}
    for case, (_, why) in steps.items():
        by_kind.setdefault(KIND[case], set()).add(str(why).split(" (")[0])
    whys = [next(iter(w)) for w in by_kind.values()]
    assert len(set(whys)) == len(by_kind) == 4, by_kind


def test_a_ray_minor_release_apart_is_a_warning_first_even_when_nothing_failed() -> None:
    # GIVEN a recorded hang whose stacks were all read, and the tool on another Ray minor release
    diag = reanalyse(ROOT / "tests" / "data" / "cases" / "producer_never_produces")
    assert diag.snapshot is not None and diag.verdict == "hang"
    assert tool_problem(diag) is None  # a capture without versions says nothing about them
    diag.snapshot.versions = {"tool": {"ray": "2.60.0", "python": "3.11.7"}, "cluster": {"ray": "2.31.0", "python": "3.11.7"}}
    problem = tool_problem(diag)
    # THEN the verdict stands, and the summary opens with the warning and its fix
    assert problem is not None and problem.kind == "version-mismatch" and problem.headline.startswith("Version warning")
    assert "this diagnosis stands" in problem.headline and "no helper task was needed" in problem.headline
    assert "'ray[default]==2.31.0'" in problem.fix
    assert full_summary(diag).startswith("Version warning") and next_steps.next_command(diag) == (None, None)
    # and a patch release apart, with nothing failed, is no news
    diag.snapshot.versions["tool"]["ray"] = "2.31.2"
    assert tool_problem(diag) is None
