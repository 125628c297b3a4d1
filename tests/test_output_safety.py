"""The output folder on recorded real captures: private, never escaped, no runtime_env rows,
re-analysable; the target cap keeps the telling processes.

Each recorded case (tests/data/cases/*) is re-analysed, written with write_outputs into a fresh
folder, and re-analysed again from what was written: the verdict must survive the redaction and
the dropped rows (ranks come back from `rank_env`).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import ROOT, expected_of

from debug_hang.collect.stacks import cap_targets, select_targets
from debug_hang.errors import UsageError
from debug_hang.pipeline import reanalyse
from debug_hang.report.write import OUTPUT_FILES, OutputFolder, log_name, prepare_output_dir, write_outputs
from debug_hang.snapshot import RUNTIME_ENV_FIELDS, Snapshot

pytestmark = pytest.mark.unit

CASES = ROOT / "tests" / "data" / "cases"
RANKED = ["gloo_skipped_allreduce", "dead_rank", "collective_mismatch", "rendezvous_hang"]


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


@pytest.mark.parametrize("case", RANKED + ["producer_never_produces", "detached_service_never_published"])
def test_written_folder_is_private_and_reanalyses_to_the_same_verdict(case: str, tmp_path: Path) -> None:
    # GIVEN a real capture, re-analysed
    diag = reanalyse(CASES / case)
    out = tmp_path / "diag"
    # WHEN it is written to a new folder
    write_outputs(diag, out)
    # THEN the folder is 0700, every file 0600, no runtime_env row is written
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for path in files_under(out):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    snap = json.loads((out / "snapshot.json").read_text())
    for row in [*snap["jobs"], *snap["actors"], *snap["tasks"]]:
        assert not set(row) & set(RUNTIME_ENV_FIELDS), row.keys()
    # AND re-analysing what was written gives the same verdict and culprits
    again = reanalyse(out)
    assert again.verdict == diag.verdict == expected_of(case)["verdict"]
    assert [c.pattern for c in again.causes] == [c.pattern for c in diag.causes]
    assert [(c.class_name, c.rank) for c in again.causes[0].culprits] == \
        [(c.class_name, c.rank) for c in diag.causes[0].culprits]


def test_ranks_from_runtime_env_survive_as_rank_env(tmp_path: Path) -> None:
    # GIVEN a capture whose ranks are in the actors' runtime_env env_vars
    diag = reanalyse(CASES / "gloo_skipped_allreduce")
    write_outputs(diag, tmp_path / "d")
    actors = json.loads((tmp_path / "d" / "snapshot.json").read_text())["actors"]
    # THEN each rank actor keeps only its rank variables
    ranked = [a for a in actors if a.get("rank_env")]
    assert ranked and all(set(a["rank_env"]) <= {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK"}
                          for a in ranked)


def test_other_jobs_keep_only_id_status_and_entrypoint_head(tmp_path: Path) -> None:
    # GIVEN a capture of a cluster that ran many jobs
    diag = reanalyse(CASES / "stdlib_queue_no_producer")
    assert diag.snapshot is not None and len(diag.snapshot.jobs) > 1
    write_outputs(diag, tmp_path / "d")
    jobs = json.loads((tmp_path / "d" / "02_jobs.json").read_text())
    others = [j for j in jobs if j["job_id"] != diag.job_id]
    assert others and all(set(j) <= {"job_id", "submission_id", "status", "entrypoint"} for j in others)
    assert all(len(j["entrypoint"] or "") <= 80 for j in others)


def test_include_runtime_env_writes_the_rows(tmp_path: Path) -> None:
    diag = reanalyse(CASES / "gloo_skipped_allreduce")
    write_outputs(diag, tmp_path / "d", include_runtime_env=True)
    actors = json.loads((tmp_path / "d" / "snapshot.json").read_text())["actors"]
    assert any("serialized_runtime_env" in a for a in actors)


def test_a_non_empty_folder_is_refused_and_force_replaces_only_earlier_outputs(tmp_path: Path) -> None:
    # GIVEN a folder holding an earlier diagnosis and a file of the user's
    diag = reanalyse(CASES / "producer_never_produces")
    out = tmp_path / "d"
    write_outputs(diag, out)
    (out / "notes.txt").write_text("mine")
    # WHEN written again without force  THEN refused
    with pytest.raises(UsageError, match="not empty"):
        write_outputs(diag, out)
    # WHEN with force, from a capture without evidence
    other = reanalyse(CASES / "actor_call_cycle")
    other.evidence = None
    write_outputs(other, out, force=True)
    # THEN the earlier run's evidence is gone (never mixed into a re-analysis), the user's file stays
    assert not (out / "evidence.json").exists() and not (out / "logs").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert reanalyse(out).job_id == other.job_id


def test_symlinked_or_foreign_folders_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(UsageError, match="symbolic link"):
        prepare_output_dir(link)


def test_missing_parents_are_made_private_and_a_foreign_parent_is_refused(tmp_path: Path) -> None:
    # GIVEN an output folder two levels under a missing folder: every folder made is 0700
    out = prepare_output_dir(tmp_path / "watch" / "runs" / "job-1")
    for folder in (tmp_path / "watch", tmp_path / "watch" / "runs", out):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    # GIVEN a folder planted by another user where ours would go (as /tmp/ray_hang_watch could be)
    if os.getuid() != 0:
        pytest.skip("needs root to plant a folder owned by another uid")
    planted = tmp_path / "planted"
    planted.mkdir()
    os.chown(planted, 65534, 65534)
    with pytest.raises(UsageError, match="belongs to uid 65534"):
        prepare_output_dir(planted / "job-1")
    assert not (planted / "job-1").exists()
    # ... or a symlink of theirs to a folder of ours
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "watch")
    os.lchown(link, 65534, 65534)
    with pytest.raises(UsageError, match="belongs to uid 65534"):
        prepare_output_dir(link / "job-2")
    # ... or a folder everyone may write in, without the sticky bit
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(UsageError, match="writable by everyone"):
        prepare_output_dir(shared / "sub" / "job-3")


def test_default_folder_is_a_fresh_private_mkdtemp() -> None:
    first, second = prepare_output_dir(None), prepare_output_dir(None)
    try:
        assert first != second and first.name.startswith("ray_hang_diag_")
        assert stat.S_IMODE(first.stat().st_mode) == 0o700
    finally:
        first.rmdir()
        second.rmdir()


def test_no_write_follows_a_planted_symlink(tmp_path: Path) -> None:
    # GIVEN an output folder where someone planted report.md -> a file elsewhere
    out = prepare_output_dir(tmp_path / "d")
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (out / "report.md").symlink_to(victim)
    # WHEN the writer writes report.md  THEN it refuses, and the target is untouched
    with OutputFolder(out) as folder, pytest.raises((OSError, ValueError)):
        folder.text("report.md", "x")
    assert victim.read_text() == "keep"


@pytest.mark.parametrize("name", ["../x", "logs/../../x", "/etc/passwd", "a/b/c", ".hidden", "x\ny"])
def test_unsafe_names_are_refused(tmp_path: Path, name: str) -> None:
    with OutputFolder(prepare_output_dir(tmp_path / "d")) as folder, pytest.raises(ValueError):
        folder.text(name, "x")


def test_log_names_come_from_kinds_and_pids_only() -> None:
    used: set[str] = set()
    # a class name cannot reach the name: only the graph's kind vocabulary and integer pids
    assert log_name("../../../../tmp/x", 14752, "444918ddd36d", "out", used) == "logs/process-14752.out"
    assert log_name("actor", 14752, "444918ddd36d", "out", used) == "logs/actor-14752.out"
    assert log_name("actor", 14752, "5550000aaaa", "out", used) == "logs/actor-14752-5550000a.out"
    assert log_name("actor", None, None, "../err", used) == "logs/actor-unknown.log"


def test_cap_keeps_unfinished_calls_then_peers_then_awaited_actors() -> None:
    # GIVEN the real rows of a Ray Train run (controller, workers, helper actors, driver)
    snap = Snapshot.from_dict(json.loads((CASES / "ray_train_early_stop" / "snapshot.json").read_text()))
    doc = json.loads((CASES / "ray_train_early_stop" / "stacks.json").read_text())
    job = next(j for j in snap.jobs if j.get("job_id") == doc["meta"]["job_id"])
    targets = select_targets(job, snap.actors, snap.tasks, snap.nodes)
    busy = [t for t in targets if t.task_id or t.role == "driver"]
    assert 1 < len(busy) < len(targets)
    # WHEN capped to as many as are in unfinished calls
    kept, cut = cap_targets(targets, job, snap.tasks, len(busy))
    # THEN exactly those are kept, and the cut is counted
    assert {(t.node_id, t.pid) for t in kept} == {(t.node_id, t.pid) for t in busy}
    assert cut == len(targets) - len(busy)
    assert cap_targets(targets, job, snap.tasks, len(targets)) == (targets, 0)


def test_writer_redacts_what_it_writes(tmp_path: Path) -> None:
    out = prepare_output_dir(tmp_path / "d")
    token = "hf_" + "Zq81mXv3LpW0aRt5KyDebugHang"
    with OutputFolder(out) as folder:
        folder.text("report.md", f"Authorization: Bearer {token}\x1b]52;c;eA==\x07\n")
        folder.json("diagnosis.json", {"HF_TOKEN": "anything-at-all", "line": f"token={token}"})
    text = "".join(p.read_text() for p in files_under(out))
    assert token not in text and "anything-at-all" not in text and "\x1b" not in text
    assert sorted(os.listdir(out)) == ["diagnosis.json", "report.md"] and "report.md" in OUTPUT_FILES
