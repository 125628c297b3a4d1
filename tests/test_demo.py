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
from debug_hang.errors import EXIT_WRONG, UsageError
from debug_hang.pipeline import reanalyse


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


@pytest.mark.integration
def test_demo_exits_non_zero_when_its_diagnosis_is_not_the_expected_one(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    # GIVEN a py-spy that is refused ptrace on this machine (the demo then cannot read a stack)
    fake = tmp_path / "bin" / "py-spy"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "Error: Operation not permitted (os error 1)" >&2\nexit 1\n')
    fake.chmod(0o755)
    exe = shutil.which("debug-hang")
    cmd = [exe] if exe else [sys.executable, "-m", "debug_hang"]
    env = {**localcluster.loopback_env(), "PATH": f"{fake.parent}:{localcluster.loopback_env()['PATH']}"}
    # WHEN the demo runs its default scenario
    done = subprocess.run([*cmd, "demo", "--address", ray_cluster.gcs, "--output-dir", str(tmp_path / "d")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)
    # THEN it still prints the report, says the diagnosis is wrong, and its exit code says so
    assert "# Ray hang diagnosis" in done.stdout
    assert "diagnosed: inconclusive / None" in done.stderr and "WRONG: verdict inconclusive, expected hang" in done.stderr
    assert done.returncode == EXIT_WRONG, (done.returncode, done.stderr[-1000:])


CASES = Path(ROOT) / "tests" / "data" / "cases"


@pytest.mark.unit
@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "stacks.json").exists()))
def test_a_recorded_case_matches_its_expected_answer_and_a_changed_answer_does_not(case: str) -> None:
    diag = reanalyse(CASES / case)
    expected = localcluster.expected_of(case)
    assert demo.mismatch(expected, diag) is None
    assert demo.mismatch({**expected, "verdict": "no-hang" if expected["verdict"] != "no-hang" else "hang"}, diag)
    if expected["verdict"] == "hang":
        assert "root cause" in str(demo.mismatch({**expected, "pattern": "busy-loop-x"}, diag))
        assert "culprits" in str(demo.mismatch({**expected, "culprits": [{"class_name": "NoSuchClass", "rank": None}]}, diag))


@pytest.mark.unit
def test_a_recorded_failure_is_a_wrong_answer_for_the_demo() -> None:
    # The demo's scenario on Ray 2.9.3 before the helper could be unpickled there: inconclusive.
    diag = reanalyse(Path(ROOT) / "tests" / "data" / "failures" / "helper_error_ray293")
    assert demo.mismatch(localcluster.expected_of("producer_never_produces"), diag) == "verdict inconclusive, expected hang"


@pytest.mark.unit
def test_the_demo_port_is_moved_by_flag_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(demo.PORT_ENV, raising=False)
    assert demo.demo_port(None) == demo.DEMO_PORT
    monkeypatch.setenv(demo.PORT_ENV, "6412")
    assert demo.demo_port(None) == 6412
    assert demo.demo_port(6413) == 6413
    for bad in (80, 7400):
        with pytest.raises(UsageError, match="6400-7399"):
            demo.demo_port(bad)
    monkeypatch.setenv(demo.PORT_ENV, "x")
    with pytest.raises(UsageError, match="port number"):
        demo.demo_port(None)


class _HeadWithoutAgentYet:
    """A job client whose head answers as Ray 2.31's did in CI until its agent registered."""

    def __init__(self, refusals: int, message: str) -> None:
        self.refusals, self.message, self.calls = refusals, message, 0

    def submit_job(self, **kwargs: object) -> str:
        self.calls += 1
        if self.calls <= self.refusals:
            raise RuntimeError(self.message)
        return "raysubmit_1"


@pytest.mark.unit
def test_a_job_is_submitted_again_while_the_head_has_no_agent_but_other_errors_are_raised() -> None:
    from debug_hang.localcluster import submit_job

    refused = "Request failed with status code 500: No available agent to submit job, please try again later.."
    head = _HeadWithoutAgentYet(2, refused)
    assert submit_job(head, timeout_s=10, entrypoint="python x.py") == "raysubmit_1" and head.calls == 3
    with pytest.raises(RuntimeError, match="No available agent"):
        submit_job(_HeadWithoutAgentYet(100, refused), timeout_s=1.5, entrypoint="python x.py")
    other = _HeadWithoutAgentYet(1, "Request failed with status code 400: bad runtime_env")
    with pytest.raises(RuntimeError, match="400"):
        submit_job(other, timeout_s=10, entrypoint="python x.py")
    assert other.calls == 1


@pytest.mark.unit
def test_local_cluster_worker_ports_stay_below_the_ephemeral_range(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN no override (CI once failed: Ray 2.9 chose its agent's gRPC port at random inside 40000-40999)
    monkeypatch.delenv("DEBUG_HANG_WORKER_PORTS", raising=False)
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    # WHEN every cluster port's worker range is derived
    ranges = {localcluster._worker_ports(port - 6400) for port in range(6400, 7400)}
    # THEN each range ends below the ephemeral range and clear of the client-server ports
    size = localcluster.WORKER_PORTS
    assert all(10400 + 999 < first and first + size - 1 < low for first in ranges), sorted(ranges)
    assert localcluster._worker_ports(20) != localcluster._worker_ports(0)  # the demo and the suite differ
    monkeypatch.setenv("DEBUG_HANG_WORKER_PORTS", "47000")
    assert localcluster._worker_ports(20) == 47000
