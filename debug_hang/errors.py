"""Errors that carry the text telling the user how to fix them, and the exit code of each kind.

Every script maps an escaping `DebugHangError` to its `exit_code` and a one-line message on
stderr; anything else is a bug and exits with `EXIT_INTERNAL` (still one line, never a traceback
unless `DEBUG_HANG_TRACEBACK=1`).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable

EXIT_OK = 0
EXIT_INTERNAL = 1  # a bug in debug-hang: please report it with DEBUG_HANG_TRACEBACK=1
EXIT_USAGE = 2  # bad command line (argparse uses 2 as well)
EXIT_BAD_INPUT = 3  # input file empty, unreadable, binary or of no known format
EXIT_UNREACHABLE = 4  # the cluster (GCS or dashboard) did not answer
EXIT_NOT_FOUND = 5  # the job, node or process asked for does not exist
EXIT_DEADLINE = 6  # the deadline passed before anything useful was produced
EXIT_PARTIAL = 7  # run_on_each_ray_node: at least one node failed or timed out
EXIT_INCONCLUSIVE = 8  # diagnose: the blocked processes could not be inspected (no stacks, no verdict)
EXIT_WRONG = 9  # demo: the diagnosis printed is not the scenario's expected answer

EXIT_CODES_HELP = """exit codes:
  0  success
  1  internal error (rerun with DEBUG_HANG_TRACEBACK=1 and report it)
  2  usage error
  3  bad input: empty, unreadable, binary or unknown format
  4  cluster unreachable (GCS or dashboard did not answer)
  5  not found: no such job, node or process
  6  deadline passed before a result could be produced
  7  partial: some nodes failed or timed out (run_on_each_ray_node)
  8  inconclusive: the blocked processes could not be inspected (py-spy missing or refused; diagnose)
  9  demo: the diagnosis is not the scenario's expected answer"""


class DebugHangError(Exception):
    """Base class: the message is complete and says what to do next."""

    exit_code = EXIT_INTERNAL


class UsageError(DebugHangError):
    exit_code = EXIT_USAGE


class BadInputError(DebugHangError):
    exit_code = EXIT_BAD_INPUT


class UnreachableError(DebugHangError):
    exit_code = EXIT_UNREACHABLE


class NotFoundError(DebugHangError):
    exit_code = EXIT_NOT_FOUND


class DeadlineError(DebugHangError):
    exit_code = EXIT_DEADLINE


PTRACE_HELP = (
    "py-spy needs ptrace rights on the target: run as root or as the process owner, with "
    "/proc/sys/kernel/yama/ptrace_scope at 0 or 1 (it is {scope} here); in a container add the "
    "SYS_PTRACE capability (docker --cap-add SYS_PTRACE, Kubernetes securityContext.capabilities)."
)


def ptrace_help() -> str:
    """The fix-it text for a py-spy permission error, with this node's ptrace_scope."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", encoding="ascii") as fh:
            scope = fh.read().strip()
    except OSError:
        scope = "unknown"
    return PTRACE_HELP.format(scope=scope)


def run_main(main: Callable[[], int], prog: str) -> None:
    """Run a script's main(): map errors to exit codes and one-line messages, then exit.

    stdout and stderr go through `printer.SafeStream` for the whole run: whatever a script prints
    (its own text, a job's names and log lines, a library's warnings) loses secrets and control
    characters there, once. A reader that goes away (`| head -1`, `grep -m1`, `less` quit) ends the
    script quietly, as grep and git do: no traceback, no message, exit 0.
    """
    from debug_hang.printer import SafeStream

    out, err = SafeStream(sys.stdout), SafeStream(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        code = main()
    except BaseException as exc:  # noqa: BLE001 - every ending is mapped to one exit code
        reader_gone = out.broken or (err.broken and isinstance(exc, BrokenPipeError))
        code = EXIT_OK if reader_gone else _exit_code_of(exc, prog)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    sys.exit(EXIT_OK if out.broken else code)


def _exit_code_of(exc: BaseException, prog: str) -> int:
    """The exit code of a script that ended with `exc`, after its one-line message on stderr."""
    if isinstance(exc, SystemExit):  # argparse: --help (0), a usage error (2, message printed)
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or EXIT_OK
        _tell(str(exc.code))
        return EXIT_INTERNAL
    if isinstance(exc, DebugHangError):
        _tell(f"{prog}: error: {exc}")
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        _tell(f"{prog}: interrupted")
        return 130
    if not isinstance(exc, Exception):
        raise exc  # GeneratorExit and the like: not ours to map
    if os.environ.get("DEBUG_HANG_TRACEBACK"):
        traceback.print_exception(exc)
    _tell(f"{prog}: internal error: {type(exc).__name__}: {exc}")
    return EXIT_INTERNAL


def _tell(message: str) -> None:
    """One line on stderr; nothing if nobody reads it any more."""
    try:
        print(message, file=sys.stderr)
    except OSError:
        pass
