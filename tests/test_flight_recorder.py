"""PyTorch Flight Recorder: safe reading, per-group analysis, node-side collection, `debug-hang fr`.

The dumps under tests/data/flight_recorder/<example>/ were written by the examples' own helper
threads (`torch._C._distributed_c10d._dump_fr_trace()`, torch 2.13 CPU, gloo) during real hangs on
a loopback Ray cluster; `gloo_json/` holds `_dump_fr_trace_json()` output of a 3-rank gloo job in
which rank 2 skipped an all_reduce. What each example's dumps must show is its own EXPECTED.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, expected_of

from debug_hang.analyse.flight_recorder import DESYNC, NEVER_ENTERED, NO_DUMP, analyse, torch_crosscheck
from debug_hang.commands import fr as fr_cmd
from debug_hang.errors import EXIT_BAD_INPUT, BadInputError
from debug_hang.flightrec import parse_ranks
from debug_hang.parse.flight_recorder import UnsafeDumpError, load_bytes, read_dir
from debug_hang.probe.flight_recorder import FR_VARS, collect_dumps, dump_prefixes, fr_env_from_environ

pytestmark = pytest.mark.unit

DATA = ROOT / "tests" / "data" / "flight_recorder"
EXAMPLES = sorted(p.name for p in DATA.iterdir() if (ROOT / "examples" / f"{p.name}.py").exists())


class RunsCode:
    """A pickle that would run a shell command when loaded with plain pickle.load."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("example", EXAMPLES)
def test_recorded_dumps_name_the_examples_rank_group_and_collective(example: str) -> None:
    # GIVEN the real dumps of an example's hang, and what the example declares
    expected = expected_of(example)["flight_recorder"]
    world = expected_of(example).get("world_size")
    read = read_dir(DATA / example)
    assert read.errors == [] and read.dumps
    # WHEN they are analysed without torch
    fr = analyse(read.dumps, world)
    # THEN the first hung group, its pending collective and the culprit ranks are the declared ones
    first = fr.groups[0]
    assert (first.desc, first.pending_seq, first.kind) == (expected["group_desc"], expected["pending_seq"], expected["kind"])
    assert fr.culprits() == expected["culprit_ranks"]


def test_gloo_entries_stay_scheduled_and_pg_status_decides() -> None:
    # GIVEN gloo dumps (every entry 'scheduled', even completed ones)
    read = read_dir(DATA / "fr_rank_exits")
    assert {e.state for d in read.dumps for e in d.entries} == {"scheduled"}
    # WHEN analysed THEN progress comes from pg_status, and the dead rank is the one without a dump
    group = analyse(read.dumps).groups[0]
    assert group.kind == NO_DUMP and group.missing == [3] and group.entered == [0, 1, 2]


def test_cross_group_deadlock_blames_the_rank_whose_call_order_departs() -> None:
    # GIVEN ranks 0, 2 waiting in the metrics group for rank 1, which waits in the default group
    fr = analyse(read_dir(DATA / "fr_metrics_allreduce_skipped").dumps)
    metrics, default = fr.groups[0], fr.groups[1]
    # THEN both groups show ranks that never entered, but only rank 1 departed from the others' order
    assert metrics.not_entered == [1] and default.not_entered == [0, 2]
    assert metrics.culprits == [1] and default.culprits == []
    assert "waits in collective #5" in metrics.summary()


def test_desync_names_the_odd_op_and_its_call_site() -> None:
    fr = analyse(read_dir(DATA / "fr_early_stop_broadcast").dumps)
    g = fr.groups[0]
    assert g.kind == DESYNC and g.desync_seq == 4
    assert g.desync_ops[0].startswith("gloo:broadcast") and g.desync_ops[1].startswith("gloo:all_reduce")
    assert "_validate_and_broadcast" in g.to_json()["ranks"][0]["last_frame"]


def test_json_form_is_read_without_stacks() -> None:
    # GIVEN _dump_fr_trace_json() output: same facts, pg_status values as text, no frames
    read = read_dir(DATA / "gloo_json")
    assert [d.format for d in read.dumps] == ["json", "json", "json"]
    assert all(not e.frames for d in read.dumps for e in d.entries)
    fr = analyse(read.dumps)
    assert fr.groups[0].kind == NEVER_ENTERED and fr.culprits() == [2] and fr.groups[0].pending_seq == 4


def test_malicious_pickle_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    # GIVEN a "dump" whose unpickling would run `touch MARKER`
    marker = tmp_path / "pwned"
    data = pickle.dumps({"version": "2.10", "entries": [RunsCode(marker)]})
    # WHEN it is read THEN it is refused with a clear error, and the command never ran
    with pytest.raises(UnsafeDumpError, match=r"refused: the pickle asks for posix\.system"):
        load_bytes(data, 0, "rank_0")
    assert not marker.exists()
    # AND in a folder with real dumps it is listed as refused while the others are read
    folder = tmp_path / "dumps"
    shutil.copytree(DATA / "fr_early_stop_broadcast", folder)
    (folder / "rank_1").write_bytes(data)
    read = read_dir(folder)
    assert [d.rank for d in read.dumps] == [0, 2]
    assert len(read.errors) == 1 and "rank_1: refused" in read.errors[0]
    assert not marker.exists()


def test_pickled_builtin_callable_is_refused() -> None:
    # `builtins.eval` is a global too: refused like any other
    data = pickle.dumps({"entries": [], "version": "2.10", "x": eval})
    with pytest.raises(UnsafeDumpError):
        load_bytes(data, 0, "rank_0")


def test_pg_config_ranks_are_never_evaluated(tmp_path: Path) -> None:
    # torch's own builder eval()s pg_config ranks given as text; here they are a regex-checked int list
    marker = tmp_path / "evaluated"
    assert parse_ranks(f"__import__('os').system('touch {marker}')") == []
    assert parse_ranks("[0, 1, 2]") == [0, 1, 2] and parse_ranks([0, True, "1", 3]) == [0, 3]
    dump = pickle.loads((DATA / "fr_rank_exits" / "rank_0").read_bytes())  # noqa: S301 - a recorded dump of ours
    dump["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": f"'__import__(\"os\").system(\"touch {marker}\")'"}}
    parsed = load_bytes(pickle.dumps(dump), 0, "rank_0")
    torch_crosscheck([parsed])
    assert not marker.exists()


def test_not_a_dump_is_bad_input() -> None:
    with pytest.raises(BadInputError, match="not a Flight Recorder dump"):
        load_bytes(pickle.dumps([1, 2, 3]), 0, "rank_0")
    with pytest.raises(BadInputError, match="not a readable pickle"):
        load_bytes(b"\x80\x04garbage", 0, "rank_0")


def test_only_flight_recorder_variables_are_kept() -> None:
    raw = b"\0".join([b"TORCH_FR_BUFFER_SIZE=2000", b"AWS_SECRET_ACCESS_KEY=abc", b"TORCH_FR_DUMP_TEMP_FILE=/d/rank_",
                      b"HF_TOKEN=x", b"TORCH_NCCL_DUMP_ON_TIMEOUT=1"])
    env = fr_env_from_environ(raw)
    assert set(env) <= set(FR_VARS) and env["TORCH_FR_DUMP_TEMP_FILE"] == "/d/rank_"
    assert dump_prefixes(env) == ["/d/rank_"]
    assert dump_prefixes({"TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}) == ["/tmp/nccl_trace_rank_"]
    assert dump_prefixes({"TORCH_FR_DUMP_TEMP_FILE": "relative/rank_"}) == []
    assert dump_prefixes({"TORCH_FR_DUMP_TEMP_FILE": "/a/../etc/rank_"}) == []


def test_node_side_collection_is_bounded_and_read_only(tmp_path: Path) -> None:
    # GIVEN a dump folder with real dumps, a stale dump, a symlink, a named pipe and an oversized file
    folder = tmp_path / "fr"
    shutil.copytree(DATA / "fr_early_stop_broadcast", folder, copy_function=shutil.copy)  # fresh mtimes
    os.symlink(folder / "rank_0", folder / "rank_7")
    os.mkfifo(folder / "rank_8")
    os.mkfifo(folder / "rank_0.pipe")
    (folder / "rank_9").write_bytes(b"x" * 4096)
    (folder / "rank_5").write_bytes((DATA / "fr_rank_exits" / "rank_0").read_bytes())
    old = time.time() - 10 * 365 * 86400
    os.utime(folder / "rank_5", (old, old))
    env = {"TORCH_FR_DUMP_TEMP_FILE": f"{folder}/rank_", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": f"{folder}/rank_"}
    # WHEN this process (started before the fresh files were written) is the target
    result = collect_dumps({os.getpid(): env}, max_bytes=4095)
    # THEN only the fresh regular files within bounds are read; the rest is skipped with a reason
    assert sorted(d["rank"] for d in result["dumps"]) == [0, 1, 2]
    reasons = {Path(s["path"]).name: s["reason"] for s in result["skipped"]}
    assert "older than" in reasons["rank_5"] and "bound" in reasons["rank_9"]
    assert "not a regular file" in reasons["rank_7"] and "not a regular file" in reasons["rank_8"]
    assert result["pipes"] == [f"{folder}/rank_0.pipe"]  # reported, never opened
    # AND the bytes read are the dumps, analysed like the files themselves
    from debug_hang.parse.flight_recorder import from_probe

    fr = analyse(from_probe(result["dumps"]).dumps)
    assert fr.culprits() == [0] and fr.groups[0].kind == DESYNC


def test_fr_command_on_a_copied_folder(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a dump folder copied from a cluster WHEN `debug-hang fr DIR --format json` runs without Ray
    code = fr_cmd.main([str(DATA / "fr_rank_exits"), "--format", "json", "--no-torch"])
    # THEN it exits 0 and names the rank that left no dump
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["schema"] == "debug-hang/flight-recorder/v1" and doc["culprit_ranks"] == [3]


def test_fr_command_refuses_a_folder_of_unsafe_files(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    (tmp_path / "rank_0").write_bytes(pickle.dumps(RunsCode(marker)))
    proc = subprocess.run([sys.executable, "-m", "debug_hang", "fr", str(tmp_path)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, check=False)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert "refused" in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2
    assert not marker.exists()


CASES = sorted(p for p in (ROOT / "tests" / "data" / "cases").glob("*")
               if (p / "flight_recorder" / "index.json").exists() and "flight_recorder" in expected_of(p.name))


@pytest.mark.parametrize("case", CASES, ids=[p.name for p in CASES])
def test_recorded_diagnosis_joins_the_dumps_with_the_stacks(case: Path) -> None:
    # GIVEN a recorded diagnosis of an example whose ranks had written Flight Recorder dumps
    from debug_hang.pipeline import reanalyse
    from debug_hang.report.json_out import to_json
    from debug_hang.report.markdown import render_markdown

    expected = expected_of(case.name)["flight_recorder"]
    # WHEN it is re-analysed
    diag = reanalyse(case)
    doc, report = to_json(diag), render_markdown(diag)
    # THEN diagnosis.json names the declared rank, group and collective, and the report says both sources agree
    fr = doc["flight_recorder"]
    assert fr["culprit_ranks"] == expected["culprit_ranks"]
    assert (fr["groups"][0]["desc"], fr["groups"][0]["pending_seq"]) == (expected["group_desc"], expected["pending_seq"])
    assert "## Flight Recorder (PyTorch collectives)" in report and "Flight Recorder: agrees with the stacks" in report
    culprit = diag.causes[0].culprits[0]
    assert any(e.startswith("Flight Recorder: ") for e in culprit.evidence), culprit.evidence


def test_probe_reads_the_dumps_a_target_process_writes(tmp_path: Path) -> None:
    # GIVEN a real Python process started with Flight Recorder variables (and a secret beside them)
    from debug_hang.probe.node_probe import probe_node

    prefix = tmp_path / "fr" / "rank_"
    prefix.parent.mkdir()
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": str(prefix), "MY_TOKEN": "s3cret"}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        time.sleep(0.3)
        # AND the dumps of its job written after it started (real dumps, copied with fresh mtimes)
        for f in (DATA / "fr_metrics_allreduce_skipped").iterdir():
            shutil.copy(f, prefix.parent / f.name)
        # WHEN its node is probed
        result = probe_node("local", [proc.pid], {}, samples=1, interval_s=0.1, children=False)
    finally:
        proc.kill()
        proc.wait()
    # THEN the probe kept only the recorder's variables and brought the three dumps back
    assert result["info"][str(proc.pid)]["fr_env"] == {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": str(prefix)}
    fr = result["flight_recorder"]
    assert sorted(d["rank"] for d in fr["dumps"]) == [0, 1, 2] and fr["prefixes"] == [str(prefix)]
    assert "s3cret" not in json.dumps(result)


def test_stacks_and_recorder_that_disagree_are_reported_as_such() -> None:
    # GIVEN the recorded diagnosis of the broadcast desync (the stacks blame rank 0) ...
    from debug_hang.analyse.fr_join import attach
    from debug_hang.pipeline import reanalyse

    case = ROOT / "tests" / "data" / "cases" / "fr_early_stop_broadcast"
    if not case.exists():
        pytest.skip("no recorded fr_early_stop_broadcast capture")
    diag = reanalyse(case)
    # ... WHEN it is joined with dumps that blame another rank (the dead-rank run's: rank 3)
    note = attach(diag.graph, diag.causes, analyse(read_dir(DATA / "fr_rank_exits").dumps))[0]
    # THEN the disagreement is said plainly, with both sides and what to check
    assert note.startswith("Flight Recorder: DISAGREES with the stacks: the stacks name rank(s) 0, the recorder names rank(s) 3")
    assert "dumps' age" in note and diag.causes[0].evidence[0] == note


def test_fr_summary_is_bounded_and_keeps_the_culprit(capsys: pytest.CaptureFixture[str]) -> None:
    code = fr_cmd.main([str(DATA / "fr_metrics_allreduce_skipped"), "--no-torch", "--max-lines", "3"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and len(out) == 4 and out[1] == "culprit rank(s): 1" and out[-1].startswith("... ")
