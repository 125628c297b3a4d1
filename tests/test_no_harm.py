"""Diagnosing a healthy running job leaves it running: no restarts, no lost progress."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import LocalCluster, run_script, stop_job, submit_example

from debug_hang.collect.state import DashboardClient

pytestmark = pytest.mark.integration


def _finished(client: DashboardClient, job_id: str) -> int:
    rows = client.list_state("tasks", [("job_id", "=", job_id)], detail=False).rows
    return sum(1 for t in rows if t.get("state") == "FINISHED")


def test_diagnosis_does_not_harm_a_healthy_job(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    # GIVEN a healthy, slow training job that is making progress
    job = submit_example(ray_cluster, "healthy_slow")
    client = DashboardClient(ray_cluster.dashboard)
    try:
        before = _finished(client, str(job.job_id))
        actors_before = {a["actor_id"]: a for a in client.list_state("actors", [("job_id", "=", str(job.job_id))]).rows}
        # WHEN it is diagnosed twice, with the pausing (default) py-spy mode
        for i in range(2):
            proc = run_script(["scripts/diagnose_ray_hang.sh", ray_cluster.gcs, str(tmp_path / f"d{i}"),
                               "--job-id", str(job.job_id)], timeout_s=120, env=ray_cluster.env())
            assert proc.returncode == 0, proc.stderr
            assert json.loads((tmp_path / f"d{i}" / "diagnosis.json").read_text())["verdict"] == "no-hang"
        time.sleep(3)
        # THEN the job still runs, no actor restarted or died, and it kept finishing tasks
        from ray.job_submission import JobSubmissionClient

        assert str(JobSubmissionClient(ray_cluster.dashboard).get_job_status(job.submission_id)) == "RUNNING"
        actors_after = client.list_state("actors", [("job_id", "=", str(job.job_id))]).rows
        assert {a["actor_id"] for a in actors_after} == set(actors_before)
        for actor in actors_after:
            assert actor["state"] == "ALIVE" and int(actor["num_restarts"]) == 0, actor
        assert _finished(client, str(job.job_id)) > before
    finally:
        stop_job(ray_cluster, job)
