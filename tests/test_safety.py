"""Safe to run as root on a shared cluster and safe to paste, end to end on a real cluster.

examples/secrets_in_the_job.py is a real hang that keeps credentials where real jobs keep them
(the driver's environment, an actor's runtime_env env_vars, a worker's warning line, a literal
beside the culprit's wait) and names an actor class like a path with a newline, a fence and
terminal escapes. The one-command diagnosis must name the culprit, write nothing outside its
folder, leave no file readable by others, and leak no secret into a file or onto the terminal.
"""

from __future__ import annotations

import ast
import glob
import os
import re
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, LocalCluster, SubmittedJob, read_json, run_script, stop_job, submit_example

from debug_hang.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.integration

EXAMPLE = "secrets_in_the_job"
ESCAPE_GLOB = "/tmp/debug_hang_escape*"


def _literal(name: str) -> Any:
    tree = ast.parse((ROOT / "examples" / f"{EXAMPLE}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(name)


SECRETS = [*_literal("DRIVER_ENV").values(), *_literal("LOADER_ENV").values(),
           "sk-proj-DebugHangFallbackKey7Hq2Zx9Lm4Vb"]


@pytest.fixture(scope="module")
def secrets_job(ray_cluster: LocalCluster) -> Iterator[SubmittedJob]:
    job = submit_example(ray_cluster, EXAMPLE)
    try:
        yield job
    finally:
        stop_job(ray_cluster, job)


def diagnose(cluster: LocalCluster, job: SubmittedJob, *args: str, env: dict[str, str] | None = None) -> Any:
    return run_script(["scripts/diagnose_ray_hang.sh", cluster.gcs, *args, "--job-id", str(job.job_id)],
                      timeout_s=120, env=env or cluster.env())


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_secrets_never_reach_a_file_or_the_terminal(ray_cluster: LocalCluster, secrets_job: SubmittedJob,
                                                   tmp_path: Path) -> None:
    # GIVEN the hung job with secrets in it, and nothing of ours under /tmp named like its class
    assert not glob.glob(ESCAPE_GLOB)
    out = tmp_path / "diag"
    # WHEN the responder runs the one-command diagnosis
    proc = diagnose(ray_cluster, secrets_job, str(out))
    # THEN it names the culprit
    assert proc.returncode == EXIT_OK, proc.stderr[-2000:]
    diag = read_json(out / "diagnosis.json")
    assert diag["verdict"] == "hang", diag["summary"]
    assert diag["root_causes"][0]["pattern"] == "poll-never-satisfied"
    assert diag["root_causes"][0]["culprit"]["class_name"] == "ShardLoader"
    # AND nothing was written outside the folder, whatever the trainer's class is called
    assert not glob.glob(ESCAPE_GLOB)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["diag"]
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"report.md", "diagnosis.json", "snapshot.json", "stacks.json"} <= {p.name for p in files}
    assert any(p.parent.name == "logs" for p in files)  # the chain's logs were written, by id
    # AND the folder and every file are private
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for path in [*files, out / "logs"]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
    # AND no secret, no terminal escape is in any file, in stdout or in stderr
    for path in files:
        text = path.read_text(errors="replace")
        assert not leaks(text), (path.name, leaks(text))
        assert "\x1b" not in text and "\x07" not in text, path.name
    for stream in (proc.stdout, proc.stderr):
        assert not leaks(stream) and "\x1b" not in stream
    # AND the report keeps the job's text from adding structure: one heading per section
    report = (out / "report.md").read_text()
    assert not re.search(r"^# Root cause", report, re.MULTILINE)
    assert report.count("\n## Root cause\n") == 1
    # AND re-analysing the folder gives the same verdict, still without secrets
    again = run_script(["scripts/diagnose_ray_hang.sh", "--reanalyse", str(out)], env=ray_cluster.env())
    assert again.returncode == EXIT_OK, again.stderr[-2000:]
    assert "**hang**" in again.stdout and "ShardLoader" in again.stdout and not leaks(again.stdout)


def test_a_used_folder_is_refused_and_force_replaces_it(ray_cluster: LocalCluster, secrets_job: SubmittedJob,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "diag"
    out.mkdir()
    (out / "evidence.json").write_text("{}")  # an earlier run's
    # WHEN the folder is not empty  THEN a one-line refusal, exit 2, before anything is read
    refused = diagnose(ray_cluster, secrets_job, str(out))
    assert refused.returncode == EXIT_USAGE and "not empty" in refused.stderr and "--force" in refused.stderr
    # WHEN --force  THEN the earlier outputs are replaced
    forced = diagnose(ray_cluster, secrets_job, str(out), "--force")
    assert forced.returncode == EXIT_OK, forced.stderr[-2000:]
    assert read_json(out / "diagnosis.json")["verdict"] == "hang"


def test_default_folder_is_new_and_private(ray_cluster: LocalCluster, secrets_job: SubmittedJob) -> None:
    proc = diagnose(ray_cluster, secrets_job)
    assert proc.returncode == EXIT_OK, proc.stderr[-2000:]
    report = Path(proc.stdout.splitlines()[0].removeprefix("report: "))
    try:
        assert report.parent.name.startswith("ray_hang_diag_") and report.is_file()
        assert stat.S_IMODE(report.parent.stat().st_mode) == 0o700
    finally:
        shutil.rmtree(report.parent, ignore_errors=True)


def test_without_a_working_pyspy_the_verdict_is_inconclusive(ray_cluster: LocalCluster, secrets_job: SubmittedJob,
                                                            tmp_path: Path) -> None:
    # GIVEN a node where py-spy is refused ptrace (a py-spy that fails as it would there)
    fake = tmp_path / "bin" / "py-spy"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "Error: Operation not permitted (os error 1)" >&2\nexit 1\n')
    fake.chmod(0o755)
    env = {**ray_cluster.env(), "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    out = tmp_path / "diag"
    # WHEN the hung job is diagnosed
    proc = diagnose(ray_cluster, secrets_job, str(out), env=env)
    # THEN no "no-hang": inconclusive, the failure and its fix first, and its own exit code
    assert proc.returncode == EXIT_INCONCLUSIVE, (proc.returncode, proc.stdout, proc.stderr[-1000:])
    diag = read_json(out / "diagnosis.json")
    assert diag["verdict"] == "inconclusive"
    assert diag["summary"].index("could not be inspected") < diag["summary"].index("ptrace")
    assert "SYS_PTRACE" in diag["summary"] and "no process is blocked" not in diag["summary"][:200]


def test_connect_never_closes_a_connection_it_did_not_open(ray_cluster: LocalCluster) -> None:
    import ray

    from debug_hang.collect.address import ClusterAddress
    from debug_hang.collect.nodes import connect
    from debug_hang.errors import UsageError

    # GIVEN a process that is itself a driver of the cluster (a notebook)
    ray.init(address=ray_cluster.gcs, log_to_driver=False, namespace="notebook")
    try:
        # WHEN the tool is asked to reach another cluster from it
        with pytest.raises(UsageError, match="did not open"):
            connect(ClusterAddress("127.0.0.1", ray_cluster.port + 1))
        # THEN the caller's connection is intact, and the same cluster is simply reused
        assert ray.is_initialized() and ray.get(ray.put(7)) == 7
        connect(ClusterAddress("localhost", ray_cluster.port))
        assert ray.is_initialized()
    finally:
        ray.shutdown()
