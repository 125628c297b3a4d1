"""The diagnosis says what to open next, on every recorded real capture (re-analysed): the pattern's
section of references/patterns.md and the closest recorded case (links that resolve), where the
job's code is, the finished call of an idle culprit, and for `inconclusive` a command whose flags
exist.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import jsonschema
import pytest

from debug_hang.analyse import next_steps
from debug_hang.commands.diagnose import build_parser as diagnose_parser
from debug_hang.commands.nodes import build_parser as nodes_parser
from debug_hang.model import CollectionError
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.report.markdown import render_markdown
from debug_hang.report.summary import summary_lines

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "tests" / "data" / "cases"
CASES = sorted(p.name for p in CAPTURES.iterdir() if (p / "snapshot.json").exists())
SCHEMA = json.loads((ROOT / "references" / "diagnosis.schema.json").read_text())
LINK = re.compile(r"\]\(([\w./-]*/(?:references|scripts)/[\w./-]+)(?:#([\w-]+))?\)")


def resolves(path: str, anchor: str | None) -> bool:
    target = Path(path)
    assert target.is_absolute(), f"{path}: the report's links are absolute (it lives in the output folder)"
    return target.is_file() and (anchor is None or anchor in next_steps.doc_anchors(target))


@pytest.mark.parametrize("case", CASES)
def test_report_names_the_pattern_section_and_a_case_that_exist(case: str) -> None:
    # GIVEN a real capture WHEN re-analysed and rendered
    diag = reanalyse(CAPTURES / case)
    guide = next_steps.guide(diag, ROOT)
    report = render_markdown(diag)
    # THEN every root cause has a pattern section and (when one is recorded) a case of its pattern
    assert len(guide.causes) == len(diag.causes)
    for cause, g in zip(diag.causes, guide.causes, strict=True):
        path, _, anchor = g.pattern_doc.partition("#")
        assert anchor == cause.pattern and resolves(str(ROOT / path), anchor), g.pattern_doc
        assert g.case is not None and (ROOT / g.case).is_file(), g.case_why
        assert dict(next_steps.case_index(ROOT))[Path(g.case).stem]["pattern"] == cause.pattern
    # and every link the report gives into the skill folder resolves to a file and a heading
    links = LINK.findall(report)
    assert len(links) >= 2 * min(len(diag.causes), 5)
    for path, anchor in links:
        assert resolves(path, anchor or None), (path, anchor)
    # and the stdout summary names the same pages
    summary = "\n".join(summary_lines(diag))
    for g in guide.causes[:3]:
        assert f"read: {g.pattern_doc}" in summary and (g.case is None or g.case in summary)


@pytest.mark.parametrize("case", [c for c in CASES if json.loads(
    (CAPTURES / c / "diagnosis.json").read_text())["verdict"] == "hang"])
def test_the_closest_case_of_a_recorded_hang_is_its_own_or_an_identical_one(case: str) -> None:
    diag = reanalyse(CAPTURES / case)
    chosen = Path(str(next_steps.guide(diag, ROOT).causes[0].case)).stem
    index = dict(next_steps.case_index(ROOT))
    assert chosen == case or index[chosen] == index[case], (chosen, index[chosen], index[case])


@pytest.mark.parametrize("case", CASES)
def test_json_carries_the_same_guide_and_stays_valid(case: str) -> None:
    diag = reanalyse(CAPTURES / case)
    doc = to_json(diag)
    jsonschema.validate(doc, SCHEMA)
    guide = next_steps.guide(diag)
    assert [rc["next"]["pattern_doc"] for rc in doc["root_causes"]] == [g.pattern_doc for g in guide.causes]
    assert doc["schema"] == "debug-hang/diagnosis/v1" and doc["schema_revision"] >= 2
    assert Path(doc["references_root"], "references", "patterns.md").is_file()


@pytest.mark.parametrize("case", CASES)
def test_job_code_is_the_working_dir_copy_the_stacks_ran_from(case: str) -> None:
    diag = reanalyse(CAPTURES / case)
    code = next_steps.job_code(diag)
    job = next(j for j in diag.snapshot.jobs if j.get("job_id") == diag.job_id) if diag.snapshot else {}
    assert code is not None and code.entrypoint == job.get("entrypoint")
    uri = (job.get("runtime_env") or {}).get("working_dir")
    if uri and code.working_dir:
        # the unpacked copy is the one of this job's package, and the job's own frames ran from it
        digest = re.search(r"_ray_pkg_([0-9a-f]+)", uri)
        assert digest and code.working_dir.endswith(f"/working_dir_files/_ray_pkg_{digest.group(1)}/")
        files = {f.file for p in diag.collection.processes for t in p.threads for f in t.frames}
        assert any(f.startswith(code.working_dir) for f in files)
        assert code.working_dir_nodes and set(code.working_dir_nodes) <= {p.node_id for p in diag.collection.processes}


@pytest.mark.parametrize("case", CASES)
def test_an_idle_culprit_points_at_its_finished_call_and_the_peers_source(case: str) -> None:
    diag = reanalyse(CAPTURES / case)
    for cause, g in zip(diag.causes, next_steps.guide(diag, ROOT).causes, strict=True):
        done = g.finished_call
        if cause.culprits[0].state != "idle":
            assert done is None
            continue
        if done is None:
            continue  # an idle actor that never ran a method (idle-no-work) has no finished call
        assert done.state in ("FINISHED", "FAILED") and done.task.split(".")[0] in (
            cause.culprits[0].class_name or done.task)
        assert (done.error is not None) == (done.state == "FAILED")
        assert done.describe() in render_markdown(diag) and done.describe() in "\n".join(summary_lines(diag))
        if done.peers_at:
            # the place to read is in the job's own code, not in a library
            assert done.file and not re.search(r"/(site|dist)-packages/", done.file)


def test_a_rank_that_returned_early_is_told_apart_from_one_whose_peers_left_the_call_too() -> None:
    # A rank whose call FINISHED while the same call still RUNS on its peers returned early (gloo
    # pairs collectives by call order); Ray Train's run_train_fn returns on every rank at once.
    seen = {True: 0, False: 0}
    for case in CASES:
        diag = reanalyse(CAPTURES / case)
        assert diag.snapshot is not None
        for cause, g in zip(diag.causes, next_steps.guide(diag, ROOT).causes, strict=True):
            done = g.finished_call
            if cause.pattern != "collective-skipped" or done is None:
                continue
            running_on_peers = any(t.get("name") == done.task and t.get("state") == "RUNNING"
                                   and t.get("actor_id") != cause.culprits[0].actor_id for t in diag.snapshot.tasks)
            assert done.peers_inside == running_on_peers, (case, done)
            assert done.describe().startswith(f"returned early from {done.task}") == running_on_peers
            assert done.peers_at and re.search(r"\.py:\d+ \(", done.peers_at)
            seen[running_on_peers] += 1
    assert seen[True] >= 1, "no recorded capture of a rank that returned from a call its peers are still in"


def flags(command: str, script: str) -> set[str]:
    args = shlex.split(command.split(script, 1)[1])
    return {a for a in args if a.startswith("--")}


def known(parser: object) -> set[str]:
    return {opt for action in parser._actions for opt in action.option_strings}  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", CASES)
def test_inconclusive_gives_a_command_whose_flags_exist(case: str) -> None:
    # GIVEN a real capture read as inconclusive (its waits taken as not followed)
    diag = reanalyse(CAPTURES / case)
    diag.verdict = "inconclusive"
    command, why = next_steps.next_command(diag)
    # THEN the next command is the diagnosis again, for this job, with flags the script has —
    # or, for a culprit busy under one Python line, its native stacks on its node
    assert command and why
    if command.startswith(f"python3 {next_steps.NODE_RUNNER} "):
        assert diag.busy and diag.busy[0].one_call and f"--dump {diag.busy[0].ref.pid} --native" in command
        assert flags(command, next_steps.NODE_RUNNER) <= known(nodes_parser())
    else:
        assert command.startswith(f"bash {next_steps.DIAGNOSE} ") and f"--job-id {diag.job_id}" in command
        assert flags(command, next_steps.DIAGNOSE) <= known(diagnose_parser())
    assert "next:" in "\n".join(summary_lines(diag)) and command in render_markdown(diag)
    # and when the State API was down, the per-node dump with flags run_on_each_ray_node.py has
    diag.errors.append(CollectionError(error="the State API did not answer", kind="state-api-down"))
    command, _ = next_steps.next_command(diag)
    assert command and next_steps.NODE_RUNNER in command
    assert flags(command, next_steps.NODE_RUNNER) <= known(nodes_parser())


def test_a_hang_or_no_hang_has_no_next_command() -> None:
    decided = [diag for diag in (reanalyse(CAPTURES / case) for case in CASES) if diag.verdict != "inconclusive"]
    assert decided
    for diag in decided:
        assert next_steps.next_command(diag) == (None, None)
        assert "next:" not in "\n".join(summary_lines(diag))
