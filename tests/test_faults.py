"""A diagnostic that never hangs and fails clearly: bad addresses, bad input, missing jobs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, LocalCluster, run_script


def _env_without_address() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    return env


@pytest.mark.unit
def test_unreachable_address_fails_fast_naming_the_address_and_the_port_rule(tmp_path: Path) -> None:
    # GIVEN an address where no GCS listens (Ray's own client would wait 30-40 s)
    start = time.monotonic()
    # WHEN the responder runs the diagnosis
    proc = run_script(["scripts/diagnose_ray_hang.sh", "127.0.0.1:6399", str(tmp_path / "out")],
                      timeout_s=60, env=_env_without_address())
    # THEN it fails within seconds, with one line naming the address and the default-port rule
    assert time.monotonic() - start < 15
    assert proc.returncode == 4, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "127.0.0.1:6399" in lines[0] and "6379" in lines[0]


@pytest.mark.unit
def test_no_address_at_all_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_script(["scripts/diagnose_ray_hang.sh"], timeout_s=60, env=_env_without_address())
    assert proc.returncode == 2
    assert "RAY_ADDRESS" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.unit
@pytest.mark.parametrize("content", [b"", b"\x00\x01\x02\xff" * 100, b"{not json", b"hello world\n" * 10])
def test_match_patterns_rejects_bad_input_with_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "input.json"
    path.write_bytes(content)
    proc = run_script(["scripts/match_patterns.py", str(path)], timeout_s=60)
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) >= 1 and "Traceback" not in proc.stderr


@pytest.mark.unit
@pytest.mark.parametrize("script", ["scripts/diagnose_ray_hang.sh", "scripts/match_patterns.py",
                                    "scripts/parse_stacks.py", "scripts/run_on_each_ray_node.py"])
def test_every_script_answers_help_with_exit_codes(script: str) -> None:
    proc = run_script([script, "--help"], timeout_s=60)
    assert proc.returncode == 0, proc.stderr
    assert "exit codes" in proc.stdout


@pytest.mark.integration
def test_unknown_job_id_is_not_found(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    proc = run_script(["scripts/diagnose_ray_hang.sh", ray_cluster.gcs, str(tmp_path / "o"), "--job-id", "ffff0000"],
                      timeout_s=60, env=ray_cluster.env())
    assert proc.returncode == 5, proc.stderr
    assert "ffff0000" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.integration
def test_dashboard_down_still_gives_a_partial_diagnosis(tmp_path: Path) -> None:
    # GIVEN a cluster with a hung job whose dashboard process then dies (own cluster: this breaks it)
    from debug_hang import localcluster

    cluster = localcluster.start(int(os.environ.get("DEBUG_HANG_TEST_PORT", "6400")) + 5, num_cpus=2)
    try:
        localcluster.submit_example(cluster, "producer_never_produces")
        killed = 0
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"dashboard/dashboard.py" in cmdline and f"--port={cluster.dashboard_port}".encode() in cmdline:
                    os.kill(int(entry), 9)
                    killed += 1
        assert killed == 1
        # WHEN the diagnosis runs
        start = time.monotonic()
        proc = run_script(["scripts/diagnose_ray_hang.sh", cluster.gcs, str(tmp_path / "d")], timeout_s=120,
                          env=cluster.env())
        # THEN it ends in seconds with a partial report: what is missing, and the stacks it could get
        assert time.monotonic() - start < 60
        assert proc.returncode == 0, proc.stderr
        diag = json.loads((tmp_path / "d" / "diagnosis.json").read_text())
        assert diag["verdict"] == "inconclusive"
        assert "State API did not answer" in diag["summary"]
        assert any(e.get("kind") == "state-api-down" for e in diag["collection"]["errors"])
        assert "ReplayBuffer" in (tmp_path / "d" / "report.md").read_text()
        # and it says what to run next: the per-node dump, which needs no dashboard
        assert diag["next_step"]["command"].startswith(f"python3 scripts/run_on_each_ray_node.py --address {cluster.gcs} ")
        assert f"next: {diag['next_step']['command']}" in proc.stdout
    finally:
        localcluster.stop(cluster)


@pytest.mark.unit
@pytest.mark.parametrize("script", ["scripts/parse_stacks.py", "scripts/match_patterns.py"])
def test_huge_binary_input_is_refused_fast(tmp_path: Path, script: str) -> None:
    # GIVEN 100 MB of binary data (a core file pasted by mistake)
    path = tmp_path / "core"
    with path.open("wb") as fh:
        fh.write(os.urandom(1024 * 1024) * 100)
    start = time.monotonic()
    proc = run_script([script, str(path)], timeout_s=120)
    # THEN one line, exit 3, in seconds
    assert proc.returncode == 3, proc.stderr
    assert "binary" in proc.stderr and "Traceback" not in proc.stderr
    assert time.monotonic() - start < 20


@pytest.mark.integration
def test_deadline_is_kept(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    # GIVEN a hung job and a tight deadline
    from conftest import stop_job, submit_example

    job = submit_example(ray_cluster, "actor_call_cycle")
    try:
        start = time.monotonic()
        proc = run_script(["scripts/diagnose_ray_hang.sh", ray_cluster.gcs, str(tmp_path / "d"), "--job-id",
                           str(job.job_id), "--deadline", "4", "--samples", "3", "--interval", "1"],
                          timeout_s=60, env=ray_cluster.env())
        elapsed = time.monotonic() - start
    finally:
        stop_job(ray_cluster, job)
    # THEN the run ends by the deadline (plus interpreter start-up) with a diagnosis
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 4 + 5, elapsed
    assert json.loads((tmp_path / "d" / "diagnosis.json").read_text())["verdict"] in ("hang", "inconclusive")


@pytest.mark.unit
def test_a_dashboard_that_never_answers_ends_at_the_deadline(tmp_path: Path) -> None:
    # GIVEN a dashboard port that accepts connections but never answers (an overloaded head)
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    port = server.getsockname()[1]
    try:
        # WHEN the diagnosis runs with a 3 s deadline
        start = time.monotonic()
        proc = run_script(["scripts/diagnose_ray_hang.sh", f"http://127.0.0.1:{port}", str(tmp_path / "d"),
                           "--deadline", "3"], timeout_s=60, env=_env_without_address())
        elapsed = time.monotonic() - start
    finally:
        server.close()
        for conn in held:
            conn.close()
    # THEN it gives up by the deadline with exit 6 and one line saying what to do
    assert proc.returncode == 6, proc.stderr
    assert "deadline" in proc.stderr and "Traceback" not in proc.stderr
    assert elapsed < 3 + 6, elapsed


class _RefusingProxy:
    """The real dashboard behind a proxy that answers 503 on one endpoint (as an ingress whose
    upstream timeout is shorter than a big job's task listing does); everything else is passed on."""

    def __init__(self, upstream: str, refused: str) -> None:
        import http.server
        import threading
        import urllib.error
        import urllib.request

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                if self.path.startswith(refused):
                    self.send_response(503)
                    self.end_headers()
                    self.wfile.write(b"upstream request timeout")
                    return
                try:
                    with urllib.request.urlopen(upstream + self.path, timeout=30) as resp:
                        status, body = resp.status, resp.read()
                except urllib.error.HTTPError as exc:
                    status, body = exc.code, exc.read()
                self.send_response(status)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                """Quiet."""

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.mark.integration
def test_a_refused_task_listing_is_inconclusive_live_and_when_re_analysed(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    # GIVEN a real hang, and a dashboard whose task listing fails behind its proxy
    from conftest import stop_job, submit_example

    from debug_hang.pipeline import reanalyse

    job = submit_example(ray_cluster, "producer_never_produces")
    proxy = _RefusingProxy(ray_cluster.dashboard, "/api/v0/tasks")
    try:
        # WHEN it is diagnosed through that proxy
        proc = run_script(["scripts/diagnose_ray_hang.sh", proxy.url, str(tmp_path / "d"), "--job-id", str(job.job_id)],
                          timeout_s=120, env=ray_cluster.env())
    finally:
        proxy.close()
        stop_job(ray_cluster, job)
    assert proc.returncode in (0, 8), proc.stderr
    live = json.loads((tmp_path / "d" / "diagnosis.json").read_text())
    # THEN the live run says inconclusive (the wait cannot be followed without task state), and so
    # does the saved folder re-analysed
    assert live["verdict"] == "inconclusive", live["summary"]
    assert any("/api/v0/tasks" in str(e.get("error")) for e in live["collection"]["errors"]), live["collection"]["errors"]
    again = reanalyse(tmp_path / "d")
    assert again.verdict == live["verdict"] and again.summary == live["summary"]
    if os.environ.get("DEBUG_HANG_RECORD"):
        import shutil

        dest = ROOT / "tests" / "data" / "captures" / "task_listing_refused"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for name in ("snapshot.json", "stacks.json", "tasks_after.json", "evidence.json", "diagnosis.json"):
            shutil.copy(tmp_path / "d" / name, dest / name)
