"""A throw-away Ray cluster on loopback, for the demo and the tests, plus example-job helpers.

Binds to 127.0.0.1 only (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, or Ray swaps in the external
address) and uses its own ports and temp dir, so it never touches a cluster on the default ports.
`stop()` kills only this cluster's processes: `ray stop` would kill every Ray on the machine.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from debug_hang.errors import DebugHangError, UnreachableError
from debug_hang.paths import bundle_root

EXAMPLES_DIR = bundle_root() / "examples"
T = TypeVar("T")


@dataclass
class LocalCluster:
    port: int
    dashboard_port: int
    temp_dir: str
    num_cpus: int
    host: str = "127.0.0.1"

    @property
    def gcs(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def dashboard(self) -> str:
        return f"http://{self.host}:{self.dashboard_port}"

    def env(self) -> dict[str, str]:
        """The environment for a command that should talk to this cluster."""
        env = loopback_env()
        env["RAY_ADDRESS"] = self.gcs
        return env


def attach(address: str) -> LocalCluster:
    """A running cluster given by its GCS address (not started, never stopped, by this module)."""
    from debug_hang.collect.address import check_reachable, parse_address, resolve_dashboard

    addr = parse_address(address)
    check_reachable(addr)
    url = resolve_dashboard(addr).dashboard_url or ""
    return LocalCluster(port=addr.port, dashboard_port=int(url.rsplit(":", 1)[-1]), temp_dir="", num_cpus=0,
                        host=addr.host)


def loopback_env() -> dict[str, str]:
    env = dict(os.environ)
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray runs async actors on uvloop when it is installed (ray[serve] brings it): their idle
    # event loops then show no Python frame of the loop (uvloop's is C). The local clusters (tests,
    # demo) keep asyncio's own loop, as a default install has, so that the recorded cases show its
    # frames; tests/test_examples.py runs async examples under uvloop per job (RAY_USE_UVLOOP=1).
    env.setdefault("RAY_USE_UVLOOP", "0")
    return env


def start(port: int = 6400, num_cpus: int = 4, extra: list[str] | None = None) -> LocalCluster:
    """Start a head node on 127.0.0.1:`port`; the other ports are derived from it. A head whose
    raylet did not register in Ray's fixed 30 s (a loaded machine) is cleaned up and started again, once."""
    try:
        return _start(port, num_cpus, extra)
    except DebugHangError as exc:
        if not any(sign in str(exc) for sign in _RETRIED):
            raise
        return _start(port, num_cpus, extra)


# Start failures that a second start can avoid: a slow raylet, and a port that Ray chose at random
# (e.g. the dashboard agent's gRPC port on Ray 2.9) landing in the fixed worker range.
_RETRIED = ("timed out during startup", "that is used by other components")


WORKER_PORTS = 500  # a range per cluster: a local cluster's workers need a few dozen


def _worker_ports(base: int) -> int:
    """The first of this cluster's 500 worker ports: below the kernel's ephemeral range, where Ray
    takes the ports it picks at random (a clash makes `ray start` fail), or DEBUG_HANG_WORKER_PORTS."""
    if os.environ.get("DEBUG_HANG_WORKER_PORTS"):
        return int(os.environ["DEBUG_HANG_WORKER_PORTS"])
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    slots = max(1, (low - 12000) // WORKER_PORTS)  # from 12000: clear of the client-server ports (10400+)
    return 12000 + (base % slots) * WORKER_PORTS


def _start(port: int, num_cpus: int, extra: list[str] | None) -> LocalCluster:
    base = port - 6400
    if not 0 <= base < 1000:
        raise DebugHangError(f"local cluster port {port} must be in 6400-7399 (other ports are derived from it)")
    # A private range per cluster; DEBUG_HANG_WORKER_PORTS=N moves it to N..N+499
    # (sessions sharing one machine).
    if _listening(port):
        # Another cluster (a test run, a demo, a user's) holds the port: starting here would fail,
        # and cleaning up after that failure would kill that cluster by its port and temp dir.
        raise DebugHangError(f"port {port} on 127.0.0.1 is in use (another Ray cluster?): stop it, or choose "
                             "another port (demo --port, DEBUG_HANG_TEST_PORT for the tests)")
    worker_ports = _worker_ports(base)
    temp_dir = f"/tmp/ray_dh_{port}"
    shutil.rmtree(temp_dir, ignore_errors=True)
    cluster = LocalCluster(port=port, dashboard_port=8300 + base, temp_dir=temp_dir, num_cpus=num_cpus)
    cmd = [
        str(Path(sys.executable).parent / "ray"), "start", "--head", "--node-ip-address=127.0.0.1",
        "--dashboard-host=127.0.0.1", "--disable-usage-stats", f"--port={port}",
        f"--dashboard-port={cluster.dashboard_port}", f"--dashboard-agent-listen-port={52400 + base}",
        f"--ray-client-server-port={10400 + base}", f"--min-worker-port={worker_ports}",
        f"--max-worker-port={worker_ports + WORKER_PORTS - 1}", f"--temp-dir={temp_dir}", f"--num-cpus={num_cpus}",
        *(extra or []),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=loopback_env(), check=False)
    except subprocess.TimeoutExpired:
        stop(cluster)  # a half-started head (its GCS up) would refuse the next start on this port
        raise DebugHangError(f"ray start did not finish in 180 s (its log: {temp_dir}/session_latest/logs)") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        stop(cluster)  # what it did start would refuse the next start on this port
        raise DebugHangError(f"ray start failed: {' / '.join(tail)}")
    try:
        wait_for(lambda: _dashboard_up(cluster.dashboard), 60, "the dashboard to come up")
    except UnreachableError as exc:
        stop(cluster)  # a head without a dashboard is of no use here: leave nothing running
        raise DebugHangError(f"{exc} (its log: {temp_dir}/session_latest/logs/dashboard.log)") from None
    return cluster


def _listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:`port` (a GCS already there)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def stop(cluster: LocalCluster) -> None:
    """Kill this cluster's processes only (found by temp dir and port in their command lines)."""
    kill_by_cmdline((cluster.temp_dir.encode(), f"--gcs_server_port={cluster.port}".encode(),
                     f"127.0.0.1:{cluster.port}".encode()))


def kill_by_cmdline(markers: tuple[bytes, ...]) -> int:
    """SIGKILL every process (but this one) whose command line contains one of `markers`.

    For test and demo clusters only: `ray stop` would kill every Ray on the machine.
    """
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if any(m and m in cmdline for m in markers):
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def _dashboard_up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/api/version", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def wait_for(predicate: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.5) -> T:
    """Poll `predicate` until truthy; raise UnreachableError naming `what` after `timeout_s`."""
    end = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise UnreachableError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(interval_s)


def examples() -> list[str]:
    """Names of the examples/ scenarios (files that declare EXPECTED; a module named _* is a
    helper a scenario starts, never a scenario)."""
    return sorted(p.stem for p in EXAMPLES_DIR.glob("*.py") if not p.stem.startswith("_") and "EXPECTED" in p.read_text())


def expected_of(example: str) -> dict[str, Any]:
    """The EXPECTED literal an example declares."""
    tree = ast.parse((EXAMPLES_DIR / f"{example}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPECTED" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return value
    raise DebugHangError(f"{example} declares no EXPECTED")


def culprit_name(kind: object, class_name: object, name: object) -> object:
    """What an EXPECTED culprit's `class_name` names: an actor's class, a task's function (a
    running task's class_name is null, its name the function's)."""
    return class_name or (name if kind == "task" else None)


def culprit_matches(expected: dict[str, Any], culprits: list[dict[str, Any]]) -> bool:
    """One of a diagnosis's culprits (diagnosis.json) is the one an EXPECTED culprit names (by
    culprit_name), with the rank when EXPECTED gives one."""
    return any(culprit_name(c.get("kind"), c.get("class_name"), c.get("name")) == expected.get("class_name")
               and (expected.get("rank") is None or c.get("rank") == expected["rank"]) for c in culprits)


@dataclass
class SubmittedJob:
    submission_id: str
    job_id: str | None


def submit_example(cluster: LocalCluster, example: str, ready_timeout_s: float = 90,
                   settle_s: float = 3.0, env_vars: dict[str, str] | None = None) -> SubmittedJob:
    """Submit examples/<example>.py as a job; wait until it prints READY, then `settle_s` more.

    An example whose hang sets in long after its driver's last line (a Ray Train run, where the
    ranks print) names the line that marks it in EXPECTED["ready"], and a slow start-up its wait
    in EXPECTED["ready_timeout_s"]. `env_vars` are set in every process of the job (its runtime
    env), e.g. RAY_USE_UVLOOP=1 to run its async actors on uvloop on a cluster that does not.
    """
    from ray.job_submission import JobSubmissionClient

    expected = expected_of(example)
    marker = str(expected.get("ready", "READY"))
    # An example whose start-up is slow (Ray Data and Serve import much in every worker) says how long.
    ready_timeout_s = float(expected.get("ready_timeout_s", ready_timeout_s))
    client = JobSubmissionClient(cluster.dashboard)
    runtime_env: dict[str, Any] = {"working_dir": str(EXAMPLES_DIR)}
    if env_vars:
        runtime_env["env_vars"] = dict(env_vars)
    sub = submit_job(client, entrypoint=f"python {example}.py", runtime_env=runtime_env)

    def ready() -> bool:
        return marker in client.get_job_logs(sub) or client.get_job_status(sub).is_terminal()

    wait_for(ready, ready_timeout_s, f"{example} to print {marker!r}")
    status = client.get_job_status(sub)
    if status.is_terminal():
        raise DebugHangError(f"{example} ended early ({status}): {client.get_job_logs(sub)[-500:]}")
    job_id = client.get_job_info(sub).job_id
    wait_quiet(cluster, str(job_id), quiet_s=settle_s)
    return SubmittedJob(submission_id=sub, job_id=job_id)


def submit_job(client: Any, timeout_s: float = 60, **kwargs: Any) -> str:
    """`client.submit_job(**kwargs)`, tried again while the head has no job agent yet.

    A head's dashboard answers before its node's agent has registered; a job submitted then
    fails with "No available agent to submit job" (HTTP 500; seen with Ray 2.31 in CI).
    """
    end = time.monotonic() + timeout_s
    while True:
        try:
            return str(client.submit_job(**kwargs))
        except RuntimeError as exc:
            if "No available agent" not in str(exc) or time.monotonic() >= end:
                raise
            time.sleep(1.0)


def wait_quiet(cluster: LocalCluster, job_id: str, quiet_s: float = 3.0, max_s: float = 20.0) -> bool:
    """Wait until the job's task states stop changing for `quiet_s` (a hang has set in), at most
    `max_s` (a healthy job never goes quiet). On a loaded machine READY can come before the last
    actors are even scheduled; diagnosing then would catch the job still starting."""
    from debug_hang.collect.state import DashboardClient
    from debug_hang.snapshot import POLLING_TASKS

    client = DashboardClient(cluster.dashboard, timeout_s=10)
    end = time.monotonic() + max_s
    last: object = None
    since = time.monotonic()
    while time.monotonic() < end:
        rows = client.list_state("tasks", [("job_id", "=", job_id)], detail=False).rows
        actors = client.list_state("actors", [("job_id", "=", job_id)], detail=False).rows
        now = sorted((str(t.get("task_id")), str(t.get("state"))) for t in rows if t.get("name") not in POLLING_TASKS)
        now += sorted((str(a.get("actor_id")), str(a.get("state"))) for a in actors)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return True
        time.sleep(0.5)
    return False


def stop_job(cluster: LocalCluster, job: SubmittedJob) -> None:
    """Stop a job this harness submitted (never used on a user's job: diagnosis is read-only)."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(cluster.dashboard)
    try:
        client.stop_job(job.submission_id)
        wait_for(lambda: client.get_job_status(job.submission_id).is_terminal(), 30, "the job to stop")
    except Exception:  # noqa: BLE001,S110 - best-effort cleanup of our own demo job
        pass
    shutdown_serve(cluster)


def shutdown_serve(cluster: LocalCluster) -> None:
    """Delete the Serve applications an example left (Serve's controller and replicas are detached:
    they outlive the job that started them). Test and demo clusters only; best effort."""
    try:
        with urllib.request.urlopen(cluster.dashboard + "/api/serve/applications/", timeout=10) as resp:
            apps = (json.loads(resp.read()) or {}).get("applications") or {}
        if apps:
            request = urllib.request.Request(cluster.dashboard + "/api/serve/applications/", method="DELETE")
            with urllib.request.urlopen(request, timeout=60):
                pass
    except (OSError, ValueError):
        pass
