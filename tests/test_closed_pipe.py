"""Every script and `debug-hang` subcommand ends quietly into a closed pipe (issue 29 item 2).

One-liners in incident channels pipe into `head`, `grep -m1`, `less`: like grep and git, each
command exits without a traceback or an "Exception ignored ... BrokenPipeError" when its reader
goes away — tried with the reader gone before the first byte (deterministic: every write
fails), with a real `| head -1` in bash, and with stderr in the same closed pipe. The commands
are the real scripts (found in scripts/) and subcommands (from the dispatcher), run as a user
runs them; their input is recorded real captures.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from debug_hang.commands.cli import SUBCOMMANDS

pytestmark = pytest.mark.unit

SCRIPTS = sorted(p for p in (ROOT / "scripts").iterdir() if p.suffix in (".py", ".sh"))
CASE = ROOT / "tests" / "data" / "cases" / "gloo_skipped_allreduce"
DUMPS = str(ROOT / "tests" / "data" / "dumps" / "dead_rank")  # a folder of recorded dumps
NOISE = ("Traceback", "Exception ignored", "BrokenPipe", "Broken pipe", "Errno 32", "internal error")


def argv_of(script: Path) -> list[str]:
    return ["bash", str(script)] if script.suffix == ".sh" else [sys.executable, str(script)]


MODULE = [sys.executable, "-m", "debug_hang"]
HELP = ([pytest.param([*argv_of(s), "--help"], id=f"{s.name} --help") for s in SCRIPTS]
        + [pytest.param([*MODULE, "--help"], id="debug-hang --help")]
        + [pytest.param([*MODULE, name, "--help"], id=f"debug-hang {name} --help") for name in SUBCOMMANDS])
# Commands that print much more than a pipe holds, on recorded captures (no cluster needed).
OUTPUT = [
    pytest.param([sys.executable, "scripts/parse_stacks.py", DUMPS], id="parse_stacks.py dumps"),
    pytest.param([sys.executable, "scripts/parse_stacks.py", "--format", "summary", "--group", DUMPS], id="parse_stacks.py --group"),
    pytest.param([sys.executable, "scripts/match_patterns.py", str(CASE / "stacks.json")], id="match_patterns.py"),
    pytest.param([*MODULE, "parse-stacks", str(CASE / "stacks.json")], id="debug-hang parse-stacks"),
    pytest.param([*MODULE, "match", str(CASE / "stacks.json")], id="debug-hang match"),
    pytest.param([*MODULE, "diagnose", "--reanalyse", str(CASE)], id="debug-hang diagnose --reanalyse"),
    pytest.param([*MODULE, "diagnose", "--reanalyse", str(CASE), "--json"], id="debug-hang diagnose --reanalyse --json"),
    pytest.param([*MODULE, "fr", str(ROOT / "tests" / "data" / "flight_recorder" / "fr_rank_exits")], id="debug-hang fr"),
]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def run_into_closed_pipe(argv: list[str], stderr_too: bool = False) -> tuple[int, str]:
    """Run `argv` with stdout on a pipe whose read end is closed before it starts."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env(), stdout=write, stderr=write if stderr_too else subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=120, check=False)
    finally:
        os.close(write)
    return proc.returncode, (proc.stderr or b"").decode("utf-8", "replace")


@pytest.mark.parametrize("argv", HELP + OUTPUT)
def test_a_reader_gone_before_the_first_byte_ends_it_quietly(argv: list[str]) -> None:
    code, err = run_into_closed_pipe(argv)
    assert code == 0 and not any(n in err for n in NOISE), err


@pytest.mark.parametrize("argv", HELP[:1] + OUTPUT)
def test_stderr_in_the_same_closed_pipe_ends_it_quietly(argv: list[str]) -> None:
    code, _ = run_into_closed_pipe(argv, stderr_too=True)
    assert code == 0


@pytest.mark.parametrize("argv", HELP + OUTPUT)
def test_piped_into_head_it_prints_its_first_line_and_no_traceback(argv: list[str], tmp_path: Path) -> None:
    # `cmd | head -1` as typed; the command's own exit code and stderr kept apart
    line = " ".join(f"'{a}'" for a in argv)
    err_file = tmp_path / "stderr"
    shell = f"{line} 2>\"$ERR\" | head -1; echo \"rc=${{PIPESTATUS[0]}}\""
    proc = subprocess.run(["bash", "-c", shell], cwd=ROOT, env={**env(), "ERR": str(err_file)},
                          capture_output=True, text=True, timeout=120, check=False)
    err = err_file.read_text(errors="replace")
    first, _, rc = proc.stdout.rpartition("rc=")
    assert rc.strip() == "0" and first.strip(), (proc.stdout, err)
    assert not any(n in err for n in NOISE), err


def test_a_reader_that_leaves_after_one_line_of_a_long_output_ends_it_quietly(tmp_path: Path) -> None:
    # GIVEN a capture of 300 ranks (recorded stacks, new identities): megabytes of parse output,
    # far more than a pipe holds, so the writer certainly meets the reader's exit
    import scale_capture

    capture = scale_capture.build(tmp_path / "capture", ranks=300, nodes=30)
    for argv in ([sys.executable, "scripts/parse_stacks.py", str(capture / "stacks.json")],
                 [sys.executable, "scripts/match_patterns.py", str(capture / "stacks.json")]):
        reader = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert reader.stdin is not None
        proc = subprocess.run(argv, cwd=ROOT, env=env(), stdout=reader.stdin, stderr=subprocess.PIPE, timeout=120,
                              check=False)
        reader.stdin.close()
        assert reader.stdout is not None
        first = reader.stdout.read()
        reader.wait(timeout=30)
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 0 and first.strip() and not any(n in err for n in NOISE), (argv, err)


def test_a_broken_pipe_that_is_not_the_reader_is_still_an_error() -> None:
    # A BrokenPipeError from elsewhere (a socket) is no closed reader: it is reported, exit 1.
    code = ("import sys; sys.argv = ['x']\n"
            "from debug_hang.errors import run_main\n"
            "def main():\n    raise BrokenPipeError(32, 'peer closed the socket')\n"
            "run_main(main, 'x')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 1 and "x: internal error: BrokenPipeError" in proc.stderr
