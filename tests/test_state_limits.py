"""State API truncation and several running jobs: detected and reported, never silent."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from conftest import run_script

from debug_hang import localcluster

pytestmark = pytest.mark.integration

MANY_TASKS_JOB = '''
import os, time, ray
ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))

@ray.remote(num_cpus=0)
def shard(i):
    time.sleep(3600 if i == 0 else 0)
    return i

ray.get([shard.remote(i) for i in range(1, {n})])  # finished history
blocked = shard.remote(0)
print("READY", flush=True)
ray.get(blocked)
'''


def test_truncation_and_several_jobs_are_reported(tmp_path: Path) -> None:
    # GIVEN a head whose State API returns at most 40 rows, and two running jobs, one with 60 tasks
    # of which one is blocked and the others finished
    os.environ["RAY_MAX_LIMIT_FROM_API_SERVER"] = "40"
    try:
        cluster = localcluster.start(int(os.environ.get("DEBUG_HANG_TEST_PORT", "6400")) + 6, num_cpus=2)
    finally:
        del os.environ["RAY_MAX_LIMIT_FROM_API_SERVER"]
    try:
        from ray.job_submission import JobSubmissionClient

        client = JobSubmissionClient(cluster.dashboard)
        for name, n in (("older.py", 3), ("many.py", 60)):
            (tmp_path / "job").mkdir(exist_ok=True)
            (tmp_path / "job" / name).write_text(MANY_TASKS_JOB.format(n=n))
            sub = localcluster.submit_job(client, entrypoint=f"python {name}", runtime_env={"working_dir": str(tmp_path / "job")})
            localcluster.wait_for(lambda s=sub: "READY" in client.get_job_logs(s), 90, f"{name} READY")
            time.sleep(1)
        time.sleep(3)
        # WHEN the diagnosis runs without --job-id
        proc = run_script(["scripts/diagnose_ray_hang.sh", cluster.gcs, str(tmp_path / "d")], timeout_s=120,
                          env=cluster.env())
        assert proc.returncode == 0, proc.stderr
        report = (tmp_path / "d" / "report.md").read_text()
        # THEN it picked the newest RUNNING job, said why, listed the other one,
        assert "most recently started of 2 RUNNING jobs" in report
        assert "Other jobs:" in report and "(RUNNING)" in report
        # and said that the task list was cut, with the counts
        snapshot = json.loads((tmp_path / "d" / "snapshot.json").read_text())
        assert any("returned 40 of" in w for w in snapshot["warnings"]), snapshot["warnings"]
        assert "returned 40 of" in report
        # and the job's one blocked task was still read (the first listing holds unfinished rows
        # only), while its cut history is recorded in diagnosis.json
        assert any(t.get("name") == "shard" and t.get("state") == "RUNNING" for t in snapshot["tasks"]), snapshot["truncated"]
        assert "tasks" not in snapshot["truncated"]
        diagnosis = json.loads((tmp_path / "d" / "diagnosis.json").read_text())
        assert diagnosis["collection"]["truncated"]["tasks_of_job"]["returned"] == 40, diagnosis["collection"]
        # and, the job's rows being cut, the progress window read its unfinished tasks and those that
        # ended since by state and task id: complete, so not recorded as cut
        assert "tasks_after" not in diagnosis["collection"]["truncated"], diagnosis["collection"]
        after = json.loads((tmp_path / "d" / "tasks_after.json").read_text())
        assert any(t.get("name") == "shard" and t.get("state") == "RUNNING" for t in after), after
    finally:
        localcluster.stop(cluster)
