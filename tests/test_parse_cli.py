"""parse_stacks.py's command line, GIVEN / WHEN / THEN: call main([...]) and check the exit
code, stdout and the one-line stderr; and the script itself from a plain checkout."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from debug_hang.commands.parse import main
from debug_hang.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE
from debug_hang.model import STACKS_SCHEMA

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "formats"
SCRIPT = ROOT / "scripts" / "parse_stacks.py"


def test_help_lists_formats_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN nothing  WHEN --help
    code = main(["--help"])
    out = capsys.readouterr().out
    # THEN it exits 0 and documents formats, output and every exit code
    assert code == EXIT_OK
    for word in ("py-spy-text", "py-spy-json", "ray-stack", "faulthandler", "stacks-v1",
                 "exit codes:", "3  bad input", "--show-housekeeping", "--max-groups"):
        assert word in out


def test_json_is_the_stacks_v1_document(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a real py-spy dump  WHEN printed as JSON (the default)
    code = main([str(DATA / "pyspy" / "threads.txt")])
    captured = capsys.readouterr()
    # THEN stdout is the versioned document and stderr is empty
    assert code == EXIT_OK and captured.err == ""
    doc = json.loads(captured.out)
    assert doc["schema"] == STACKS_SCHEMA
    assert doc["meta"]["formats"] == {"py-spy-text": 1}
    assert doc["meta"]["threads"] == 7
    assert doc["processes"][0]["pid"] == 5671
    assert "aggregate" not in doc


def test_json_with_group_carries_groups_and_outliers(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a real `ray stack` of a job with one odd rank  WHEN --group
    code = main([str(DATA / "ray-stack" / "ray_stack.txt"), "--group"])
    doc = json.loads(capsys.readouterr().out)
    # THEN the aggregate names pid 8532 and the biggest group holds the three waiting ranks
    assert code == EXIT_OK
    agg = doc["aggregate"]
    assert [o["pid"] for o in agg["outliers"]] == [8532]
    assert sorted(m["pid"] for m in agg["groups"][0]["members"]) == [8441, 8533, 8560]
    assert agg["hidden_housekeeping"]["ray-gc-thread"] == 17


def test_summary_grouped_names_the_suspect_first(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a diagnose-style folder  WHEN a grouped summary is asked for
    code = main([str(DATA / "collect-dir"), "--format", "summary", "--group"])
    captured = capsys.readouterr()
    # THEN the outlier comes before the groups, and the folder's stacks.json was used alone
    assert code == EXIT_OK
    out = captured.out
    assert out.index("OUTLIERS: 1 process(es)") < out.index("GROUPS:")
    assert "Rank pid 8532: 1 of 4 Rank process(es) look like this; 3 share the majority" in out
    assert "Rank.load_shard (ray_target.py:40)" in out
    assert "Ray housekeeping threads hidden" in out
    assert "ignored the 14 other file(s)" in captured.err


def test_summary_without_group_lists_processes(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([str(DATA / "pyspy" / "subprocesses.txt"), "--format", "summary"])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert "pid 5687:" in out and "child_work (subprocess_target.py:20)" in out
    assert "thread 5688 child-heartbeat (idle)" in out


def test_summary_is_cut_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a large input  WHEN the summary budget is small
    code = main([str(DATA / "ray-stack" / "ray_stack.txt"), "--format", "summary", "--group",
                 "--show-housekeeping", "--max-chars", "1500"])
    out = capsys.readouterr().out
    # THEN the output stays within budget and ends saying what was left out
    assert code == EXIT_OK
    assert len(out) <= 1500
    assert out.rstrip().splitlines()[-1].startswith("[output cut at 1500 characters:")


def test_max_groups_limits_the_groups(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([str(DATA / "ray-stack" / "ray_stack.txt"), "--format", "summary", "--group",
                 "--max-groups", "2"])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert "#2 " in out and "#3 " not in out
    assert "6 more group(s) with 6 thread(s) not shown (raise --max-groups)" in out


def test_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN faulthandler output piped in  WHEN the input is "-"
    data = (DATA / "faulthandler" / "later-py311.txt").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code = main(["-"])
    doc = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK
    assert doc["meta"]["formats"] == {"faulthandler": 1}
    assert len(doc["processes"][0]["threads"]) == 6


@pytest.mark.parametrize("content,expected", [
    (b"", "stdin: the input is empty"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00" * 50, "binary data"),
    (b"$ kubectl logs trainer-0\nerror: pod not found\n", "no stack dump recognised"),
])
def test_bad_input_exits_3_with_one_line(content: bytes, expected: str,
                                         capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN empty, binary or garbage input  WHEN parsed
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(content)))
    code = main(["-"])
    captured = capsys.readouterr()
    # THEN exit 3, nothing on stdout, one line on stderr
    assert code == EXIT_BAD_INPUT
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("parse_stacks.py: error: ") and expected in captured.err


def test_missing_file_exits_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main([str(tmp_path / "nope.txt")])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert err == f"parse_stacks.py: error: {tmp_path / 'nope.txt'}: no such file or directory\n"


def test_folder_of_nothing_exits_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# nothing here\n")
    code = main([str(tmp_path)])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert "no stack dump found in the 1 file(s) of this directory" in err.splitlines()[-1]


def test_truncated_dump_is_parsed_with_a_warning(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    # GIVEN a ray stack paste cut in the middle of a frame
    text = (DATA / "ray-stack" / "ray_stack.txt").read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: text.index("Rank.load_shard") + 9])
    # WHEN parsed
    code = main([str(cut), "--format", "summary", "--group"])
    captured = capsys.readouterr()
    # THEN what came before the cut is there, and stderr says the end was cut
    assert code == EXIT_OK
    assert "GROUPS:" in captured.out
    assert "cut short" in captured.err


def test_stdin_on_a_terminal_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN "-" while stdin is a terminal  WHEN run  THEN it refuses at once instead of waiting
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True
    monkeypatch.setattr(sys, "stdin", Tty())
    code = main(["-"])
    assert code == EXIT_USAGE
    assert "stdin, which is a terminal" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--format", "yaml"], ["--max-groups", "-1"],
                                  ["--max-chars", "10"]])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main([str(DATA / "pyspy" / "threads.txt"), *argv])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert "parse_stacks.py: error:" in err


def run_script(args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    return subprocess.run([sys.executable, str(SCRIPT), *args], input=stdin, cwd="/",
                          capture_output=True, timeout=120, env=env, check=False)


def test_script_runs_from_a_plain_checkout() -> None:
    # GIVEN the script run by path from another directory, nothing installed
    res = run_script([str(DATA / "mixed" / "concat.txt"), "--format", "summary", "--group"])
    # THEN it works
    assert res.returncode == EXIT_OK, res.stderr
    assert res.stdout.startswith(b"8 processes, 33 threads from ")


def test_script_bad_input_is_one_line_never_a_traceback() -> None:
    res = run_script(["-"], stdin=b"\x00\x01\x02 not a dump" * 100)
    assert res.returncode == EXIT_BAD_INPUT
    assert res.stdout == b""
    assert res.stderr.count(b"\n") == 1 and b"Traceback" not in res.stderr
