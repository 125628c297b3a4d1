"""`debug-hang demo`, the README's first command: a real hang diagnosed end to end.

The test runs the installed `debug-hang` entry point against the suite's loopback cluster
(`--address`, so it starts no second cluster) and checks what it prints; `--list` and the
refusal of a scenario whose library is missing run without a cluster.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, LocalCluster

from debug_hang import localcluster
from debug_hang.commands import demo
from debug_hang.errors import UsageError


def _demo(args: list[str], timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("debug-hang")
    cmd = [exe] if exe else [sys.executable, "-m", "debug_hang"]
    return subprocess.run([*cmd, "demo", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                          env=localcluster.loopback_env())


@pytest.mark.integration
def test_demo_diagnoses_its_default_scenario_end_to_end(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    # WHEN the demo runs its default scenario on a running cluster
    done = _demo(["--address", ray_cluster.gcs, "--output-dir", str(tmp_path)])
    # THEN it prints the report and says the diagnosis matches what the example declares
    assert done.returncode == 0, done.stderr[-2000:]
    assert "# Ray hang diagnosis" in done.stdout and "← root cause" in done.stdout
    assert "expected: hang / poll-never-satisfied; diagnosed: hang / poll-never-satisfied" in done.stderr
    assert (tmp_path / "report.md").exists() and (tmp_path / "diagnosis.json").exists()


@pytest.mark.unit
def test_demo_lists_every_scenario_with_its_expected_cause() -> None:
    done = _demo(["--list"], timeout_s=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(localcluster.examples())
    assert any(line.startswith("ray_train_report_rank0") and "train-barrier-skipped" in line
               and "needs ray.train" in line for line in lines)


@pytest.mark.unit
def test_a_scenario_whose_library_is_missing_is_refused_before_any_cluster_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a scenario that declares a library this machine does not have
    real = localcluster.expected_of
    monkeypatch.setattr(localcluster, "expected_of",
                        lambda name: {**real(name), "needs": ["debug_hang_no_such_module"]})
    # WHEN the demo is asked for it THEN it stops with a usage error naming the install command
    with pytest.raises(UsageError, match=r"needs debug_hang_no_such_module.*pip install 'debug-hang\[train\]'"):
        demo.main(["ray_train_early_stop", "--output-dir", "/nonexistent"])


@pytest.mark.unit
def test_unknown_scenario_is_a_usage_error() -> None:
    done = _demo(["no_such_scenario"], timeout_s=60)
    assert done.returncode == 2 and "unknown scenario" in done.stderr
