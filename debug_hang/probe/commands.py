"""`run_on_each_ray_node.py COMMAND` on one node: one argv, never through a shell, bounded in time
and output; a timed-out command's process group is killed and a process it left stopped is
resumed. Shipped to nodes with `probe_node` (node_probe.SHIPPED); standard library only."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from debug_hang.probe.pyspy import STOPPED_STATES, find_pyspy, process_state, resume_if_stopped, validate_pid

# A command's stdout and stderr are each cut to this many bytes on the node: a few py-spy dumps
# fit easily, and one runaway command cannot flood the driver or an agent's context.
MAX_OUTPUT_BYTES = 100_000
# The helper answers this long before its caller stops waiting, so that a slow command is
# reported by the helper itself ("timed out after N s") rather than as a silent node.
HELPER_MARGIN_S = 2.0

# After a timed-out command's process group is killed, its pipes are read this long at most.
DRAIN_TIMEOUT_S = 2.0
# Why a command could not run on a node (a closed vocabulary, like pyspy.DUMP_ERROR_KINDS).
COMMAND_NOT_FOUND = "command-not-found"
COMMAND_TIMEOUT = "command-timeout"
COMMAND_FAILED_TO_START = "command-failed-to-start"


def pid_namespace() -> str | None:
    """This process's PID namespace (`pid:[4026531836]`), to tell nodes sharing a host apart."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def resolve_command(argv: list[str]) -> list[str]:
    """argv with its program resolved; `py-spy` is also looked for beside this Python."""
    if not argv:
        raise ValueError("empty command")
    program = argv[0]
    if os.sep not in program and shutil.which(program) is None and program == "py-spy":
        found = find_pyspy()
        if found:
            return [found, *argv[1:]]
    return list(argv)


def run_command(argv: list[str], timeout_s: float, max_output: int = MAX_OUTPUT_BYTES,
                deadline: float | None = None) -> dict[str, Any]:
    """Run one command (an argv list, never through a shell) on this node, bounded.

    `timeout_s` bounds the command; `deadline` (epoch seconds, optional) is when the caller stops
    waiting, and the command is cut `HELPER_MARGIN_S` before it so that this answer still
    arrives. On timeout the command's whole process group is killed. stdout and stderr are each
    cut to `max_output` bytes (0: no cut). Never raises: failures are in "error" and "kind".
    Result: {"node_id"?, "hostname", "pid_namespace", "argv", "returncode", "stdout", "stderr",
    "stdout_cut", "stderr_cut", "error", "kind", "seconds"}.
    """
    start = time.monotonic()
    limit = float(timeout_s)
    if deadline is not None:
        margin = min(HELPER_MARGIN_S, 0.25 * float(timeout_s))
        limit = min(limit, deadline - time.time() - margin)
    limit = max(limit, 1.0)  # a late helper still gets a moment rather than nothing
    result: dict[str, Any] = {
        "hostname": socket.gethostname(), "pid_namespace": pid_namespace(), "argv": list(argv),
        "returncode": None, "stdout": "", "stderr": "", "stdout_cut": 0, "stderr_cut": 0,
        "error": None, "kind": None, "seconds": 0.0,
    }
    try:
        resolved = resolve_command([str(a) for a in argv])
    except ValueError as exc:
        result.update(error=str(exc), kind=COMMAND_FAILED_TO_START)
        return result
    stopped_before = {pid for pid in _pid_args(resolved) if process_state(pid) in STOPPED_STATES}
    try:
        proc = subprocess.Popen(resolved, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except FileNotFoundError:
        path = os.environ.get("PATH", "")
        result.update(error=f"command not found on this node: {resolved[0]!r} (PATH={path[:300]}; "
                      f"Python {sys.executable})", kind=COMMAND_NOT_FOUND)
        return result
    except OSError as exc:
        result.update(error=f"cannot start {resolved[0]!r} on this node: {exc}",
                      kind=COMMAND_FAILED_TO_START)
        return result
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        result.update(error=f"command did not finish within {limit:.1f}s; its process group was "
                      "killed", kind=COMMAND_TIMEOUT)
        try:
            out, err = proc.communicate(timeout=DRAIN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # A process that left the group (setsid, a daemon) still holds the pipes open: its
            # output is not waited for.
            out, err = b"", b""
            result["error"] += "; its output is lost: a process outside its group keeps its stdout/stderr open"
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=DRAIN_TIMEOUT_S)  # the group leader was killed: it is reaped at once
        # A killed `py-spy dump --pid N` may leave N stopped: resume it (unless it was stopped
        # before the command ran), and say so.
        resumed = [f"{pid}: {note}" for pid in _pid_args(resolved)
                   if pid not in stopped_before and (note := resume_if_stopped(pid))]
        if resumed:
            result["error"] += "; " + "; ".join(resumed)
    result["returncode"] = proc.returncode
    for name, data in (("stdout", out), ("stderr", err)):
        cut = max(0, len(data) - max_output) if max_output > 0 else 0
        kept = data[: len(data) - cut] if cut else data
        result[name] = kept.decode("utf-8", "replace")
        result[f"{name}_cut"] = cut
    result["seconds"] = round(time.monotonic() - start, 3)
    return result


def _pid_args(argv: list[str]) -> list[int]:
    """The valid pids given to a command as `--pid N` / `-p N` (py-spy's spelling)."""
    pids = []
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag in ("--pid", "-p"):
            try:
                pids.append(validate_pid(value))
            except ValueError:
                continue
    return pids


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
