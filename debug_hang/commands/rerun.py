"""The exact command to run instead of one that was refused, spelled the way it was invoked.

A refusal (an output folder that is not empty) names the next command in full, so that a person
or an agent can paste it: the same arguments, without the folder (a fresh one is made and
printed), or with `--force`. `invoked_as` spells the command as it was started: through
scripts/diagnose_ray_hang.sh (which says so in DEBUG_HANG_SCRIPT), the `debug-hang` console
script, or `python -m debug_hang`.
"""

from __future__ import annotations

import os
import shlex
import sys


def invoked_as(subcommand: str) -> list[str]:
    """The words that start this subcommand again, as the user started it."""
    script = os.environ.get("DEBUG_HANG_SCRIPT")
    if subcommand == "diagnose" and script:
        return ["bash", script]
    if os.path.basename(sys.argv[0] if sys.argv else "") == "debug-hang":
        return ["debug-hang", subcommand]
    return [sys.executable, "-m", "debug_hang", subcommand]


def without_value(argv: list[str], value: str, flag: str | None = None) -> list[str]:
    """`argv` without `value`: the last positional argument equal to it, or, with `flag`, the
    option `flag value` / `flag=value`."""
    if flag is not None:
        out: list[str] = []
        skip = False
        for i, arg in enumerate(argv):
            if skip:
                skip = False
            elif arg == flag and i + 1 < len(argv) and argv[i + 1] == value:
                skip = True
            elif arg != f"{flag}={value}":
                out.append(arg)
        return out
    at = max((i for i, arg in enumerate(argv) if arg == value), default=None)
    return list(argv) if at is None else argv[:at] + argv[at + 1:]


def command(words: list[str]) -> str:
    """Words as one line to paste into a POSIX shell."""
    return shlex.join(words)
