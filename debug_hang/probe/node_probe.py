"""What runs on a node: dump its target processes (and their children) and read local evidence.

`probe_node` is called directly when the node is this machine and inside a pinned Ray helper task
otherwise; it uses only the standard library and `debug_hang.probe.pyspy`, and returns plain JSON-able
data. All of a node's targets are dumped in parallel, `samples` times, `interval_s` apart, so that
a stack that moves (a healthy job) can be told from one that is stuck. `run_on_each_ray_node.py COMMAND`
runs `commands.run_command` on each node; the job's source lines are read by `source_lines`.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from debug_hang.model import Process, process_to_dict
from debug_hang.probe import progress, schedstat
from debug_hang.probe.commands import pid_namespace, run_command
from debug_hang.probe.file_locks import locks_of, process_title, read_locks, thread_syscall, thread_wchans
from debug_hang.probe.flight_recorder import collect_dumps, dump_prefixes, read_fr_env
from debug_hang.probe.kernel_objects import FIFO_WAITS, SLEEPS, fifo_opens, locks_held_by_others
from debug_hang.probe.libraries import METRICS_TIMEOUT_S, read_serve_metrics
from debug_hang.probe.pipes import PIPE_READ_WAIT, child_pipes, pipe_reads, polled_pipes, widowed_pipes
from debug_hang.probe.pyspy import (
    NOT_PYTHON,
    PROCESS_EXITED,
    PYSPY_MISSING,
    DumpOptions,
    child_pids,
    dump_pids,
    find_pyspy,
    process_state,
    process_tree,
    pyspy_missing_message,
    read_title,
    validate_pid,
)
from debug_hang.probe.serve_batch import batch_windows
from debug_hang.probe.socket_peers import (
    accept_sockets,
    connect_targets,
    loop_sockets,
    process_sockets,
    reading_sockets,
    socket_peers,
)
from debug_hang.probe.source_lines import add_awaiting, add_source_lines, job_files
from debug_hang.redact import SECRET_NAME, Redactor
from debug_hang.snapshot import RANK_VARS

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# Children of a Ray worker worth dumping: a training job's own subprocesses. Ray's own helper
# processes never appear under a worker, so every child is taken, up to this many per target.
MAX_CHILDREN_PER_TARGET = 16
# The node's /proc/locks was longer than file_locks.MAX_LOCKS_BYTES: locks past the cut are unseen.
LOCKS_TRUNCATED = "locks-truncated"
SOCKET_PEERS_FAILED = "socket-peers-failed"
# Ray's own log files (a worker's output, a submitted driver's): their folder is the session's logs.
_RAY_LOG_NAME = re.compile(r"^(worker-[0-9a-f]+-[0-9a-f]+-\d+\.(out|err)|job-driver-.+\.log|python-core-.+\.log)$")



def local_raylets(by_socket: dict[str, str] | None = None) -> dict[str, int]:
    """{node_id: raylet pid} for every raylet on this machine in this PID namespace (one /proc scan).

    Only for those nodes are the PIDs the State API reports valid here: a node in another PID
    namespace (a pod, `unshare --pid`) shares the IP but not the PIDs. A raylet's node id is its
    `--node_id=` argument; a raylet started without one (Ray 2.9, 2.10) is known by its
    `--raylet_socket_name=`, looked up in `by_socket` ({socket path: node id}, from the GCS).
    """
    found: dict[str, int] = {}
    for pid, node_id, socket_name in raylets_here():
        node = node_id or (by_socket or {}).get(socket_name or "")
        if node:
            found[node] = pid
    return found


def raylets_here() -> list[tuple[int, str | None, str | None]]:
    """(pid, `--node_id=` or None, `--raylet_socket_name=` or None) of each raylet of this PID namespace."""
    found: list[tuple[int, str | None, str | None]] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm", "rb") as fh:
                if fh.read().strip() != b"raylet":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                args = fh.read().split(b"\0")
        except OSError:
            continue
        if not _in_own_pid_namespace(entry):
            continue
        values = {k: v.decode("utf-8", "replace") for k, _, v in (a.partition(b"=") for a in args)
                  if k in (b"--node_id", b"--raylet_socket_name")}
        found.append((int(entry), values.get(b"--node_id"), values.get(b"--raylet_socket_name")))
    return found


def _in_own_pid_namespace(pid: str) -> bool:
    """Whether a process shares this process's PID namespace: by the `ns/pid` links, or, where the
    other's link is not readable (another user's process), by their depth below this /proc's
    namespace (the world-readable `NSpid:` line of status: one pid per nested namespace).
    True when this process's own link cannot be read (a kernel without PID namespaces)."""
    try:
        own = os.readlink("/proc/self/ns/pid")
    except OSError:
        return True
    try:
        return os.readlink(f"/proc/{pid}/ns/pid") == own
    except PermissionError:
        return _nspid_depth(pid) == _nspid_depth("self")
    except OSError:
        return False  # gone


def _nspid_depth(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            line = next((line for line in fh if line.startswith("NSpid:")), None)
    except OSError:
        return None
    return len(line.split()) - 1 if line else None


def local_raylet(node_id: str) -> int | None:
    """PID of this node's raylet if it runs on this machine, in this PID namespace; else None."""
    return local_raylets().get(node_id)


def raylet_log_dir(raylet_pid: int | None) -> str | None:
    """The session log folder of a raylet, from its `--log_dir=` argument."""
    if raylet_pid is None:
        return None
    try:
        with open(f"/proc/{raylet_pid}/cmdline", "rb") as fh:
            args = fh.read().split(b"\0")
    except OSError:
        return None
    for arg in args:
        if arg.startswith(b"--log_dir="):
            return arg.split(b"=", 1)[1].decode("utf-8", "replace")
    return None


def read_env(pid: int) -> tuple[dict[str, str], list[str]]:
    """From the process's start-up environment: its rank variables (RANK, LOCAL_RANK, ...) and
    the values of variables whose names look secret (to redact; never stored)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return {}, []
    found: dict[str, str] = {}
    secrets: list[str] = []
    for item in raw.split(b"\0"):
        key, _, value = item.partition(b"=")
        name = key.decode("ascii", "replace")
        if name in RANK_VARS:
            found[name] = value.decode("utf-8", "replace")[:32]
        elif SECRET_NAME.search(name) and value:
            secrets.append(value.decode("utf-8", "replace"))
    return found, secrets


def child_log_rule(node_id: str, targets: list[int]) -> Callable[[dict[str, Any]], bool]:
    """Which stdout/stderr files of a target's child are logs: the file a target itself writes its
    output to (the child inherited it: a worker's .out), or a file under the session's log folder
    (Ray's log names beside a target's own log, or this node's raylet's `--log_dir`). Any other
    file is the child's output — `gzip -c big.csv > big.csv.gz` — and is never read as a log."""
    own: set[tuple[int, int]] = set()
    dirs: set[str] = set()
    for pid in targets:
        for f in progress.std_files(pid):
            own.add((f["dev"], f["inode"]))
            if _RAY_LOG_NAME.match(f["name"]):
                dirs.add(os.path.realpath(os.path.dirname(f["path"])))
    raylet_dirs: list[str] = []

    def is_log(f: dict[str, Any]) -> bool:
        if (f["dev"], f["inode"]) in own:
            return True
        if not raylet_dirs:  # looked up once, when a child's file is not a target's
            found = raylet_log_dir(local_raylet(node_id))
            raylet_dirs.append(os.path.realpath(found) if found else "")
        path = os.path.realpath(f["path"])
        return any(d and os.path.commonpath([d, path]) == d for d in (*dirs, *raylet_dirs))

    return is_log


def cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process, in clock ticks (None if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[-1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[-1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def probe_node(node_id: str, pids: list[int], options: dict[str, Any], samples: int = 2,
               interval_s: float = 0.5, children: bool = True,
               budget_s: float | None = None, since: dict[str, Any] | None = None,
               deadline_epoch: float | None = None) -> dict[str, Any]:
    """Dump `pids` (and their children) on this node `samples` times; return JSON-able data.

    Result: {"node_id", "hostname", "pid_namespace", "pyspy", "processes": [stacks/v1 process
    dicts, one per pid and sample], "info": {pid: {title, ppid, env, cpu_percent, child_of,
    progress, run_state, file_locks?, wchan?}} (`run_state`: the /proc/PID/stat state letter before
    the first sample and after the last; `progress`: what moved between the first and the last sample,
    probe/progress.py),
    "errors": [{"pid", "error", "kind", "sample"}], "samples_taken", "sample_offsets_s" (when each
    sample started: `interval_s` apart, start to start), "seconds"}, plus
    "flight_recorder" (probe.flight_recorder.collect_dumps) when a target sets a Flight Recorder
    dump path or enables the recorder, and "serve_metrics" (probe.libraries) when
    `options["serve_metrics"]` asks for the node's Ray Serve counters.
    Never raises for a process-level problem: a missing py-spy, a pid that is gone or a
    permission error lands in "errors" with a `kind` from pyspy.DUMP_ERROR_KINDS. With
    `budget_s`, later samples are skipped and dumps cut short so that the probe returns in time;
    `deadline_epoch` (wall clock, time.time()) is the caller's absolute end: a probe that started
    late (a helper waiting for a worker on a loaded node) still answers by then, with what it has.
    Each process's info also holds `sampled_at` (wall clock of each of its samples) and
    `window_start` (its readings before the first sample); a later round of samples given those
    as `since` ({pid: window_start}) reads its CPU use and progress from the first round's start,
    so that the two rounds are one window.
    """
    start = time.monotonic()
    budget = _budget(budget_s, deadline_epoch)
    serve_metrics = bool(options.get("serve_metrics"))
    opts = DumpOptions(**{k: v for k, v in options.items() if k != "serve_metrics"})
    errors: list[dict[str, Any]] = []
    all_pids, info = _find_processes([validate_pid(p) for p in pids], children, errors)
    redactor, fr_envs = _read_envs(all_pids, info)
    pyspy = find_pyspy()
    if pyspy is None and all_pids:
        # One clear node-level error instead of the same message once per process.
        errors.append({"pid": None, "pids": all_pids, "kind": PYSPY_MISSING, "sample": 0,
                       "error": pyspy_missing_message()})
    is_log = child_log_rule(node_id, [pid for pid in all_pids if info[pid]["child_of"] is None])
    log_rule = {pid: None if info[pid]["child_of"] is None else is_log for pid in all_pids}
    _window_starts(all_pids, info, log_rule, since)
    rounds = _Rounds(node_id, all_pids, info, errors, redactor)
    rounds.run(opts, max(1, samples) if pyspy else 0, interval_s, start, budget)
    # More than one moment: several samples here, or one after an earlier round's start.
    _window_facts(all_pids, info, lambda pid: rounds.taken > 1 or (rounds.taken == 1 and str(pid) in (since or {})),
                  redactor, log_rule)
    add_kernel_waits(info, all_pids, errors)
    add_loop_syscalls(info, rounds.processes)
    add_kernel_object_waits(info, rounds.processes, redactor)
    add_socket_peers(info, all_pids, errors)
    add_connect_targets(info, rounds.processes, errors)
    add_accept_sockets(info, rounds.processes, errors)
    add_reading_sockets(info, rounds.processes, errors)
    add_child_sockets(info, errors)
    add_widowed_pipes(info, rounds.processes)
    add_pipe_holders(info, rounds.processes, redactor)
    add_batch_windows(info, all_pids)

    out: dict[str, Any] = {
        "node_id": node_id,
        "hostname": socket.gethostname(),
        "pid_namespace": pid_namespace(),
        "pyspy": pyspy,
        "processes": rounds.processes,
        "info": {str(pid): value for pid, value in info.items()},
        "errors": errors,
        "samples_taken": rounds.taken,
        "sample_offsets_s": rounds.offsets,
        # The targets' secret env values as salted digests, for the caller to redact them in
        # what it reads elsewhere (logs); the values themselves never leave the node.
        "redact_digests": redactor.digests(),
    }
    if fr_envs:
        # PyTorch Flight Recorder dumps of the job's ranks on this node (bounded, read-only).
        out["flight_recorder"] = collect_dumps(fr_envs)
    if serve_metrics:
        # Ray Serve's request counters of this node's processes (an awaiting request has no stack).
        out["serve_metrics"] = read_serve_metrics(
            node_id, local_raylet(node_id), max(0.5, min(METRICS_TIMEOUT_S, _left(start, budget or 30.0))))
    out["seconds"] = round(time.monotonic() - start, 3)
    return out


def _budget(budget_s: float | None, deadline_epoch: float | None) -> float | None:
    """The probe's time from its start: `budget_s`, cut to what the caller's wall-clock end leaves."""
    if deadline_epoch is None:
        return budget_s
    # At least a second: a node whose clock runs ahead still gets one sample.
    by_clock = max(float(deadline_epoch) - time.time(), 1.0)
    return by_clock if budget_s is None else min(budget_s, by_clock)


def _find_processes(targets: list[int], children: bool,
                    errors: list[dict[str, Any]]) -> tuple[list[int], dict[int, dict[str, Any]]]:
    """The targets that exist here and (with `children`) their child processes, each with its
    title, parent and `child_of`; a target that is gone is an error row."""
    info: dict[int, dict[str, Any]] = {}
    all_pids: list[int] = []
    # This helper and the py-spy processes it starts are nobody's evidence: never dump them as
    # "children" (on a node whose targets include the raylet's parent, they would be).
    own = {os.getpid()}
    tree = process_tree() if children else {}
    for pid in targets:
        if pid in info:  # listed twice, or already found as another target's child
            info[pid]["child_of"] = None
            continue
        if not os.path.exists(f"/proc/{pid}"):
            errors.append({"pid": pid, "kind": PROCESS_EXITED, "sample": 0,
                           "error": "process not found on this node: it exited after it was "
                           "listed (or the State API's pid belongs to another PID namespace)"})
            continue
        all_pids.append(pid)
        info[pid] = {"title": read_title(pid), "ppid": parent_pid(pid), "child_of": None}
        for child in child_pids(pid, tree)[:MAX_CHILDREN_PER_TARGET] if children else []:
            if child not in info and child not in own:
                all_pids.append(child)
                info[child] = {"title": read_title(child), "ppid": parent_pid(child), "child_of": pid}
    return all_pids, info


def _read_envs(all_pids: list[int], info: dict[int, dict[str, Any]]) -> tuple[Redactor, dict[int, dict[str, str]]]:
    """Each process's rank variables and Flight Recorder settings; a redactor that knows the
    secret env values found (titles are redacted with it at once); the processes whose recorder
    dumps to files."""
    redactor = Redactor()  # this node's: the token rules + the targets' secret env values
    fr_envs: dict[int, dict[str, str]] = {}
    for pid in all_pids:
        info[pid]["env"], found = read_env(pid)
        redactor.learn(found)
        fr_env = read_fr_env(pid)
        if fr_env:
            info[pid]["fr_env"] = fr_env
            if dump_prefixes(fr_env):
                fr_envs[pid] = fr_env
    for pid in all_pids:
        info[pid]["title"] = redactor.redact(info[pid]["title"] or "") or None
    return redactor, fr_envs


class _Rounds:
    """The probe's sampling rounds: every process dumped once a round, rounds `interval_s` apart."""

    def __init__(self, node_id: str, pids: list[int], info: dict[int, dict[str, Any]],
                 errors: list[dict[str, Any]], redactor: Redactor) -> None:
        self.node_id, self.pids, self.info, self.errors, self.redactor = node_id, pids, info, errors, redactor
        self.processes: list[dict[str, Any]] = []
        self.taken = 0
        self.offsets: list[float] = []  # when each sample started, seconds after the probe started

    def run(self, opts: DumpOptions, samples: int, interval_s: float, start: float, budget: float | None) -> None:
        # Locals are read for facts (identities, counters) on every sample but the first: the graph
        # is built from the last sample, loop state compares two of them, and a --locals dump costs
        # up to 4x a plain one on deep stacks (benchmarks/bench_locals.py).
        facts_from = 1 if samples > 1 else 0
        sample_start = time.monotonic()
        for sample in range(samples):
            if sample:
                # Samples start `interval_s` apart: the previous round's dumps and their source
                # lines count towards the wait instead of adding to it.
                wait = max(0.0, interval_s - (time.monotonic() - sample_start))
                if budget is not None and _left(start, budget) < wait + 1.0:
                    break  # no time for another sample: keep what we have
                time.sleep(wait)
                sample_start = time.monotonic()
            sample_opts = opts
            if budget is not None:
                left = _left(start, budget)
                if left < 0.5:
                    break
                sample_opts = dataclasses.replace(opts, timeout_s=min(opts.timeout_s, left))
            sample_opts = dataclasses.replace(sample_opts, facts=opts.facts and sample >= facts_from)
            self.taken += 1
            self.offsets.append(round(sample_start - start, 3))
            self._round(sample, sample_opts)

    def _round(self, sample: int, opts: DumpOptions) -> None:
        errors, info = self.errors, self.info
        wall = round(time.time(), 3)
        dumped: list[tuple[Process, str | None]] = []
        for result in dump_pids(self.pids, opts):
            if result.note and not any(e["pid"] == result.pid and e["kind"] == result.note_kind for e in errors):
                errors.append({"pid": result.pid, "error": result.note, "kind": result.note_kind, "sample": sample})
            if result.error:
                if result.kind == NOT_PYTHON and self.info[result.pid]["child_of"] is not None:
                    # A child that is not Python (a shell, the raylet, a compiler) is expected.
                    self.info[result.pid]["dump"] = result.kind
                    continue
                if sample == 0 or not any(e["pid"] == result.pid for e in errors):
                    errors.append({"pid": result.pid, "error": result.error, "kind": result.kind,
                                   "sample": sample})
                continue
            if result.processes and result.pid in info:
                info[result.pid]["sampled_at"].append(wall)
            for proc in result.processes:
                proc.sample = sample
                proc.node_id = self.node_id
                add_source_lines(proc, redactor=self.redactor)
                dumped.append((proc, (info.get(result.pid) or {}).get("title")))
        files = job_files([proc for proc, _title in dumped])
        for proc, title in dumped:
            add_awaiting(proc, title, files, self.redactor.redact)
            self.processes.append(self.redactor.redact_obj(process_to_dict(proc)))


def _window_starts(all_pids: list[int], info: dict[int, dict[str, Any]],
                   log_rule: dict[int, Callable[[dict[str, Any]], bool] | None], since: dict[str, Any] | None) -> None:
    """Per process, the readings its window starts from (`window_start`: progress point, CPU
    ticks, each thread's time on a CPU and queued for one, wall clock): taken now, or an earlier
    round's (`since`), so that two rounds are one window (same process: the rounds are seconds
    apart, and a pid reused meanwhile would have another start time)."""
    now = time.time()
    for pid in all_pids:
        start = {"point": progress.read_point(pid, log_rule[pid]), "ticks": cpu_ticks(pid),
                 "threads": schedstat.thread_times(pid), "wall": now, "state": process_state(pid)}
        earlier = (since or {}).get(str(pid))
        if isinstance(earlier, dict) and isinstance(earlier.get("point"), dict):
            start = earlier
        info[pid]["window_start"] = start
        info[pid]["sampled_at"] = []


def _window_facts(all_pids: list[int], info: dict[int, dict[str, Any]], spans: Callable[[int], bool],
                  redactor: Redactor, log_rule: dict[int, Callable[[dict[str, Any]], bool] | None]) -> None:
    """Per process, over its window (from `window_start`): CPU use (the process's, and each
    thread's time on a CPU or queued for one; `runnable_percent` the busiest thread's) and, when
    the window `spans` more than one moment, what moved."""
    for pid in all_pids:
        start = info[pid]["window_start"]
        window = max(time.time() - float(start.get("wall") or time.time()), 1e-3)
        # The state before the first dump and after the last (py-spy's own stops read `t`): `T`
        # both times is a process stopped by a signal for the whole window.
        info[pid]["run_state"] = [start.get("state"), process_state(pid)]
        ticks0, ticks1 = start.get("ticks"), cpu_ticks(pid)
        if ticks0 is not None and ticks1 is not None:
            info[pid]["cpu_percent"] = round(100.0 * (ticks1 - ticks0) / CLOCK_TICKS / window, 1)
        # (an earlier round's start may have come through JSON: thread ids as strings, pairs as lists)
        before = {int(tid): (int(t[0]), int(t[1])) for tid, t in (start.get("threads") or {}).items()}
        threads = schedstat.runnable(before, schedstat.thread_times(pid), window)
        if threads:
            info[pid]["threads"] = threads  # {tid: {"cpu", "runnable"}}: a spin is ~100 % runnable at any load
            # A spin on a loaded node gets a share of a CPU and waits in the run queue the rest.
            info[pid]["runnable_percent"] = max(t["runnable"] for t in threads.values())
        if spans(pid) and os.path.exists(f"/proc/{pid}"):
            info[pid]["progress"] = progress.window(start["point"], progress.read_point(pid, log_rule[pid]),
                                                    clean=redactor.redact)
        elif spans(pid):
            info[pid]["progress"] = {"exited": True, "errors": ["exited during the sampling window"]}


def add_socket_peers(info: dict[int, dict[str, Any]], pids: list[int], errors: list[dict[str, Any]]) -> None:
    """Per process, the local processes at the other end of its TCP connections (`socket_peers`,
    probe/socket_peers.py): the members of a rank's process groups on this node, whoever started them."""
    try:
        for pid, peers in socket_peers(pids).items():
            info[pid]["socket_peers"] = peers
    except Exception as exc:  # noqa: BLE001 - a /proc oddity costs this fact, never the probe
        errors.append({"pid": None, "kind": SOCKET_PEERS_FAILED, "sample": 0, "error": f"socket peers not read: {exc}"})


def add_connect_targets(info: dict[int, dict[str, Any]], processes: list[dict[str, Any]],
                        errors: list[dict[str, Any]]) -> None:
    """Per process with a connect frame whose `port` fact was read, after the last sample: whether
    anything listens on that port in the process's network namespace (`connect_targets`:
    [{tid, port, listening, loopback?}], probe/socket_peers.py): a loop dialling a loopback port
    nobody listens on is refused at once, every round."""
    try:
        for pid, targets in connect_targets(processes).items():
            if pid in info:
                info[pid]["connect_targets"] = targets
    except Exception as exc:  # noqa: BLE001 - a /proc oddity costs this fact, never the probe
        errors.append({"pid": None, "kind": SOCKET_PEERS_FAILED, "sample": 0, "error": f"connect targets not read: {exc}"})


def add_accept_sockets(info: dict[int, dict[str, Any]], processes: list[dict[str, Any]],
                       errors: list[dict[str, Any]]) -> None:
    """Per process with a thread in accept, the listening socket it waits on (`accepting`:
    {tid: {fd, port|path}}, probe/socket_peers.py): the port or path a client would connect to."""
    try:
        for pid, found in accept_sockets(processes).items():
            if pid in info:
                info[pid]["accepting"] = found
    except Exception as exc:  # noqa: BLE001 - a /proc oddity costs this fact, never the probe
        errors.append({"pid": None, "kind": SOCKET_PEERS_FAILED, "sample": 0, "error": f"accept sockets not read: {exc}"})


def add_reading_sockets(info: dict[int, dict[str, Any]], processes: list[dict[str, Any]],
                        errors: list[dict[str, Any]]) -> None:
    """Per process with a thread blocked reading a TCP socket, that connection's traffic
    (`reading`: {tid: {fd, bytes_received, last_recv_ms, ...}}, probe/tcp_info.py): whether data
    still comes, which /proc/PID/io does not count."""
    try:
        for pid, found in reading_sockets(processes).items():
            if pid in info:
                info[pid]["reading"] = found
    except Exception as exc:  # noqa: BLE001 - a /proc or netlink oddity costs this fact, never the probe
        errors.append({"pid": None, "kind": SOCKET_PEERS_FAILED, "sample": 0, "error": f"reading sockets not read: {exc}"})


def add_child_sockets(info: dict[int, dict[str, Any]], errors: list[dict[str, Any]]) -> None:
    """Per child process of a target, its TCP connections' traffic (`tcp_conns`: [{fd,
    bytes_received, last_recv_ms, ...}], probe/tcp_info.py): a native child (curl, a downloader)
    shows no wait py-spy can read, but the kernel counts the bytes it still receives."""
    try:
        for pid, conns in process_sockets({pid: int(value["child_of"]) for pid, value in info.items()
                                          if isinstance(value.get("child_of"), int)}).items():
            info[pid]["tcp_conns"] = conns
    except Exception as exc:  # noqa: BLE001 - a /proc or netlink oddity costs this fact, never the probe
        errors.append({"pid": None, "kind": SOCKET_PEERS_FAILED, "sample": 0, "error": f"child sockets not read: {exc}"})


def add_batch_windows(info: dict[int, dict[str, Any]], pids: list[int]) -> None:
    """Per Serve replica, the @serve.batch windows its deployment code declares (`batch_windows`,
    probe/serve_batch.py): a batch waits up to batch_wait_timeout_s for max_batch_size requests."""
    for pid in pids:
        if not str(info[pid].get("title") or "").startswith("ray::ServeReplica:"):
            continue
        try:
            found = batch_windows(pid)
        except Exception as exc:  # noqa: BLE001 - an unreadable working dir costs this fact, never the probe
            info[pid]["batch_windows_error"] = f"batch windows not read: {type(exc).__name__}"
            continue
        if found:
            info[pid]["batch_windows"] = found


def add_kernel_waits(info: dict[int, dict[str, Any]], pids: list[int], errors: list[dict[str, Any]]) -> None:
    """Per process, after the last sample: the OS file locks it holds or waits for (`file_locks`,
    from /proc/locks, with each file's path and the holders' pids) and, for a process waiting for
    one, the kernel function each of its threads sleeps in (`wchan`: {tid: name}), which tells the
    waiting thread — what py-spy cannot see. /proc/locks is read once; wchans only of waiters and
    of child processes with a pipe on a standard descriptor (`std_pipes`, probe/pipes.py)."""
    rows, cut = read_locks()
    if cut:
        errors.append({"pid": None, "kind": LOCKS_TRUNCATED, "sample": 0,
                       "error": "/proc/locks is larger than the probe reads: file locks beyond the cut are not seen"})
    for pid, locks in locks_of(pids, rows).items():
        info[pid]["file_locks"] = locks
        wchans = thread_wchans(pid) if any(lock["waiting"] for lock in locks) else {}
        if wchans:
            info[pid]["wchan"] = wchans
    for pid in pids:
        # A child with a pipe on stdin/stdout/stderr: where its threads sleep in the kernel and
        # which end of each pipe its parent holds (probe/pipes.py), for a pipe-full deadlock.
        parent = info[pid].get("child_of")
        pipes = child_pipes(pid, parent) if parent is not None else None
        if pipes is not None:
            info[pid]["std_pipes"] = pipes["std_pipes"]
            if pipes.get("other_pipes"):
                info[pid]["other_pipes"] = pipes["other_pipes"]
            if pipes["wchan"]:
                info[pid].setdefault("wchan", pipes["wchan"])
        if parent is not None and "wchan" not in info[pid]:
            # A child's kernel sleep (a native `sleep 240` in hrtimer_nanosleep ends by itself).
            wchans = thread_wchans(pid, max_threads=8)
            if wchans:
                info[pid]["wchan"] = wchans
                asleep = {tid: secs for tid in wchans if (secs := _sleep_request_s(pid, int(tid))) is not None}
                if asleep:
                    info[pid]["sleep_request_s"] = asleep


_NANOSLEEP, _CLOCK_NANOSLEEP = "35", "230"  # x86_64 system call numbers


def _sleep_request_s(pid: int, tid: int) -> float | None:
    """The duration a thread asleep in nanosleep/clock_nanosleep asked for (its timespec, read from
    /proc/PID/mem at the call's request pointer), None when it is not in one, sleeps until an
    absolute time (TIMER_ABSTIME) or the memory cannot be read. `sleep infinity` asks for years."""
    call = thread_syscall(pid, tid)
    if call is None or call[0] not in (_NANOSLEEP, _CLOCK_NANOSLEEP):
        return None
    try:
        if call[0] == _CLOCK_NANOSLEEP:
            if int(call[2], 16) & 1:
                return None  # TIMER_ABSTIME
            addr = int(call[3], 16)
        else:
            addr = int(call[1], 16)
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
        try:
            raw = os.pread(fd, 16, addr)
        finally:
            os.close(fd)
    except (OSError, ValueError, OverflowError):
        return None
    if len(raw) != 16:
        return None
    sec, nsec = struct.unpack("<qq", raw)
    return float(sec) + float(nsec) / 1e9


_MP_SYNC_FILE = re.compile(r"(^|/)multiprocessing/synchronize\.py$")


def add_widowed_pipes(info: dict[int, dict[str, Any]], processes: list[dict[str, Any]]) -> None:
    """Per parent of a child waiting to take a multiprocessing lock (a SemLock: its innermost frame
    in multiprocessing/synchronize.py in the last sample), after the last sample: the pipes the
    parent reads whose write end no process of the node holds (`widowed_pipes`, probe/pipes.py) -
    what is left of a child that ended (its sentinel pipe). Only those parents: the reading walks
    every process's descriptors."""
    last: dict[int, dict[str, Any]] = {}
    for proc in processes:
        if isinstance(proc.get("pid"), int):
            last[proc["pid"]] = proc
    parents: set[int] = set()
    for pid, proc in last.items():
        parent = info.get(pid, {}).get("child_of")
        for thread in proc.get("threads") or []:
            inner = next((f for f in thread.get("frames") or [] if not f.get("native")), None)
            if parent is not None and inner is not None and _MP_SYNC_FILE.search(str(inner.get("file") or "")):
                parents.add(int(parent))
    for parent in sorted(parents):
        if parent in info:
            found = widowed_pipes(parent)
            if found is not None:
                info[parent]["widowed_pipes"] = found[:32]
def add_pipe_holders(info: dict[int, dict[str, Any]], processes: list[dict[str, Any]], redactor: Redactor) -> None:
    """Per parent of a child that has exited but is not reaped (state Z in every reading), after
    the last sample: the pipes its threads poll (a `communicate()` reading the child's output to
    end-of-file) and, for each, the other processes of the node that still hold the write end,
    with what each does (`pipe_holders`, probe/pipes.py): a daemon grandchild that inherited the
    child's stdout keeps the read from ever ending. Only those parents: the reading walks every
    process's descriptors."""
    parents = {int(value["child_of"]) for value in info.values()
               if isinstance(value.get("child_of"), int) and value.get("run_state")
               and all(s == "Z" for s in value["run_state"])}
    last: dict[int, dict[str, Any]] = {}
    for proc in processes:
        if proc.get("pid") in parents:
            last[int(proc["pid"])] = proc
    for parent, proc in sorted(last.items()):
        tids = [int(t["os_thread_id"]) for t in proc.get("threads") or [] if isinstance(t.get("os_thread_id"), int)]
        reads = polled_pipes(parent, tids)
        for read in reads:
            if isinstance(read.get("writers"), list):
                read["holders"] = [_holder_facts(pid, redactor) for pid in read.pop("writers")[:8]]
        if reads:
            info[parent]["pipe_holders"] = reads


def _holder_facts(pid: int, redactor: Redactor) -> dict[str, Any]:
    """What a process holding a pipe open does, from /proc alone (it may not be Python): its
    parent, state, CPU time and age, and the kernel function and timed-sleep length of each thread."""
    facts: dict[str, Any] = {"pid": pid, "ppid": parent_pid(pid), "state": process_state(pid),
                             "title": redactor.redact(process_title(pid) or "") or None}
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[-1].split()
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        facts["cpu_s"] = round((int(fields[11]) + int(fields[12])) / CLOCK_TICKS, 2)
        facts["age_s"] = round(max(uptime - int(fields[19]) / CLOCK_TICKS, 0.0), 1)
    except (OSError, IndexError, ValueError):
        pass
    wchans = thread_wchans(pid, max_threads=8)
    if wchans:
        facts["wchan"] = wchans
        asleep = {tid: secs for tid in wchans if (secs := _sleep_request_s(pid, int(tid))) is not None}
        if asleep:
            facts["sleep_request_s"] = asleep
    return facts


def add_kernel_object_waits(info: dict[int, dict[str, Any]], processes: list[dict[str, Any]], redactor: Redactor) -> None:
    """Per process, after the last sample, from the kernel function each of its Python threads
    sleeps in (probe/kernel_objects.py): a thread blocked opening a FIFO (`fifo_opens`: the path,
    the end it opens, who holds the FIFO open on the node) and, for threads asleep in a timed
    sleep, the files it has open that other processes hold POSIX/OFD locks on (`lock_polls`: what
    a lock retried in C, SQLite's busy handler, waits for) and, for threads asleep reading an
    empty pipe that is not a standard descriptor, the pipe and who holds its write end
    (`pipe_reads`, probe/pipes.py). Only the threads py-spy showed are read (a worker's C++
    threads are many and never the job's wait)."""
    last: dict[int, dict[str, Any]] = {}
    for proc in processes:
        pid = proc.get("pid")
        if isinstance(pid, int) and pid in info and int(proc.get("sample") or 0) >= int(last.get(pid, {}).get("sample") or 0):
            last[pid] = proc
    fifo_waits: dict[int, list[tuple[int, str]]] = {}
    sleeping: dict[int, dict[str, str]] = {}
    reading: dict[int, list[int]] = {}
    for pid, proc in last.items():
        tids = [t.get("os_thread_id") for t in proc.get("threads") or [] if isinstance(t.get("os_thread_id"), int)]
        wchans = thread_wchans(pid, tids=tids)
        for tid, name in wchans.items():
            if FIFO_WAITS.search(name):
                fifo_waits.setdefault(pid, []).append((int(tid), name))
            elif SLEEPS.search(name):
                sleeping.setdefault(pid, {})[tid] = name
            elif PIPE_READ_WAIT.search(name):
                reading.setdefault(pid, []).append(int(tid))
    for pid, opens in fifo_opens(fifo_waits, platform.machine()).items():
        info[pid]["fifo_opens"] = redactor.redact_obj(opens)
    for pid, reads in pipe_reads(reading).items():
        info[pid]["pipe_reads"] = reads
    rows = read_locks()[0] if sleeping else []
    for pid, asleep in sleeping.items():
        files = locks_held_by_others(pid, rows)
        if files:
            info[pid]["lock_polls"] = redactor.redact_obj([{**f, "sleeping": asleep} for f in files])


# Ray's name for an async actor's event-loop thread ("AsyncIO Thread: <concurrency group>").
LOOP_THREAD_PREFIX = "AsyncIO Thread"


def add_loop_syscalls(info: dict[int, dict[str, Any]], processes: list[dict[str, Any]]) -> None:
    """Per process with an event-loop thread, after the last sample: the system call each loop
    thread sleeps in with its arguments (`loop_syscalls`: {tid: [nr, arg0..arg3]}) and the
    machine they are numbered for (`machine`). An idle loop sleeps in epoll_wait, whose timeout
    argument says whether a timer is due (an asyncio.sleep, a wait_for timeout) or none is (-1):
    what a loop written in C (uvloop) shows of its timers, which py-spy cannot read. With it, the
    TCP connections registered in that epoll and their traffic (`loop_sockets`, socket_peers.py)."""
    for proc in processes:
        pid = proc.get("pid")
        if not isinstance(pid, int) or pid not in info:
            continue
        for thread in proc.get("threads") or []:
            tid = thread.get("os_thread_id")
            if not str(thread.get("name") or "").startswith(LOOP_THREAD_PREFIX) or not isinstance(tid, int):
                continue
            found = thread_syscall(pid, tid)
            if found is not None:
                info[pid].setdefault("loop_syscalls", {})[str(tid)] = found
                info[pid]["machine"] = platform.machine()
    calls = {pid: value["loop_syscalls"] for pid, value in info.items() if value.get("loop_syscalls")}
    try:
        for pid, conns in loop_sockets(calls, platform.machine()).items():
            info[pid]["loop_sockets"] = conns
    except Exception:  # noqa: BLE001, S110 - a /proc or netlink oddity costs this fact, never the probe
        pass


def _left(start: float, budget_s: float) -> float:
    return budget_s - (time.monotonic() - start)


# Every function that collect.nodes.run_on_nodes ships to a node (by value, with Ray's
# cloudpickle): tests/test_shipped.py rebuilds each in a fresh interpreter where debug_hang cannot
# be imported, as on a node, and runs it, with every supported Ray.
SHIPPED = (probe_node, run_command)
