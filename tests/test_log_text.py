"""A child's output file is not its log; a log's bytes that are not text are never lines (issue 29).

On real local processes with the real py-spy (no Ray cluster): a target whose children write a
gzip stream and CSV rows into data files through their stdout, and a child that inherits the
target's own log. The bytes are the real outputs of gzip and of the processes, never typed here.
"""

from __future__ import annotations

import gzip
import os
import pickle
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from debug_hang.analyse.progress import assess
from debug_hang.probe.logtext import clean_log_text, is_text, text_lines
from debug_hang.probe.node_probe import probe_node
from debug_hang.probe.pyspy import DumpOptions, find_pyspy

pytestmark = pytest.mark.unit
needs_pyspy = pytest.mark.skipif(find_pyspy() is None, reason="py-spy not installed")

ROWS = "import sys, time\nfor n in range(10**6):\n    print(f'{n},user{n}@customer.example,{n % 997}', flush=True)\n    time.sleep(0.002)\n"
LOGGER = "import time\nfor n in range(10**6):\n    print(f'exported chunk {n}/1000000', flush=True)\n    time.sleep(0.05)\n"
GEN = "import os, sys, time\nwhile True:\n    sys.stdout.buffer.write(os.urandom(65536)); sys.stdout.flush(); time.sleep(0.01)\n"
# The target: its stdout is its log (a file); children write data files or inherit the log.
TARGET = textwrap.dedent("""\
    import subprocess, sys, threading
    out_dir = sys.argv[1]
    gen = subprocess.Popen([sys.executable, "-c", sys.argv[2]], stdout=subprocess.PIPE)
    gz = subprocess.Popen(["gzip", "-1", "-c"], stdin=gen.stdout, stdout=open(out_dir + "/big.bin.gz", "wb"))
    gen.stdout.close()
    rows = subprocess.Popen([sys.executable, "-c", sys.argv[3]], stdout=open(out_dir + "/rows.csv", "wb"))
    log = subprocess.Popen([sys.executable, "-c", sys.argv[4]])  # inherits this process's log
    # before READY, a child whose stdout is this process's log too writes a gzip stream into it
    subprocess.run(["gzip", "-1", "-c", out_dir + "/seed.bin"], check=True)
    print("READY", flush=True)
    threading.Event().wait()
    """)


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    script, log = tmp_path / "exporter.py", tmp_path / "exporter.out"
    script.write_text(TARGET)
    (tmp_path / "seed.bin").write_bytes(os.urandom(1 << 20))
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, str(script), str(tmp_path), GEN, ROWS, LOGGER], stdout=fh, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + 20
    while (b"READY" not in log.read_bytes() or not (tmp_path / "rows.csv").stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.05)
    yield proc, tmp_path
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def child_info(value: dict[str, Any], title_part: str) -> dict[str, Any]:
    found = [i for i in value["info"].values() if i["child_of"] and title_part in (i["title"] or "")]
    assert found, [i["title"] for i in value["info"].values()]
    return found[0]


@needs_pyspy
def test_a_childs_data_files_are_counted_in_bytes_and_its_inherited_log_is_read(
        exporter: tuple[subprocess.Popen[bytes], Path]) -> None:
    proc, out = exporter
    # WHEN the node probe samples the target and its children
    value = probe_node("local", [proc.pid], DumpOptions().to_dict(), samples=2, interval_s=0.6)
    # THEN gzip's compressed stdout is an output file: bytes counted, nothing read as a log
    gz = next(i for i in value["info"].values() if i["child_of"] and (i["title"] or "").endswith("gzip -1 -c"))
    window = gz["progress"]
    assert not [log for log in window["logs"] if log["name"] == "big.bin.gz"], window
    (output,) = [o for o in window["outputs"] if o["name"] == "big.bin.gz"]
    assert output["bytes"] > 0 and set(output) <= {"fd", "name", "bytes", "rotated"}
    # ... so are the CSV rows: the job's data is never quoted
    rows = child_info(value, ROWS.split("\n")[0])["progress"]
    assert not rows["logs"] and rows["outputs"][0]["name"] == "rows.csv" and rows["outputs"][0]["bytes"] > 0
    assert not re.search(r"\d+,user\d+@customer", str(value))  # no row (the titles hold the code)
    # ... and a few KiB of rows in the window is activity, not proof of work (it could be a heartbeat)
    rows_read = assess("local", 3, "rows", rows, None, None, None)
    assert rows_read.readings["output_file_bytes"] < 65536, rows_read.readings
    assert {f.signal for f in rows_read.findings if f.family == "io" and f.signal.startswith("output")} == {"output-write-small"}
    assert rows_read.deciding("activity") and not [f for f in rows_read.deciding("progress") if f.signal.startswith("output")]
    # AND the child that writes into the target's log is read: its lines, its counter
    logger = child_info(value, LOGGER.split("\n")[0])["progress"]
    (log,) = logger["logs"]
    assert log["name"] == "exporter.out" and log["lines"] and log["new"][-1].startswith("exported chunk ")
    assert "outputs" not in logger
    # AND the readings count the data as bytes written (progress), the log as lines
    gz_read = assess("local", 1, "gzip", window, None, None, None)
    assert "output-write" in {f.signal for f in gz_read.deciding("progress")}
    assert any("big.bin.gz" in f.text for f in gz_read.findings)
    assert gz_read.readings["log_lines"] == 0
    log_read = assess("local", 2, "logger", logger, None, None, None)
    assert {"log-counter"} <= {f.signal for f in log_read.deciding("progress")}


@needs_pyspy
def test_binary_bytes_in_a_real_log_are_counted_not_quoted(exporter: tuple[subprocess.Popen[bytes], Path]) -> None:
    # GIVEN the target's own log, into which a child (gzip -c, stdout inherited) wrote a
    # compressed stream before the window, and where the logger child keeps adding lines
    proc, out = exporter
    value = probe_node("local", [proc.pid], DumpOptions().to_dict(), samples=2, interval_s=0.6)
    (log,) = value["info"][str(proc.pid)]["progress"]["logs"]
    # THEN its lines are the logger's text lines only; the tail before the window is text only
    assert all(is_text(line) for line in log["new"] + log["tail"])
    assert all("\ufffd" not in line for line in log["new"] + log["tail"])
    assert log["new"] and all(line.startswith(("exported chunk", "READY")) for line in log["new"])


@needs_pyspy
def test_a_log_that_grows_with_binary_bytes_counts_them_as_bytes_written(tmp_path: Path) -> None:
    # GIVEN a process whose own stdout (its log) receives random bytes, 64 KiB at a time
    log = tmp_path / "raw.out"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-c", GEN], stdout=fh, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not log.stat().st_size and time.monotonic() < deadline:
            time.sleep(0.05)
        value = probe_node("local", [proc.pid], DumpOptions().to_dict(), samples=2, interval_s=0.5, children=False)
    finally:
        proc.kill()
        proc.wait()
    # THEN nothing of it is a line, before or in the window; every new byte is counted as not text
    window = value["info"][str(proc.pid)]["progress"]
    (entry,) = window["logs"]
    assert entry["bytes"] > 0 and entry["not_text_bytes"] == entry["bytes"]
    assert not entry["lines"] and entry["new"] == [] and entry["tail"] == []
    # AND the readings: bytes written into its output, no log line, no log bytes
    read = assess("local", proc.pid, "raw", window, None, None, None)
    assert read.readings["output_file_bytes"] == entry["bytes"] and read.readings["log_bytes"] == 0
    assert "novel_log_lines" not in {f.signal for f in read.findings}
    assert "output-write" in {f.signal for f in read.deciding("progress")}


def real_gzip_bytes() -> bytes:
    """gzip's real output for a fixed input (-n: no name or time in the header): the same bytes at every run."""
    data = random.Random(29).randbytes(200_000) + b"a,b,c\n" * 1000
    return subprocess.run(["gzip", "-9", "-n", "-c"], input=data, capture_output=True, check=True, timeout=30).stdout


def test_compressed_and_pickled_bytes_are_not_text() -> None:
    for blob in (real_gzip_bytes(), gzip.compress(b"row,1\n" * 10_000), pickle.dumps(list(range(5000)))):
        lines, not_text = text_lines(blob)
        assert lines == [] and not_text == len(blob)


def test_a_log_with_colours_and_carriage_returns_is_text_and_a_cut_character_is_not_held_against_it() -> None:
    log = "\x1b[36m(Trainer pid=12)\x1b[0m step 3/10 — loss 0.25 ✓\r\n 50%|█████     | 5/10\n".encode()
    lines, not_text = text_lines(log)
    assert not_text == 0 and lines[0].endswith("loss 0.25 ✓") and "5/10" in lines[-1]
    cut = log[: log.index("✓".encode()) + 1]  # inside the three bytes of ✓
    lines, not_text = text_lines(cut, cut=True)
    assert not_text == 0 and lines[-1].endswith("loss 0.25 ")
    assert text_lines(cut)[1] > 0  # not cut: the broken character is not text


def test_one_binary_line_in_a_log_is_dropped_and_the_rest_kept() -> None:
    blob = real_gzip_bytes()[:300].replace(b"\n", b" ")
    data = b"step 1/9\n" * 50 + blob + b"\n" + b"step 2/9\n" * 50
    lines, not_text = text_lines(data)
    assert len(lines) == 100 and not_text == len(blob) + 1


def test_a_log_decoded_with_replacement_keeps_its_text_lines_only() -> None:
    blob = real_gzip_bytes()[:4000]
    text = (b"starting export\n" + blob + b"\nexport done\n").decode("utf-8", "replace")
    cleaned = clean_log_text(text)
    assert cleaned.startswith("starting export\n[") and cleaned.endswith("line(s) not text]\nexport done\n")
    assert "\ufffd" not in cleaned and all(is_text(line) for line in cleaned.splitlines())
