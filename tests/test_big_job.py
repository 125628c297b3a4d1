"""A job whose finished history passes the State API's 10,000-row answer: its blocked tasks are
still found, and the progress window's second reading misses none of them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import ROOT, run_script

from debug_hang import localcluster
from debug_hang.collect.state import LIST_LIMIT, DashboardClient

pytestmark = pytest.mark.integration

FINISHED = 12_000  # past LIST_LIMIT: a job-wide listing returns an arbitrary 10,000 of the job's rows
BLOCKED = 2


def test_blocked_tasks_of_a_job_with_a_long_history_are_all_read_again(tmp_path: Path) -> None:
    # GIVEN a job that ran 12,000 tiny tasks to completion, then left 2 waiter tasks blocked in
    # ray.get on Gate.wait, which waits on an event nobody sets (the second Gate.wait call queued)
    cluster = localcluster.start(int(os.environ.get("DEBUG_HANG_TEST_PORT", "6400")) + 7, num_cpus=2)
    try:
        from ray.job_submission import JobSubmissionClient

        client = JobSubmissionClient(cluster.dashboard)
        sub = localcluster.submit_job(client, entrypoint=f"python many_tasks_then_blocked.py {FINISHED} {BLOCKED}",
                                runtime_env={"working_dir": str(ROOT / "tests" / "jobs")})
        localcluster.wait_for(lambda: "READY" in client.get_job_logs(sub) or client.get_job_status(sub).is_terminal(),
                              300, "the job's history to finish")
        job_id = str(client.get_job_info(sub).job_id)
        state = DashboardClient(cluster.dashboard, timeout_s=30)
        unfinished = [("job_id", "=", job_id), ("state", "!=", "FINISHED")]
        localcluster.wait_for(lambda: sum(t.get("state") == "RUNNING" for t in state.list_state("tasks", unfinished).rows)
                              >= BLOCKED + 1, 120, "the waiters and Gate.wait running")
        history = state.list_state("tasks", [("job_id", "=", job_id)], detail=False)
        assert (history.total or 0) > LIST_LIMIT >= len(history.rows)  # the job's rows do not fit one answer

        # WHEN the diagnosis runs on it
        out = tmp_path / "d"
        proc = run_script(["scripts/diagnose_ray_hang.sh", cluster.gcs, str(out), "--job-id", job_id],
                          timeout_s=240, env=cluster.env())
        assert proc.returncode == 0, proc.stderr[-2000:]
        diagnosis = json.loads((out / "diagnosis.json").read_text())
        open_now = state.list_state("tasks", unfinished).rows

        # THEN it is a hang on Gate.wait, whose waiters (tasks) and the driver were dumped,
        assert diagnosis["verdict"] == "hang", diagnosis["summary"]
        culprits = [c for cause in diagnosis["root_causes"] for c in cause["culprits"]]
        assert culprits and culprits[0]["class_name"] == "Gate", diagnosis["root_causes"]
        dumped = {p["pid"] for p in json.loads((out / "stacks.json").read_text())["processes"]}
        running = {int(t["worker_pid"]) for t in open_now if t.get("state") == "RUNNING"}
        assert len(running) == BLOCKED + 1 and running <= dumped, (running, dumped)
        # the second reading holds every unfinished task of the job, as the server lists them now,
        after = {(t["task_id"], t["attempt_number"]): t["state"] for t in json.loads((out / "tasks_after.json").read_text())}
        assert len(open_now) == 2 * BLOCKED
        assert {(t["task_id"], t["attempt_number"]): t["state"] for t in open_now}.items() <= after.items(), after
        # and only the job's cut history is recorded as cut (or said to be unread: 10,000 rows can
        # take the loaded head longer than the reading's 10 s), never the second reading
        truncated = diagnosis["collection"].get("truncated") or {}
        warnings = json.loads((out / "snapshot.json").read_text())["warnings"]
        assert "tasks_after" not in truncated, truncated
        assert any("by task id" in w for w in warnings), warnings
        if not any("did not answer /api/v0/tasks" in w or "not read in time" in w for w in warnings):
            assert truncated["tasks_of_job"]["returned"] == LIST_LIMIT < truncated["tasks_of_job"]["total"], truncated
        client.stop_job(sub)
    finally:
        localcluster.stop(cluster)
