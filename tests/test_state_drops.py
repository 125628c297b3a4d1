"""Task lists past the GCS's task-event cap: records Ray dropped are told apart from a list a
limit cut (collect/state.py). Answers recorded from the State API of a real job of 100,000
finished tasks and 3 blocked waiters (benchmarks/bench_tasks.py), 9 records past the cap."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from debug_hang.collect.state import LIST_LIMIT, ListResult, _store
from debug_hang.snapshot import Snapshot

pytestmark = pytest.mark.unit

DATA = ROOT / "tests" / "data" / "state_lists"


def _answer(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())["data"]["result"]
    return data


def test_unfinished_tasks_read_whole_while_ray_dropped_finished_records() -> None:
    # GIVEN the job's unfinished tasks, filtered on the server, after the GCS evicted finished records
    data = _answer("job_unfinished")
    # WHEN read as a task list
    result = ListResult.from_data(data, "tasks")
    # THEN every unfinished row is there, not cut, and the drops are counted as such
    assert len(result.rows) == data["num_filtered"] == data["num_after_truncation"] < data["total"]
    assert {t["state"] for t in result.rows} <= {"RUNNING", "SUBMITTED_TO_WORKER"}
    assert not result.cut and result.truncated
    assert result.events_dropped == data["total"] - len(result.rows)
    assert result.completeness()["events_dropped"] == result.events_dropped
    snap = Snapshot(dashboard_url="http://127.0.0.1:8600", taken_at=0.0)
    _store(snap, "tasks", result)
    assert snap.truncated["tasks"]["events_dropped"] == result.events_dropped
    assert "all 6 matching rows read, but Ray dropped" in snap.warnings[0]
    assert "RAY_MAX_LIMIT_FROM_API_SERVER" not in snap.warnings[0]


def test_a_job_wide_listing_of_the_huge_job_is_cut() -> None:
    # GIVEN the job-wide listing (all states) of that job, asked for 40 rows
    data = _answer("job_wide_limit_40")
    # WHEN read as a task list
    result = ListResult.from_data(data, "tasks")
    # THEN it is cut twice: at the source (10,000 of the job's records) and by the limit (40)
    assert result.cut and result.truncated
    assert result.after_source == LIST_LIMIT and (result.total or 0) > LIST_LIMIT
    assert result.events_dropped is None  # a source cut and drops cannot be told apart: none inferred
    snap = Snapshot(dashboard_url="http://127.0.0.1:8600", taken_at=0.0)
    _store(snap, "tasks_of_job", result)
    assert snap.truncated["tasks_of_job"] == {"returned": 40, "total": result.total, "matched": LIST_LIMIT}
    assert "returned 40 of 10000 rows" in snap.warnings[0]


def test_other_lists_infer_no_drops() -> None:
    # GIVEN the same numbers read as a list that is not of tasks (no task events to drop)
    result = ListResult.from_data(_answer("job_unfinished"))
    # THEN a total above the rows is a cut, as before
    assert result.events_dropped is None and result.cut and result.truncated


def test_recorded_answers_are_real_ray_answers() -> None:
    for path in DATA.glob("*.json"):
        doc = json.loads(Path(path).read_text())
        assert doc["result"] is True and "num_after_truncation" in doc["data"]["result"], path


def test_the_reading_by_id_ends_at_the_deadline_when_the_dashboard_stops_answering(silent_port: int) -> None:
    # GIVEN a job's 24 unfinished tasks (one recorded RUNNING row, copied under new task ids) and
    # a dashboard that accepts connections and never answers, with a 10 s timeout per request
    from debug_hang.collect.state import DashboardClient, progress_reading
    from debug_hang.timeouts import Deadline

    snap = json.loads((ROOT / "tests" / "data" / "cases" / "producer_never_produces" / "snapshot.json").read_text())
    row = next(t for t in snap["tasks"] if t.get("state") == "RUNNING")
    before = [{**row, "task_id": f"{i:02d}{str(row['task_id'])[2:]}"} for i in range(24)]
    client = DashboardClient(f"http://127.0.0.1:{silent_port}", timeout_s=10.0)
    start = time.monotonic()
    reading = progress_reading(client, str(row["job_id"]), before, history_cut=True, deadline=Deadline(2.0))
    # THEN it ends near the deadline (3 waves of 8 lookups would take 30 s), saying it read nothing
    assert time.monotonic() - start < 6.0
    assert reading.mode == "by-id" and reading.error and not reading.rows


class _Replay:
    """A local HTTP server that answers each request with the next recorded (status, body)."""

    def __init__(self, answers: list[tuple[int, bytes]]) -> None:
        import http.server
        import threading

        replay = self
        self.answers, self.asked = list(answers), 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                status, body = replay.answers[min(replay.asked, len(replay.answers) - 1)]
                replay.asked += 1
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


HTTP500 = (500, (ROOT / "tests" / "data" / "state_errors" / "ray231_tasks_http500.json").read_bytes())  # a real Ray 2.31 handler's traceback
LISTED = (200, (DATA / "job_unfinished.json").read_bytes())


def test_a_listing_the_dashboard_failed_once_is_asked_again() -> None:
    # GIVEN a dashboard whose handler raised once (Ray 2.31 answered 500 under CI load), then answered
    from debug_hang.collect.state import DashboardClient

    replay = _Replay([HTTP500, LISTED])
    try:
        result = DashboardClient(replay.url, timeout_s=5.0).list_state("tasks", [("job_id", "=", "01000000")])
    finally:
        replay.close()
    # THEN the second answer is the listing: no error, the rows read
    assert replay.asked == 2 and result.error is None and len(result.rows) == 6


def test_a_listing_that_fails_twice_names_the_exception_the_dashboard_raised() -> None:
    # GIVEN a dashboard whose handler raises on every request
    from debug_hang.collect.state import DashboardClient

    replay = _Replay([HTTP500])
    try:
        result = DashboardClient(replay.url, timeout_s=5.0).list_state("tasks", [("task_id", "=", "abcd")])
    finally:
        replay.close()
    # THEN asked twice, and the error says what raised (the traceback's last line), not its first line
    assert replay.asked == 2 and result.error is not None
    assert "answered HTTP 500: ValueError: ID string needs to have length 24" in result.error, result.error
    assert "Traceback" not in result.error
