"""Unit tests: node selection, the GCS node table, and the run_on_each_ray_node.py CLI.

No cluster here. The node table is a real one, recorded from a 3-node loopback cluster with one
node killed (tests/data/nodes/gcs_node_info.json, GcsNodeInfo protobufs in base64). Where the CLI
would submit helper tasks, `run_on_nodes` is replaced by running the same helper function in
this process, so the command really runs; the real Ray path is in test_multinode.py.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from debug_hang.collect.nodes import NODE_DEAD, NodeInfo, NodeRun, select_nodes
from debug_hang.commands import nodes as node_cli
from debug_hang.errors import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    NotFoundError,
    UsageError,
    run_main,
)

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parent / "data" / "nodes"
HEAD = "007637b837780feb5d17144d5fb2896164f8a6a2a77d9201ea7a53ca"
POD = "40f10e85f920fe8b0308dad803324790a74bc11d0dd02b934acffee3"
DEAD = "b295e940b8b3e1557c37ca6f54db978e271f033c7bca6b87f07449a3"


def recorded_nodes() -> list[NodeInfo]:
    from ray.core.generated import gcs_pb2

    doc = json.loads((DATA / "gcs_node_info.json").read_text())
    message = gcs_pb2.GcsNodeInfo  # type: ignore[attr-defined]  # generated, no stub
    return [NodeInfo.from_gcs(message.FromString(base64.b64decode(raw))) for raw in doc["nodes"]]


def twins() -> list[NodeInfo]:
    """Two alive nodes whose ids share the prefix `abc`, on two IPs, plus a dead one on the first."""
    return [NodeInfo("abc1" + "0" * 52, "10.0.0.1", True, True, {"CPU": 8.0}),
            NodeInfo("abc2" + "0" * 52, "10.0.0.2", True, False, {"CPU": 8.0, "GPU": 1.0}),
            NodeInfo("def0" + "0" * 52, "10.0.0.1", False, False, {"CPU": 8.0}, death_reason="gone")]


# --- the recorded GCS node table ---------------------------------------------------------------

def test_gcs_node_table_gives_state_head_resources_and_death_reason() -> None:
    # GIVEN the recorded table WHEN read THEN each node has its real id, state and resources
    nodes = {n.node_id: n for n in recorded_nodes()}
    assert set(nodes) == {HEAD, POD, DEAD}
    assert nodes[HEAD].is_head and nodes[HEAD].alive and nodes[HEAD].resources["CPU"] == 2.0
    assert nodes[POD].resources["pod"] == 1.0 and not nodes[POD].is_head
    assert not any(k.startswith("node:") for n in nodes.values() for k in n.resources)
    dead = nodes[DEAD]
    assert not dead.alive
    assert dead.death_reason is not None
    assert dead.death_reason.startswith("UNEXPECTED_TERMINATION: health check failed")
    assert json.loads(json.dumps(dead.to_dict()))["death_reason"] == dead.death_reason


# --- select_nodes ------------------------------------------------------------------------------

def test_no_selector_means_every_alive_node() -> None:
    assert {n.node_id for n in select_nodes(recorded_nodes(), [])} == {HEAD, POD}


def test_unique_prefix_selects_one_node_case_insensitively() -> None:
    assert [n.node_id for n in select_nodes(recorded_nodes(), ["40F1"])] == [POD]
    assert [n.node_id for n in select_nodes(recorded_nodes(), [HEAD])] == [HEAD]


def test_an_explicitly_chosen_dead_node_is_selected_so_it_can_be_reported() -> None:
    assert [n.node_id for n in select_nodes(recorded_nodes(), ["b29"])] == [DEAD]


def test_ip_selects_every_alive_node_with_that_ip() -> None:
    # GIVEN three nodes on 127.0.0.1, one dead WHEN selected by IP THEN both alive ones
    assert {n.node_id for n in select_nodes(recorded_nodes(), ["127.0.0.1"])} == {HEAD, POD}
    assert [n.node_id for n in select_nodes(twins(), ["10.0.0.2"])] == ["abc2" + "0" * 52]


def test_ambiguous_prefix_is_refused_with_the_candidates() -> None:
    with pytest.raises(UsageError, match="ambiguous") as info:
        select_nodes(twins(), ["abc"])
    assert "abc1" + "0" * 52 in str(info.value) and "abc2" + "0" * 52 in str(info.value)


def test_unknown_and_invalid_selectors_are_refused() -> None:
    with pytest.raises(NotFoundError, match="no node matches 'ffff'"):
        select_nodes(recorded_nodes(), ["ffff"])
    with pytest.raises(UsageError, match="invalid node selector"):
        select_nodes(recorded_nodes(), ["node-1; rm -rf /"])


def test_repeated_selectors_do_not_duplicate_nodes() -> None:
    chosen = select_nodes(recorded_nodes(), ["40f1", POD, "127.0.0.1"])
    assert [n.node_id for n in chosen] == [POD, HEAD]


# --- COMMAND parsing ---------------------------------------------------------------------------

@pytest.mark.parametrize(("parts", "argv"), [
    (["py-spy dump --pid 123"], ["py-spy", "dump", "--pid", "123"]),
    (["--", "py-spy", "dump", "--pid", "123"], ["py-spy", "dump", "--pid", "123"]),
    (["hostname"], ["hostname"]),
    (["echo 'a b' | wc -l; rm x"], ["echo", "a b", "|", "wc", "-l;", "rm", "x"]),  # no shell
    (["py-spy", "dump", "--pid 1"], ["py-spy", "dump", "--pid 1"]),  # an argv is kept as given
])
def test_command_is_an_argv_never_a_shell_line(parts: list[str], argv: list[str]) -> None:
    assert node_cli.parse_command(parts) == argv


def test_unbalanced_quote_and_empty_command_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="cannot split"):
        node_cli.parse_command(["echo 'unterminated"])
    with pytest.raises(UsageError, match="empty command"):
        node_cli.parse_command(["--"])


# --- the CLI -----------------------------------------------------------------------------------

def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the CLI as the script does (run_main maps errors to exit codes); return code, out, err."""
    with pytest.raises(SystemExit) as exit_info:
        run_main(lambda: node_cli.main(args), node_cli.PROG)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


@pytest.fixture
def recorded_cluster(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[NodeInfo]], None]:
    """Make the CLI see a given node table, and run helpers in this process instead of on nodes."""

    def install(nodes: list[NodeInfo]) -> None:
        alive = {n.node_id for n in nodes if n.alive}

        def local_run(fn: Callable[..., Any], args_by_node: dict[str, tuple[Any, ...]], timeout_s: float,
                      node_timeout_s: float | None = None, deadline_kw: str | None = None) -> dict[str, NodeRun]:
            # As run_on_nodes: each helper told its node's end when it starts, if asked.
            def kwargs() -> dict[str, float]:
                return {deadline_kw: time.time() + (node_timeout_s or timeout_s) - 1.0} if deadline_kw else {}

            return {nid: (NodeRun(nid, value=fn(*args, **kwargs()), seconds=0.1) if nid in alive
                          else NodeRun(nid, error="node is dead (GCS: gone)", kind=NODE_DEAD))
                    for nid, args in args_by_node.items()}

        monkeypatch.setattr(node_cli, "check_reachable", lambda address: None)
        monkeypatch.setattr(node_cli, "list_nodes", lambda address: nodes)
        monkeypatch.setattr(node_cli, "connect", lambda address: None)
        monkeypatch.setattr(node_cli, "run_on_nodes", local_run)

    return install


def test_help_documents_usage_exit_codes_and_the_seeds_example(capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN --help THEN exit 0 and the interface, trade-off, exit codes and seed example are there
    code, out, _ = run_cli(["--help"], capsys)
    assert code == EXIT_OK
    for text in ("--list", "--node ID_OR_IP", "--timeout", "--json", "--address", "COMMAND",
                 "ray job submit --working-dir .", '"py-spy dump --pid 12345"', "shlex",
                 "torn", "--native", "exit codes:", "7  partial", "4  cluster unreachable"):
        assert text in out, text


@pytest.mark.parametrize(("args", "message"), [
    ([], "exactly one of"),
    (["--list", "hostname"], "exactly one of"),
    (["--dump", "123"], "needs -n NODE"),
    (["-n", "abc", "--dump", "12x"], "invalid pid '12x'"),
    (["-n", "abc", "--dump", "1", "--native", "--nonblocking"], "--nonblocking: not allowed with argument --native"),
    (["--timeout", "0", "hostname"], "--timeout must be positive"),
    (["echo 'oops"], "cannot split"),
])
def test_usage_errors_exit_2_with_a_message(args: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a bad command line WHEN run THEN exit 2 and a one-line message naming the problem
    code, out, err = run_cli(["--address", "127.0.0.1:1", *args], capsys)
    assert code == EXIT_USAGE
    assert message in err and out == ""


def test_unreachable_cluster_exits_4_fast(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN nothing listening WHEN --list THEN exit 4 in well under Ray's 30 s connect wait
    start = time.monotonic()
    code, _, err = run_cli(["--address", "127.0.0.1:1", "--list"], capsys)
    assert code == EXIT_UNREACHABLE
    assert time.monotonic() - start < 5
    assert "cannot reach the Ray GCS at 127.0.0.1:1" in err


def test_no_address_anywhere_is_a_usage_error(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    code, _, err = run_cli(["--list"], capsys)
    assert code == EXIT_USAGE and "RAY_ADDRESS" in err


def test_list_shows_dead_nodes_with_their_reason(recorded_cluster: Callable[[list[NodeInfo]], None],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the recorded table WHEN --list THEN one line per node, head first, the dead one explained
    recorded_cluster(recorded_nodes())
    code, out, _ = run_cli(["--address", "h:1", "--list"], capsys)
    lines = out.splitlines()
    assert code == EXIT_OK
    assert lines[0] == "3 node(s), 2 alive"
    assert lines[1].startswith(HEAD) and "ALIVE head" in lines[1] and "CPU=2" in lines[1]
    dead = next(line for line in lines if line.startswith(DEAD))
    assert "DEAD" in dead and "UNEXPECTED_TERMINATION" in dead


def test_list_json_round_trips(recorded_cluster: Callable[[list[NodeInfo]], None],
                               capsys: pytest.CaptureFixture[str]) -> None:
    recorded_cluster(recorded_nodes())
    code, out, _ = run_cli(["--address", "h:1", "--list", "--json"], capsys)
    doc = json.loads(out)
    assert code == EXIT_OK and doc["schema"] == node_cli.NODES_SCHEMA
    assert [n["node_id"] for n in doc["nodes"]] == [n.node_id for n in recorded_nodes()]


def test_ambiguous_prefix_exits_2_listing_candidates(recorded_cluster: Callable[[list[NodeInfo]], None],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    recorded_cluster(twins())
    code, _, err = run_cli(["--address", "h:1", "-n", "abc", "hostname"], capsys)
    assert code == EXIT_USAGE
    assert "ambiguous" in err and "abc1" in err and "abc2" in err


def test_unknown_node_exits_5(recorded_cluster: Callable[[list[NodeInfo]], None],
                              capsys: pytest.CaptureFixture[str]) -> None:
    recorded_cluster(recorded_nodes())
    code, _, err = run_cli(["--address", "h:1", "-n", "ffff", "hostname"], capsys)
    assert code == EXIT_NOT_FOUND and "no node matches 'ffff'" in err


def test_command_on_all_alive_nodes_prints_each_exit_code(recorded_cluster: Callable[[list[NodeInfo]], None],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN two alive nodes WHEN a command that exits 3 runs on each
    recorded_cluster(recorded_nodes())
    code, out, _ = run_cli(["--address", "h:1", "sh -c 'echo out; echo err >&2; exit 3'"], capsys)
    # THEN exit 0 (every node ran it), and each node's own exit code, stdout and stderr are shown
    assert code == EXIT_OK
    assert out.count(": exit 3 in ") == 2 and out.count("\nout\n") == 2 and out.count("--- stderr ---\nerr") == 2
    assert out.splitlines()[-1].startswith("=== 2 node(s): 2 ran the command (2 with a non-zero exit), 0 failed")


def test_a_dead_node_makes_the_run_partial_exit_7(recorded_cluster: Callable[[list[NodeInfo]], None],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an alive and a dead node chosen explicitly WHEN a command runs, as JSON
    recorded_cluster(recorded_nodes())
    code, out, _ = run_cli(["--address", "h:1", "-n", "40f1", "-n", "b295", "--json", "echo", "hi"], capsys)
    # THEN exit 7; the alive node's result and the dead node's error are both in the document
    doc = json.loads(out)
    assert code == EXIT_PARTIAL and doc["schema"] == node_cli.RUN_SCHEMA
    rows = {r["node_id"]: r for r in doc["nodes"]}
    assert rows[POD]["ok"] and rows[POD]["stdout"] == "hi\n" and rows[POD]["returncode"] == 0
    assert not rows[DEAD]["ok"] and rows[DEAD]["kind"] == NODE_DEAD
    assert doc["summary"] == {"nodes": 2, "ran": 1, "failed": 1, "nonzero_exit": 0}


def test_command_not_found_on_a_node_is_partial(recorded_cluster: Callable[[list[NodeInfo]], None],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    recorded_cluster(recorded_nodes())
    code, out, _ = run_cli(["--address", "h:1", "-n", HEAD, "no-such-program-xyz --flag"], capsys)
    assert code == EXIT_PARTIAL
    assert "FAILED [command-not-found] command not found on this node: 'no-such-program-xyz'" in out


def test_long_output_is_cut_and_says_how_to_get_more(recorded_cluster: Callable[[list[NodeInfo]], None],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    recorded_cluster(recorded_nodes())
    code, out, _ = run_cli(["--address", "h:1", "-n", HEAD, "--max-output", "10", "seq 1 1000"], capsys)
    assert code == EXIT_OK
    assert "\n1\n2\n3\n4\n5\n" in out and "more bytes of stdout cut; raise --max-output" in out


def test_dump_mode_dumps_a_pid_on_the_chosen_node(recorded_cluster: Callable[[list[NodeInfo]], None],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess
    import sys

    # GIVEN a Python process blocked in a known function
    target = subprocess.Popen([sys.executable, "-c",
                               "import threading\ndef parked():\n    threading.Event().wait()\nparked()\n"])
    try:
        time.sleep(0.5)
        recorded_cluster(recorded_nodes())
        # WHEN --dump PID on one node, as JSON
        code, out, _ = run_cli(["--address", "h:1", "-n", HEAD, "--dump", str(target.pid), "--json"], capsys)
    finally:
        target.kill()
        target.wait()
    # THEN exit 0 and its stack, with the frame and line, in the document
    doc = json.loads(out)
    assert code == EXIT_OK and doc["schema"] == node_cli.DUMP_SCHEMA
    procs = doc["nodes"][0]["processes"]
    frames = [(f["function"], f["line"]) for p in procs for t in p["threads"] for f in t["frames"]]
    assert ("parked", 3) in frames
