"""No output-folder collisions (issue 28 item 2).

The docs never name a fixed output folder for a diagnosis; with none given, each run makes a new
private one and prints it; a used folder is refused with the exact commands to run instead,
spelled the way the tool was started (and those commands, run as printed, get past the folder);
`debug-hang watch` puts each diagnosis into a new folder of its own, never a shared fixed one.
The commands run as a user runs them, against an address where nothing listens (the folder is
decided before anything is read).
"""

from __future__ import annotations

import re
import shlex
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from debug_hang.commands import demo
from debug_hang.commands.diagnose import build_parser
from debug_hang.errors import EXIT_UNREACHABLE, EXIT_USAGE, UsageError
from debug_hang.report.write import diagnoses_folder
from debug_hang.watch import Watcher, WatchOptions

pytestmark = pytest.mark.unit
DOCS = [ROOT / "SKILL.md", ROOT / "README.md", *sorted((ROOT / "references").rglob("*.md"))]
DIAGNOSE = re.compile(r"(?:diagnose_ray_hang\.sh|debug-hang diagnose|debug_hang diagnose)((?:\s+[^\s\"'`|;&#)]+)*)")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_doc_names_a_fixed_output_folder() -> None:
    # GIVEN every diagnose command in the skill, the README and the references
    valued = {opt for a in build_parser()._actions if a.option_strings and a.nargs != 0 for opt in a.option_strings}
    found = 0
    for doc in DOCS:
        for match in DIAGNOSE.finditer(doc.read_text()):
            words, positional, skip = match.group(1).split(), [], False
            for word in words:
                if skip:
                    skip = False
                elif word in valued:
                    skip = True
                elif not word.startswith("-"):
                    positional.append(word)
            found += 1
            # THEN OUTPUT_DIR (the second positional) is absent, a placeholder, or a variable made fresh per run
            folder = positional[1] if len(positional) > 1 else ""
            assert "/" not in folder or "$" in folder, f"{doc.name}: fixed output folder in {match.group(0)!r}"
    assert found >= 5


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("start", [["bash", "scripts/diagnose_ray_hang.sh"],
                                   [sys.executable, "-m", "debug_hang", "diagnose"]], ids=["script", "module"])
def test_a_used_folder_is_refused_with_the_exact_commands_to_run_instead(start: list[str], tmp_path: Path) -> None:
    # GIVEN a folder holding an earlier diagnosis's file and a file of the user's
    used = tmp_path / "diag"
    used.mkdir()
    (used / "report.md").write_text("earlier")
    (used / "notes.txt").write_text("mine")
    address = f"127.0.0.1:{closed_port()}"
    # WHEN it is given again
    refused = run([*start, address, str(used), "--job-id", "02000000"])
    # THEN refused in one line, exit 2, naming both commands in full, spelled as started
    assert refused.returncode == EXIT_USAGE and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    message = refused.stderr.strip()
    fresh = message.split("run: ", 1)[1].split("   ", 1)[0]
    forced = message.split("instead: ", 1)[1]
    assert shlex.split(fresh) == [*start, address, "--job-id", "02000000"]
    assert shlex.split(forced) == [*start, address, str(used), "--job-id", "02000000", "--force"]
    # AND run as printed, each gets past the folder (to the cluster, which is not there)
    for command in (fresh, forced):
        again = run(shlex.split(command))
        assert again.returncode == EXIT_UNREACHABLE, again.stderr
    assert (used / "notes.txt").read_text() == "mine"  # --force removes only a diagnosis's own files


def test_with_no_folder_each_run_makes_a_new_one_and_prints_it() -> None:
    address = f"127.0.0.1:{closed_port()}"
    first, second = (run(["bash", "scripts/diagnose_ray_hang.sh", address]) for _ in range(2))
    made = [re.search(r"writing into (\S+)", p.stderr) for p in (first, second)]
    assert all(made), (first.stderr, second.stderr)
    folders = [Path(m.group(1)) for m in made if m]
    assert folders[0] != folders[1] and all(f.name.startswith("ray_hang_diag_") for f in folders)
    # ... and a run that diagnosed nothing leaves no empty folder behind
    assert not any(f.exists() for f in folders)


def test_demo_refuses_a_used_folder_with_the_command_to_run_instead(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("earlier")
    with pytest.raises(UsageError) as refused:
        demo.main(["busy_loop", "--output-dir", str(tmp_path)])
    text = str(refused.value)
    assert "is not empty (1 entry)" in text and text.endswith("-m debug_hang demo busy_loop")


def test_watch_gives_each_diagnosis_a_new_private_folder(tmp_path: Path) -> None:
    # GIVEN a watcher with no --out
    lines: list[str] = []
    watcher = Watcher(WatchOptions(stall_s=60, interval_s=30), say=lines.append)
    # WHEN two diagnoses of one job start in the same second
    first, second = watcher.new_folder("02000000-20261201-091500"), watcher.new_folder("02000000-20261201-091500")
    try:
        # THEN each has a folder of its own, private, under a new private folder that was said
        assert first != second and second.name == "02000000-20261201-091500-2"
        parent = first.parent
        assert parent.name.startswith("ray_hang_watch_") and second.parent == parent
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in (parent, first, second))
        assert any(f"diagnoses go into {parent}" in line for line in lines)
        # AND another watcher (or user) never gets the same default folder
        other = Watcher(WatchOptions(stall_s=60, interval_s=30), say=lines.append).out_dir()
        assert other != parent
        other.rmdir()
    finally:
        for p in (first, second):
            p.rmdir()
        first.parent.rmdir()


def test_watch_out_may_hold_earlier_diagnoses_but_must_be_a_folder_of_yours(tmp_path: Path) -> None:
    out = tmp_path / "hangs"
    assert diagnoses_folder(out) == out and stat.S_IMODE(out.stat().st_mode) == 0o700  # made, private
    (out / "02000000-20261201-091500").mkdir()
    assert diagnoses_folder(out) == out  # earlier diagnoses are fine: each new one has its own folder
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="not a folder"):
        diagnoses_folder(tmp_path / "file")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UsageError, match="writable by everyone"):
        diagnoses_folder(shared)
