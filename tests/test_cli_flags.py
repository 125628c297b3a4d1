"""Flags that cannot go together are refused at argument parsing (exit 2), before the cluster is
contacted: py-spy refuses `--native --nonblocking`, so every command taking both refuses the pair.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import time

import pytest
from conftest import ROOT

from debug_hang.commands.cli import SUBCOMMANDS

pytestmark = pytest.mark.unit


def _options(name: str) -> set[str]:
    parser = importlib.import_module(SUBCOMMANDS[name][0]).build_parser()
    return {opt for action in parser._actions for opt in action.option_strings}


TAKING_BOTH = [name for name in SUBCOMMANDS if {"--native", "--nonblocking"} <= _options(name)]
# The arguments each needs to get past its own checks to the point where it would read the cluster.
ARGS = {"diagnose": [], "nodes": ["-n", "abc", "--dump", "1"]}


def test_the_commands_taking_both_flags_are_known() -> None:
    assert set(TAKING_BOTH) == set(ARGS), TAKING_BOTH


@pytest.mark.parametrize("name", TAKING_BOTH)
def test_native_with_nonblocking_is_a_usage_error_before_the_cluster_is_contacted(name: str, silent_port: int) -> None:
    # GIVEN an address that accepts connections and never answers (contacting it would hang)
    address = f"127.0.0.1:{silent_port}"
    start = time.monotonic()
    # WHEN the command is given both flags
    done = subprocess.run([sys.executable, "-m", "debug_hang", name, *ARGS[name], "--address" if name == "nodes" else address,
                           *([address] if name == "nodes" else []), "--native", "--nonblocking"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    # THEN argparse refuses the pair at once, exit 2, naming both flags
    assert done.returncode == 2, (done.returncode, done.stderr[-500:])
    assert "--nonblocking: not allowed with argument --native" in done.stderr
    assert time.monotonic() - start < 20


@pytest.mark.parametrize("name", TAKING_BOTH)
def test_each_flag_alone_is_accepted_by_the_parser(name: str) -> None:
    parser = importlib.import_module(SUBCOMMANDS[name][0]).build_parser()
    for flag in ("--native", "--nonblocking"):
        args = parser.parse_args([*ARGS[name], flag])
        assert getattr(args, flag.lstrip("-")) is True
