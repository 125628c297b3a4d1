"""`debug-hang watch` on real jobs of a real loopback cluster: it fires once, in time, with the right
culprit on a job that hangs after healthy steps; fires nothing on a healthy job with a quiet phase
shorter than the stall and ends with it; and rides out a dashboard restart.

The watcher runs as a user runs it (`python -m debug_hang watch ...`, a separate process); `--stall`
is seconds here. Unit tests of its signals run on task summaries recorded from real jobs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, LocalCluster, expected_of, stop_job, submit_example, wait_for

from debug_hang import localcluster
from debug_hang.commands.watch import duration
from debug_hang.errors import UsageError
from debug_hang.watch import SLOWDOWN, JobWatch, Watcher, WatchOptions, log_signal, task_signals

DATA = ROOT / "tests" / "data" / "watch"


class WatchProcess:
    """`debug-hang watch` in its own process; every stdout line kept with the time it arrived."""

    def __init__(self, cluster: LocalCluster, args: list[str]) -> None:
        env = cluster.env()
        env["PYTHONPATH"] = str(ROOT)
        self.proc = subprocess.Popen([sys.executable, "-m", "debug_hang", "watch", cluster.gcs, *args], cwd=ROOT,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[tuple[float, str]] = []
        self.err: list[str] = []
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip()))

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.err.extend(self.proc.stderr)

    def first(self, text: str) -> float | None:
        return next((t for t, line in self.lines if text in line), None)

    def wait_line(self, text: str, timeout_s: float) -> float:
        return wait_for(lambda: self.first(text), timeout_s, f"the watcher to print {text!r}\n{self.output()}", 0.2)

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the watcher did not end in {timeout_s}s\n{self.output()}") from None

    def output(self) -> str:
        return "\n".join(line for _, line in self.lines) + "\n--- stderr ---\n" + "".join(self.err)[-2000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def submit(cluster: LocalCluster, entrypoint: str, working_dir: Path) -> tuple[str, object]:
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(cluster.dashboard)
    return localcluster.submit_job(client, entrypoint=entrypoint, runtime_env={"working_dir": str(working_dir)}), client


@pytest.mark.integration
def test_a_job_that_hangs_after_warmup_is_diagnosed_once_within_the_stall(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    # GIVEN a job that trains healthily for ~10 s and then hangs, watched from its start
    stall = 8.0
    sub, client = submit(ray_cluster, "python hangs_after_warmup.py", localcluster.EXAMPLES_DIR)
    marker = tmp_path / "on_hang.json"
    on_hang = (f"{sys.executable} -c \"import json, os; json.dump({{k: v for k, v in os.environ.items() "
               f"if k.startswith('DEBUG_HANG_')}}, open('{marker}', 'w'))\"")
    watch = WatchProcess(ray_cluster, ["--job-id", sub, "--stall", f"{stall:.0f}s", "--interval", "1",
                                       "--out", str(tmp_path / "out"), "--once", "--on-hang", on_hang])
    try:
        # WHEN the job reaches the step that hangs
        hung_at = wait_for(lambda: time.monotonic() if "READY" in client.get_job_logs(sub) else None,  # type: ignore[attr-defined]
                           120, "the job to reach its first evaluation", 0.3)
        code = watch.wait(stall + 90)
    finally:
        watch.stop()
        stop_job(ray_cluster, localcluster.SubmittedJob(sub, None))
    # THEN the watcher saw the healthy steps as progress, and fired once, after the hang only
    out = watch.output()
    assert code == 0, out
    assert "signals tasks" in out and "driver-log" in out, out
    confirmed = watch.first("stall confirmed")
    reported = watch.first("report: ")
    assert confirmed is not None and reported is not None, out
    assert confirmed > hung_at, f"fired during the healthy warm-up\n{out}"
    print(f"hang seen in the job log -> report written: {reported - hung_at:.1f}s (stall {stall:.0f}s)")
    assert reported - hung_at <= stall + 10 + 5, f"diagnosis {reported - hung_at:.1f}s after the hang\n{out}"
    assert out.count("stall confirmed") == 1, out
    # ... with the right culprit, and the user's command got the report in its environment
    folders = list((tmp_path / "out").iterdir())
    assert len(folders) == 1, folders
    diag = json.loads((folders[0] / "diagnosis.json").read_text())
    expected = expected_of("hangs_after_warmup")
    assert diag["verdict"] == "hang", diag["summary"]
    assert diag["root_causes"][0]["pattern"] == expected["pattern"], diag["summary"]
    assert {c["class_name"] for c in diag["root_causes"][0]["culprits"]} >= {c["class_name"] for c in expected["culprits"]}
    env = json.loads(marker.read_text())
    assert env["DEBUG_HANG_VERDICT"] == "hang" and env["DEBUG_HANG_JOB_ID"] == diag["job_id"], env
    assert Path(env["DEBUG_HANG_REPORT"]) == folders[0] / "report.md" and Path(env["DEBUG_HANG_REPORT"]).is_file()


@pytest.mark.integration
def test_a_healthy_job_with_a_quiet_phase_fires_nothing_and_the_watch_ends_with_it(ray_cluster: LocalCluster,
                                                                                    tmp_path: Path) -> None:
    # GIVEN a healthy job whose checkpoint is silent for 6 s, watched with a 14 s stall
    sub, client = submit(ray_cluster, "python quiet_checkpoint.py 6 15 10", ROOT / "tests" / "jobs")
    watch = WatchProcess(ray_cluster, ["--job-id", sub, "--stall", "14", "--interval", "1", "--out", str(tmp_path / "out")])
    try:
        # WHEN the job runs to its end
        code = watch.wait(150)
    finally:
        watch.stop()
        stop_job(ray_cluster, localcluster.SubmittedJob(sub, None))
    out = watch.output()
    logs = client.get_job_logs(sub)  # type: ignore[attr-defined]
    # THEN nothing fired, and the watch ended with the job, saying so
    assert "QUIET" in logs and "DONE" in logs, logs[-1000:]
    assert code == 0, out
    assert "ended (SUCCEEDED)" in out and "no job left to watch" in out, out
    assert "stall confirmed" not in out and "no progress for" not in out, out
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.integration
def test_a_silent_evaluation_after_logged_steps_is_confirmed_as_work_and_fires_nothing(
        ray_cluster: LocalCluster, tmp_path: Path) -> None:
    # GIVEN a job that logs 40 training steps, then evaluates for minutes in numpy without a line,
    # watched with a 15 s stall and a command to run on a hang
    sub, client = submit(ray_cluster, "python silent_numpy_eval.py", localcluster.EXAMPLES_DIR)
    marker = tmp_path / "fired"
    watch = WatchProcess(ray_cluster, ["--job-id", sub, "--stall", "15", "--interval", "1", "--out",
                                       str(tmp_path / "out"), "--on-hang", f"touch {marker}"])
    try:
        # WHEN the evaluation has been silent for longer than the stall
        wait_for(lambda: "step 39 loss" in client.get_job_logs(sub), 180, "the 40 logged steps", 0.5)  # type: ignore[attr-defined]
        watch.wait_line("not firing", 150)
    finally:
        watch.stop()
        stop_job(ray_cluster, localcluster.SubmittedJob(sub, None))
    # THEN the watcher suspected a stall and diagnosed it, but the diagnosis saw the work: no alarm,
    # and the watcher says what moved
    out = watch.output()
    assert "stall confirmed" in out and not marker.exists(), out
    assert "verdict: hang" not in out, out
    line = next(text for _, text in watch.lines if "not firing" in text)
    assert "Trainer" in line and any(word in line for word in ("stack moved", "loop state advanced", "no spin")), line
    (folder,) = list((tmp_path / "out").iterdir())
    diag = json.loads((folder / "diagnosis.json").read_text())
    assert diag["verdict"] in ("no-hang", "inconclusive"), diag["summary"]


def dashboard_pid(cluster: LocalCluster) -> int:
    """The dashboard process of this test cluster only (by its temp dir and port)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"dashboard/dashboard.py" in cmdline and f"--temp-dir={cluster.temp_dir}".encode() in cmdline \
                    and f"--port={cluster.dashboard_port}".encode() in cmdline:
                return int(entry)
    raise AssertionError(f"no dashboard process for {cluster.temp_dir}")


def restart_dashboard(cluster: LocalCluster, down_s: float) -> None:
    """Kill this cluster's dashboard and start it again with the same command line and environment."""
    pid = dashboard_pid(cluster)
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    env = dict(e.split(b"=", 1) for e in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in e)
    os.kill(pid, signal.SIGKILL)
    time.sleep(down_s)
    subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)

    def up() -> bool:
        try:
            with urllib.request.urlopen(cluster.dashboard + "/api/version", timeout=2):
                return True
        except OSError:
            return False

    wait_for(up, 60, "the restarted dashboard")


@pytest.mark.integration
def test_the_watch_survives_a_dashboard_restart(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    # GIVEN a hung job under watch
    job = submit_example(ray_cluster, "actor_call_cycle")
    watch = WatchProcess(ray_cluster, ["--job-id", str(job.submission_id), "--stall", "12", "--interval", "1",
                                       "--out", str(tmp_path / "out"), "--once"])
    try:
        watch.wait_line("watching job", 60)
        # WHEN the dashboard dies and comes back while the watcher reads
        restart_dashboard(ray_cluster, down_s=3)
        code = watch.wait(120)
    finally:
        watch.stop()
        stop_job(ray_cluster, job)
    # THEN it said it could not see the cluster, resumed, and still diagnosed the hang once
    out = watch.output()
    assert code == 0, out
    lost, back, fired = watch.first("cannot see the cluster"), watch.first("cluster visible again"), watch.first("report: ")
    assert lost is not None and back is not None and fired is not None, out
    assert lost < back < fired, out
    folders = list((tmp_path / "out").iterdir())
    diag = json.loads((folders[0] / "diagnosis.json").read_text())
    assert diag["verdict"] == "hang" and diag["root_causes"][0]["pattern"] == "actor-call-cycle", diag["summary"]


# -- unit: the signals, on task summaries recorded from real jobs -----------------------------


@pytest.mark.unit
def test_durations() -> None:
    assert [duration(t) for t in ("90", "90s", "15m", "2h", "1.5m")] == [90, 90, 900, 7200, 90]
    with pytest.raises(Exception, match="invalid duration"):
        duration("ten minutes")


def series(name: str) -> list[dict]:
    return json.loads((DATA / f"{name}.json").read_text())["readings"]


@pytest.mark.unit
def test_a_moving_job_moves_every_signal() -> None:
    # GIVEN task summaries and driver-log tails read once a second from a healthy job (healthy_slow)
    readings = series("healthy_slow")
    signals = [task_signals(r["summary"]) for r in readings]
    # THEN the task fingerprint and the finished count change over the series, and so does the log tail
    assert len({s[0] for s in signals}) >= len(readings) // 2, [s[1] for s in signals]
    finished = [int(s[1].split()[0]) for s in signals]
    assert finished == sorted(finished) and finished[-1] > finished[0]
    assert log_signal(readings[0]["log_tail"]) != log_signal(readings[-1]["log_tail"])


@pytest.mark.unit
def test_a_hung_job_moves_no_signal() -> None:
    # GIVEN the same readings of a job hung in an actor call cycle
    readings = series("actor_call_cycle")
    # THEN every reading gives the same fingerprints
    assert len(readings) >= 4
    assert len({task_signals(r["summary"])[0] for r in readings}) == 1
    assert len({log_signal(r["log_tail"]) for r in readings}) == 1


@pytest.mark.unit
def test_ray_train_status_polls_are_not_progress_but_reports_are() -> None:
    # GIVEN a Ray Train run reporting every epoch, with one quiet 15 s epoch during which the
    # controller keeps polling its workers
    readings = series("train_reports")
    signals = [task_signals(r["summary"]) for r in readings]
    raw = [json.dumps(r["summary"]["result"], sort_keys=True) for r in readings]
    # THEN some readings differ only by poll_status calls, and the fingerprint ignores them
    polls_only = [i for i in range(1, len(readings)) if raw[i] != raw[i - 1] and signals[i][0] == signals[i - 1][0]]
    assert polls_only, "no reading where only the status polls moved"
    # ... the longest silence of the fingerprint covers the quiet epoch
    longest, since = 0.0, readings[0]["t"]
    for prev, cur, r in zip(signals, signals[1:], readings[1:], strict=False):
        if cur[0] != prev[0]:
            since = r["t"]
        longest = max(longest, r["t"] - since)
    assert longest >= 10, longest
    # ... and ray.train.report barriers are a signal of their own that grows
    reports = [s[2].get("train-reports", 0) for s in signals]
    assert reports[-1] > reports[0] >= 0 and reports == sorted(reports), reports


@pytest.mark.unit
def test_ray_timed_lines_are_not_log_progress() -> None:
    base = "step 1: loss 0.5\nstep 2: loss 0.4\n"
    noise = "\x1b[33m(autoscaler +1m2s)\x1b[0m Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0}\n"
    assert log_signal(base) == log_signal(base + noise) != log_signal(base + "step 3: loss 0.3\n")


@pytest.mark.unit
def test_the_interval_slows_when_quiet_but_lands_on_the_stall_deadline() -> None:
    now = [1000.0]
    watcher = Watcher(WatchOptions(address="127.0.0.1:1", stall_s=600, interval_s=30), say=lambda _: None,
                      clock=lambda: now[0], sleep=lambda _: None)
    job = JobWatch(job_id="01000000", submission_id=None, driver_node_id=None, entrypoint="", progress_at=now[0])
    watcher.jobs[job.job_id] = job
    watcher.pace = 30 * SLOWDOWN  # slowest pace after a long quiet spell
    assert watcher._next_wait() == 120  # far from the deadline: the slow pace
    now[0] += 550
    assert watcher._next_wait() == 50  # shortened to land on the stall deadline
    now[0] += 45
    assert watcher._next_wait() == 30  # never faster than --interval
    job.fired = True  # after a diagnosis, no deadline: the slow pace again
    assert watcher._next_wait() == 120
    with pytest.raises(UsageError):
        Watcher(WatchOptions(stall_s=10, interval_s=30))
    with pytest.raises(UsageError):
        Watcher(WatchOptions(on_hang="notify 'unclosed"))


@pytest.mark.integration
def test_as_a_ray_job_it_needs_no_cpu_and_never_watches_itself(ray_cluster: LocalCluster) -> None:
    # GIVEN the watcher submitted as a Ray job (no CPU asked), told to watch its own submission id
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(ray_cluster.dashboard)
    sub = f"watch-self-{os.getpid()}-{int(time.time())}"
    localcluster.submit_job(client, entrypoint=f"python -m debug_hang watch --job-id {sub} --stall 5 --interval 1", submission_id=sub,
                      entrypoint_num_cpus=0,
                      runtime_env={"working_dir": str(ROOT), "excludes": ["tests/", ".git/", "benchmarks/", "tools/"]})
    # WHEN it starts
    wait_for(lambda: client.get_job_status(sub).is_terminal(), 120, "the watcher job to end")
    logs = client.get_job_logs(sub)
    # THEN it refuses, saying why (usage error), instead of watching or diagnosing itself
    assert str(client.get_job_status(sub)) in ("FAILED", "JobStatus.FAILED"), logs
    assert "is this watcher itself" in logs, logs
