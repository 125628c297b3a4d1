"""Stacks from every node, on real multi-node clusters on this machine (loopback only).

One module-scoped cluster, four nodes:
  head    in this PID namespace (ray.cluster_utils.Cluster), 1 CPU
  second  in this PID namespace (Cluster.add_node), 1 CPU + custom resource `second`
  pod     in its OWN PID namespace (`unshare --pid --fork --mount-proc`), 1 CPU + `pod`: its pids
          mean nothing here, like a Kubernetes pod or another machine
  bare    in its own PID namespace, started by a Python environment WITHOUT py-spy and a PATH
          without it: a node where py-spy is not installed. Killed by the last test.

Why a hand-started node for `pod`: `ray start --address` refuses to add a node while
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, and with the variable unset it rewrites 127.0.0.1 to the
machine's external address (the GCS is not there). `ray._private.node.Node(head=False)` - what
Cluster.add_node calls - run inside the namespace with the variable set keeps everything on
loopback. `unshare --kill-child` makes the node's teardown total: when unshare dies, PID 1 of the
namespace gets SIGKILL and the kernel kills every process in it.

Ports: the GCS on DEBUG_HANG_TEST_PORT + 50 (6452 with DEBUG_HANG_TEST_PORT=6402), dashboard on
GCS + 2000, dashboard agents on 52000 + 4 * (GCS - 6400) + i; worker and node-manager ports are
left to the OS. RAY_TMPDIR is a private folder, so nothing touches /tmp/ray or other clusters.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from debug_hang.collect.address import ClusterAddress
from debug_hang.collect.nodes import (
    HELPER_CRASHED,
    NODE_DEAD,
    NOT_SCHEDULED,
    connect,
    list_nodes,
    run_on_nodes,
)
from debug_hang.errors import EXIT_OK, EXIT_PARTIAL
from debug_hang.localcluster import kill_by_cmdline
from debug_hang.probe.commands import COMMAND_TIMEOUT, pid_namespace, run_command
from debug_hang.probe.node_probe import local_raylet, probe_node
from debug_hang.probe.pyspy import PYSPY_MISSING, DumpOptions

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.integration]

BASE_PORT = int(os.environ.get("DEBUG_HANG_TEST_PORT", "6400")) + 50
TMP = f"/tmp/rdh_mn_{BASE_PORT}"  # short: Unix socket paths under it must stay < 108 bytes

NODE_SCRIPT = r"""
import json, os, signal, sys
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
from ray._private.node import Node
from ray._private.parameter import RayParams
params = RayParams(gcs_address=sys.argv[1], node_ip_address="127.0.0.1", num_cpus=1, num_gpus=0,
                   resources=json.loads(sys.argv[2]), dashboard_agent_listen_port=int(sys.argv[3]),
                   min_worker_port=0, max_worker_port=0, include_log_monitor=False,
                   object_store_memory=100 * 2**20)
node = Node(params, head=False, shutdown_at_exit=True, spawn_reaper=False)
print("NODE_ID", node.node_id, flush=True)
signal.sigwait({signal.SIGTERM, signal.SIGINT})
"""


@dataclass
class MultiNode:
    address: ClusterAddress
    dashboard: str
    head: str
    second: str
    pod: str
    bare: str
    procs: dict[str, subprocess.Popen[str]]


def _bare_python() -> str:
    """A real venv without py-spy: its site-packages point at ours, its bin/ has only python."""
    venv = Path(TMP) / "bare"
    if not (venv / "bin" / "python").exists():
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
        purelib = Path(sysconfig.get_paths()["purelib"])
        rel = purelib.relative_to(sys.prefix)
        (venv / rel / "our_site_packages.pth").write_text(str(purelib) + "\n")
    return str(venv / "bin" / "python")


def _start_ns_node(gcs: str, resources: dict[str, float], agent_port: int, python: str,
                   env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL", python, "-c",
         NODE_SCRIPT, gcs, json.dumps(resources), str(agent_port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)


def _node_id_of(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """Read `NODE_ID <hex>` from a node process's output (bounded)."""
    found: list[str] = []
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("NODE_ID "):
                found.append(line.split()[1])
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not found:
        raise AssertionError(f"namespaced node did not start in {timeout_s}s: {''.join(lines)[-2000:]}")
    return found[0]


def _kill_ours() -> None:
    """Kill every process whose command line names our temp dir or GCS port (never others')."""
    kill_by_cmdline((TMP.encode(), f"127.0.0.1:{BASE_PORT}".encode(), f"--gcs_server_port={BASE_PORT}".encode()))


@pytest.fixture(scope="module")
def multinode() -> Iterator[MultiNode]:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to start a node in its own PID namespace")
    import ray
    from ray.cluster_utils import Cluster

    _kill_ours()
    shutil.rmtree(TMP, ignore_errors=True)
    os.makedirs(TMP)
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    os.environ["RAY_TMPDIR"] = TMP  # keeps Cluster's address file away from /tmp/ray
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    agent = 52000 + 4 * (BASE_PORT - 6400)
    dashboard_port = BASE_PORT + 2000
    procs: dict[str, subprocess.Popen[str]] = {}
    cluster = Cluster(initialize_head=True, shutdown_at_exit=False, head_node_args=dict(
        gcs_server_port=BASE_PORT, num_cpus=1, node_ip_address="127.0.0.1",
        dashboard_host="127.0.0.1", dashboard_port=dashboard_port, include_dashboard=True,
        dashboard_agent_listen_port=agent, object_store_memory=100 * 2**20))
    try:
        gcs = f"127.0.0.1:{BASE_PORT}"
        env = dict(os.environ)
        # One node at a time: nodes of one session pick their socket and log file names by
        # looking at what exists, so two starting at once can collide.
        second = cluster.add_node(num_cpus=1, resources={"second": 1}, node_ip_address="127.0.0.1",
                                  dashboard_agent_listen_port=agent + 1,
                                  object_store_memory=100 * 2**20)
        procs["pod"] = _start_ns_node(gcs, {"pod": 1}, agent + 2, sys.executable, env)
        pod_id = _node_id_of(procs["pod"], 90)
        bare_env = {**env, "PATH": "/usr/bin:/bin", "VIRTUAL_ENV": ""}
        procs["bare"] = _start_ns_node(gcs, {"bare": 1}, agent + 3, _bare_python(), bare_env)
        bare_id = _node_id_of(procs["bare"], 90)
        address = ClusterAddress("127.0.0.1", BASE_PORT)
        connect(address)
        assert cluster.head_node is not None
        yield MultiNode(address=address, dashboard=f"http://127.0.0.1:{dashboard_port}",
                        head=cluster.head_node.node_id, second=second.node_id, pod=pod_id,
                        bare=bare_id, procs=procs)
    finally:
        ray.shutdown()
        for proc in procs.values():
            proc.kill()
        try:
            cluster.shutdown()  # type: ignore[no-untyped-call]
        except Exception:  # noqa: BLE001 - the sweep below finishes the job
            pass
        _kill_ours()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class Culprit:
    """Pinned to a node by a custom resource (see _spawn_blocked); blocks forever on an Event."""

    def where(self) -> tuple[int, str]:
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()

    def block_forever(self) -> None:
        threading.Event().wait()  # the culprit's frame: the tests assert this line


def _block_line() -> int:
    source, start = inspect.getsourcelines(Culprit.block_forever)
    return start + next(i for i, line in enumerate(source) if "threading.Event().wait()" in line)


def _spawn_blocked(resource: str) -> tuple[Any, int, str]:
    import ray
    import ray.cloudpickle

    # This test module is not importable on the workers: ship its classes by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    actor_class: Any = ray.remote(num_cpus=1)(Culprit)
    actor = actor_class.options(resources={resource: 0.01}).remote()
    pid, node_id = ray.get(actor.where.remote(), timeout=120)
    actor.block_forever.remote()
    return actor, pid, node_id


@pytest.fixture(scope="module")
def culprits(multinode: MultiNode) -> dict[str, tuple[Any, int, str]]:
    """One blocked 1-CPU actor on each node: together they hold every CPU of the cluster."""
    return {name: _spawn_blocked(name if name != "head" else "node:__internal_head__")
            for name in ("second", "pod", "head", "bare")}


def _frames(process: Any) -> list[tuple[str, int | None]]:
    return [(f.function, f.line) for t in process.threads for f in t.frames]


def _wait_running(dashboard: str, pid: int, node_id: str, timeout_s: float = 30) -> dict[str, Any]:
    """The State API row of the actor with `pid` on `node_id` once its method is RUNNING."""
    from ray.util.state import list_actors, list_tasks

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        actors = [a for a in list_actors(address=dashboard, filters=[("state", "=", "ALIVE")], limit=1000)
                  if a.pid == pid and a.node_id == node_id]
        tasks = [t for t in list_tasks(address=dashboard, filters=[("name", "=", "Culprit.block_forever")],
                                       limit=1000) if t.node_id == node_id and t.state == "RUNNING"]
        if actors and tasks:
            return {"actor_id": actors[0].actor_id, "class_name": actors[0].class_name}
        time.sleep(0.5)
    raise AssertionError(f"actor pid {pid} never showed RUNNING on {node_id[:12]}")


# --- (a) the culprit on the second node, attributed to that node -----------------------------

def test_collect_stacks_attributes_the_second_nodes_culprit_to_that_node(
        multinode: MultiNode, culprits: dict[str, tuple[Any, int, str]]) -> None:
    from debug_hang.collect.stacks import Target, collect_stacks
    from debug_hang.timeouts import Deadline

    # GIVEN an actor blocked in Culprit.block_forever on the second node (custom resource)
    _, pid, node_id = culprits["second"]
    assert node_id == multinode.second
    row = _wait_running(multinode.dashboard, pid, node_id)
    target = Target(pid=pid, node_id=node_id, role="actor", actor_id=row["actor_id"],
                    actor_class=row["class_name"])
    # WHEN its stack is collected
    coll = collect_stacks(multinode.address, [target], DumpOptions(), Deadline(60), samples=1)
    # THEN it comes back from the second node, tagged with the actor, stopped at the wait line
    assert not [e for e in coll.errors if e.pid == pid], coll.errors
    procs = [p for p in coll.processes if p.pid == pid]
    assert procs, coll.errors
    proc = procs[0]
    assert proc.node_id == multinode.second
    assert proc.actor_id == row["actor_id"] and proc.actor_class == "Culprit"
    assert ("Culprit.block_forever", _block_line()) in _frames(proc)


# --- (d) a node in its own PID namespace: stacks really come from the node itself ---------------

def test_pod_node_in_own_pid_namespace_is_dumped_by_a_helper_on_that_node(
        multinode: MultiNode, culprits: dict[str, tuple[Any, int, str]]) -> None:
    from debug_hang.collect.stacks import Target, collect_stacks
    from debug_hang.timeouts import Deadline

    # GIVEN a culprit on the pod node, whose pid (from the node's own namespace) means nothing here
    _, pid, node_id = culprits["pod"]
    assert node_id == multinode.pod
    row = _wait_running(multinode.dashboard, pid, node_id)
    assert local_raylet(multinode.pod) is None  # its raylet runs in another PID namespace
    assert local_raylet(multinode.head) is not None
    try:
        here = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        here = b""
    assert b"Culprit" not in here  # the same number here is some other process, or none
    # WHEN its stack is collected
    target = Target(pid=pid, node_id=node_id, role="actor", actor_id=row["actor_id"], actor_class="Culprit")
    coll = collect_stacks(multinode.address, [target], DumpOptions(), Deadline(60), samples=1)
    # THEN it went through the helper task on that node and shows the culprit's frame
    assert coll.paths[multinode.pod] == "ray-task"
    procs = [p for p in coll.processes if p.pid == pid and p.node_id == multinode.pod]
    assert procs, coll.errors
    assert ("Culprit.block_forever", _block_line()) in _frames(procs[0])
    # AND the helper really ran in the pod's namespace, not ours
    runs = run_on_nodes(probe_node, {multinode.pod: (multinode.pod, [pid], {}, 2, 0.2, False)}, 60)
    value = runs[multinode.pod].value
    assert value["pid_namespace"] != pid_namespace()
    assert value["info"][str(pid)]["title"].startswith("ray::Culprit")
    # AND its progress readings (/proc io, its log files) were taken there, between the samples
    window = value["info"][str(pid)]["progress"]
    assert "io" in window and window["io"]["write_bytes"] == 0, window
    assert any(entry["name"].endswith(".out") for entry in window["logs"]), window


# --- (b) every CPU held by blocked actors: the CPU-free helper still runs everywhere -----------

def test_helpers_run_on_every_node_while_blocked_actors_hold_every_cpu(
        multinode: MultiNode, culprits: dict[str, tuple[Any, int, str]]) -> None:
    import ray

    # GIVEN one blocked 1-CPU actor on each node: no CPU left anywhere
    for _, pid, node_id in culprits.values():
        _wait_running(multinode.dashboard, pid, node_id)
    assert ray.available_resources().get("CPU", 0.0) == 0.0  # type: ignore[no-untyped-call]
    # WHEN each node's culprit is dumped through its helper task (the ray-task path)
    args: dict[str, tuple[Any, ...]] = {node_id: (node_id, [pid], {}, 1, 0.0, False)
                                        for _, pid, node_id in culprits.values()}
    start = time.monotonic()
    runs = run_on_nodes(probe_node, args, timeout_s=90)
    # THEN every node answered; the culprits' stacks came back, the bare node says why not
    assert time.monotonic() - start < 90
    for name, (_, pid, node_id) in culprits.items():
        run = runs[node_id]
        assert run.error is None, (name, run.error)
        if name == "bare":
            kinds = [e["kind"] for e in run.value["errors"]]
            assert kinds == [PYSPY_MISSING], run.value["errors"]
            assert "pip install py-spy" in run.value["errors"][0]["error"]
            assert run.value["pyspy"] is None
            continue
        stacks = [p for p in run.value["processes"] if p["pid"] == pid]
        assert stacks, (name, run.value["errors"])
        functions = [f["function"] for t in stacks[0]["threads"] for f in t["frames"]]
        assert "Culprit.block_forever" in functions


# --- the CLI against the real cluster ---------------------------------------------------------

def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from debug_hang.commands.nodes import main
    from debug_hang.errors import run_main

    with pytest.raises(SystemExit) as exit_info:
        run_main(lambda: main(args), "run_on_each_ray_node.py")
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_cli_lists_all_four_nodes_as_json(multinode: MultiNode, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the four-node cluster WHEN --list --json
    code, out, _ = _cli(["--address", multinode.address.gcs, "--list", "--json"], capsys)
    # THEN exit 0, every node alive, the head marked, custom resources shown
    assert code == EXIT_OK
    doc = json.loads(out)
    assert doc["schema"] == "debug-hang/nodes/v1"
    by_id = {n["node_id"]: n for n in doc["nodes"]}
    assert set(by_id) == {multinode.head, multinode.second, multinode.pod, multinode.bare}
    assert all(n["alive"] for n in doc["nodes"]) and doc["nodes"][0]["node_id"] == multinode.head
    assert by_id[multinode.head]["is_head"] and not by_id[multinode.pod]["is_head"]
    assert by_id[multinode.pod]["resources"]["pod"] == 1.0


def test_cli_runs_a_quoted_command_on_every_node_in_its_own_namespace(
        multinode: MultiNode, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN no -n WHEN a single quoted command string is given (the seed's form)
    code, out, _ = _cli(["--address", multinode.address.gcs, "--json", "readlink /proc/self/ns/pid"], capsys)
    # THEN it ran on all four nodes; the two namespaced nodes report their own PID namespace
    assert code == EXIT_OK
    doc = json.loads(out)
    ns = {row["node_id"]: row["stdout"].strip() for row in doc["nodes"]}
    assert all(row["returncode"] == 0 for row in doc["nodes"])
    assert ns[multinode.head] == ns[multinode.second] == pid_namespace()
    assert len({ns[multinode.head], ns[multinode.pod], ns[multinode.bare]}) == 3


def test_cli_pyspy_missing_on_a_node_is_a_partial_failure(
        multinode: MultiNode, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the bare node (no py-spy in its environment) and the pod node (py-spy installed)
    # WHEN the seed's command runs on both, selected by id prefix
    code, out, _ = _cli(["--address", multinode.address.gcs, "-n", multinode.bare[:10],
                         "-n", multinode.pod[:10], "--", "py-spy", "dump", "--pid", "1"], capsys)
    # THEN exit 7: the pod node ran it, the bare node says the command is not found, and why
    assert code == EXIT_PARTIAL
    assert "FAILED [command-not-found]" in out and "'py-spy'" in out
    assert "Thread 1 (idle)" in out  # py-spy's own output from PID 1 of the pod's namespace


def test_script_from_a_checkout_prints_only_its_own_output(multinode: MultiNode) -> None:
    # GIVEN the thin script run directly as a driver, the way a responder would
    proc = subprocess.run([sys.executable, "scripts/run_on_each_ray_node.py", "--address", multinode.address.gcs,
                           "-n", multinode.head[:12], "-n", multinode.second[:12], "hostname"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    # THEN exit 0, one section per node, and none of ray.init's thread noise on stderr
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"=== node {multinode.head} (127.0.0.1, head): exit 0")
    assert proc.stdout.count(": exit 0 in ") == 2
    assert "SIGTERM handler" not in proc.stderr
    assert proc.stderr.strip() == "", proc.stderr


def test_seed_usage_as_a_ray_job_with_working_dir(multinode: MultiNode) -> None:
    # GIVEN the repo as the job's working dir WHEN the seed's command line is submitted (a per-node
    # timeout above the 30 s default: the pod's first worker may start slowly on a loaded CI machine)
    ray_bin = str(Path(sys.executable).parent / "ray")
    proc = subprocess.run(
        [ray_bin, "job", "submit", "--address", multinode.dashboard, "--working-dir", str(ROOT), "--",
         "python", "scripts/run_on_each_ray_node.py", "-n", multinode.pod[:8], "--json", "--timeout", "90",
         "cat /proc/1/cmdline"], capture_output=True, text=True, timeout=180, cwd=ROOT,
        env={**os.environ, "RAY_ADDRESS": ""})
    # THEN the job succeeds and the address came from the job's own environment
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    start = proc.stdout.index("{")
    doc, _ = json.JSONDecoder().raw_decode(proc.stdout[start:])
    assert doc["nodes"][0]["node_id"] == multinode.pod
    # PID 1 there is the pod's own node starter (here it is this machine's init): the command
    # ran inside the pod's PID namespace
    assert '{"pod": 1}' in doc["nodes"][0]["stdout"]
    assert b'{"pod": 1}' not in Path("/proc/1/cmdline").read_bytes()


# --- a frozen node: the helper is never scheduled; reported at the timeout, node still alive ----

def _raylet_pid(node_id: str) -> int:
    """Host pid of a node's raylet, seen from here (also for a node in a child PID namespace)."""
    needle = f"--node_id={node_id}".encode()
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/comm").read_bytes().strip() == b"raylet" \
                    and needle in Path(f"/proc/{entry}/cmdline").read_bytes():
                return int(entry)
        except OSError:
            continue
    raise AssertionError(f"no raylet for {node_id[:12]}")


def test_unresponsive_node_is_reported_not_scheduled_at_the_timeout(multinode: MultiNode) -> None:
    # GIVEN the pod node's raylet frozen (SIGSTOP): alive for the GCS, but nothing starts there
    raylet = _raylet_pid(multinode.pod)
    args: dict[str, tuple[Any, ...]] = {n: (["true"], 20.0) for n in (multinode.second, multinode.pod)}
    os.kill(raylet, signal.SIGSTOP)
    try:
        # WHEN a helper is sent to it and to a healthy node, with a 6 s timeout
        start = time.monotonic()
        runs = run_on_nodes(run_command, args, timeout_s=6.0)
        elapsed = time.monotonic() - start
    finally:
        os.kill(raylet, signal.SIGCONT)
    # THEN the healthy node answered, the frozen one is reported as never scheduled, on time
    assert runs[multinode.second].error is None and runs[multinode.second].value["returncode"] == 0
    frozen = runs[multinode.pod]
    assert frozen.kind == NOT_SCHEDULED, frozen
    assert "did not report within 6s" in (frozen.error or "") and "still listed alive" in (frozen.error or "")
    assert 6.0 <= elapsed < 9.0


# --- a bounded pool: one probe per node, at most N nodes at once, a silent node frees its slot ----

def test_collect_stacks_with_one_probe_at_a_time_still_gets_every_nodes_stacks(
        multinode: MultiNode, culprits: dict[str, tuple[Any, int, str]]) -> None:
    from debug_hang.collect.stacks import Target, collect_stacks
    from debug_hang.timeouts import Deadline

    # GIVEN a blocked culprit on each of the four nodes (two local, two through helper tasks)
    targets = []
    for _, pid, node_id in culprits.values():
        row = _wait_running(multinode.dashboard, pid, node_id)
        targets.append(Target(pid=pid, node_id=node_id, role="actor", actor_id=row["actor_id"],
                              actor_class="Culprit"))
    # WHEN they are collected with a pool bound of 1 (local probes one after another, helpers too)
    coll = collect_stacks(multinode.address, targets, DumpOptions(), Deadline(90), samples=1, max_in_flight=1)
    # THEN every node with py-spy gave its culprit's stack; the bare node says why it could not
    assert coll.paths == {multinode.head: "local", multinode.second: "local", multinode.pod: "ray-task",
                          multinode.bare: "ray-task"}
    for name in ("head", "second", "pod"):
        _, pid, node_id = culprits[name]
        procs = [p for p in coll.processes if p.pid == pid and p.node_id == node_id]
        assert procs, (name, coll.errors)
        assert ("Culprit.block_forever", _block_line()) in _frames(procs[0])
    assert [(e.node_id, e.kind) for e in coll.errors] == [(multinode.bare, PYSPY_MISSING)], coll.errors
    # AND each node's own probe time is kept
    assert set(coll.probe_seconds) == set(coll.paths) and all(s > 0 for s in coll.probe_seconds.values())


def _span(run: Any) -> tuple[float, float]:
    """(start, end) wall clock of a `date; sleep; date` command on its node."""
    first, last = run.value["stdout"].split()
    return float(first), float(last)


def test_at_most_max_in_flight_helpers_run_at_once(multinode: MultiNode) -> None:
    # GIVEN a 1 s command on three nodes, each printing when it started and ended on its node
    argv = ["sh", "-c", "date +%s.%N; sleep 1; date +%s.%N"]
    nodes = (multinode.head, multinode.second, multinode.pod)
    args: dict[str, tuple[Any, ...]] = {n: (argv, 20.0) for n in nodes}
    # WHEN they run with one helper in flight, then with three
    one = run_on_nodes(run_command, args, timeout_s=60, max_in_flight=1)
    three = run_on_nodes(run_command, args, timeout_s=60, max_in_flight=3)
    # THEN with one, the commands ran one after another, in the given order (disjoint spans)
    assert all(r.error is None and r.value["returncode"] == 0 for r in [*one.values(), *three.values()])
    spans = [_span(one[n]) for n in nodes]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    # AND with three they overlapped (the check above can see an overlap)
    spans = sorted(_span(three[n]) for n in nodes)
    assert any(a[1] > b[0] for a, b in zip(spans, spans[1:], strict=False)), spans


def test_a_silent_node_frees_its_slot_at_its_own_deadline_and_the_others_answer(multinode: MultiNode) -> None:
    # GIVEN the pod node's raylet frozen (alive for the GCS, nothing starts there), first in line,
    # and one helper in flight at a time
    raylet = _raylet_pid(multinode.pod)
    order = (multinode.pod, multinode.second, multinode.head)
    args: dict[str, tuple[Any, ...]] = {n: (["true"], 20.0) for n in order}
    os.kill(raylet, signal.SIGSTOP)
    try:
        # WHEN each node gets 5 s from its submission, within a 40 s call
        start = time.monotonic()
        runs = run_on_nodes(run_command, args, timeout_s=40.0, max_in_flight=1, node_timeout_s=5.0)
        elapsed = time.monotonic() - start
    finally:
        os.kill(raylet, signal.SIGCONT)
    # THEN the frozen node is an error row at its own deadline, and the two behind it still ran
    assert runs[multinode.pod].kind == NOT_SCHEDULED and "within 5s" in (runs[multinode.pod].error or "")
    for node_id in order[1:]:
        assert runs[node_id].error is None and runs[node_id].value["returncode"] == 0, runs[node_id]
    assert elapsed < 25, elapsed


def test_each_helper_is_told_its_own_deadline_and_answers_with_what_it_has(multinode: MultiNode) -> None:
    # GIVEN a command that outlasts everything, on two nodes, one helper at a time, 8 s per node
    args: dict[str, tuple[Any, ...]] = {n: (["sleep", "60"], 60.0) for n in (multinode.second, multinode.head)}
    # WHEN each helper is given its node's deadline (the second one's starts when the first answered)
    start = time.monotonic()
    runs = run_on_nodes(run_command, args, timeout_s=60.0, max_in_flight=1, node_timeout_s=8.0,
                        deadline_kw="deadline")
    # THEN both cut their command before their own deadline and said so themselves: no silent node
    for node_id in args:
        assert runs[node_id].error is None, runs[node_id]
        assert runs[node_id].value["kind"] == COMMAND_TIMEOUT, runs[node_id].value
    assert time.monotonic() - start < 18


def test_nodes_whose_turn_never_comes_are_error_rows_and_the_rest_is_kept(multinode: MultiNode) -> None:
    # GIVEN one helper at a time and a 6 s call: a quick command on the head, then one on the
    # second node that outlasts the call, then the pod node's turn
    args: dict[str, tuple[Any, ...]] = {multinode.head: (["true"], 20.0),
                                        multinode.second: (["sleep", "30"], 20.0),
                                        multinode.pod: (["true"], 20.0)}
    # WHEN they run
    start = time.monotonic()
    runs = run_on_nodes(run_command, args, timeout_s=6.0, max_in_flight=1)
    # THEN the head's answer is kept, the slow node is cut at the call's end, and the pod node,
    # never started, says so - all within the 6 s
    assert time.monotonic() - start < 9
    assert runs[multinode.head].error is None and runs[multinode.head].value["returncode"] == 0
    assert runs[multinode.second].kind == NOT_SCHEDULED and "did not report" in (runs[multinode.second].error or "")
    assert runs[multinode.pod].kind == NOT_SCHEDULED
    assert "before its turn" in (runs[multinode.pod].error or ""), runs[multinode.pod]


# --- (c) a node killed during a run: a partial result, the error recorded, in time -------------

def test_node_killed_during_a_run_gives_a_partial_result_within_the_timeout(
        multinode: MultiNode, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a 4 s command running on three nodes
    nodes = [multinode.second, multinode.pod, multinode.bare]
    timeout_s = 40.0
    args = {n: (["sleep", "4"], timeout_s, 1000, time.time() + timeout_s) for n in nodes}
    killer = threading.Timer(1.5, multinode.procs["bare"].kill)  # unshare --kill-child: all of it
    # WHEN the bare node is killed 1.5 s into the run
    start = time.monotonic()
    killer.start()
    runs = run_on_nodes(run_command, args, timeout_s=timeout_s)
    elapsed = time.monotonic() - start
    # THEN the two others finished, the killed one is reported (not waited on past the timeout)
    assert elapsed < timeout_s + 5
    for node_id in (multinode.second, multinode.pod):
        assert runs[node_id].error is None and runs[node_id].value["returncode"] == 0
    dead = runs[multinode.bare]
    assert dead.error and dead.kind in {NODE_DEAD, HELPER_CRASHED, NOT_SCHEDULED}, dead
    # AND once the GCS has noticed, the CLI lists it dead and refuses it with exit 7, at once
    from debug_hang.timeouts import Deadline

    deadline = Deadline(60)
    while not deadline.expired:
        if not {n.node_id: n for n in list_nodes(multinode.address)}[multinode.bare].alive:
            break
        time.sleep(1)
    code, out, _ = _cli(["--address", multinode.address.gcs, "-n", multinode.bare, "hostname"], capsys)
    assert code == EXIT_PARTIAL
    assert f"node {multinode.bare}" in out and "FAILED [node-dead]" in out
