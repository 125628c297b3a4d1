"""Peers that wait on each other outside Ray calls (issue #25, red-team round 5): ranks each in a
blocking send (or recv) to the other, a rank in a torch.distributed store wait for a key nobody
will set, both ends of a TCP connection reading. On real captures recorded live
(tests/data/captures/README.md), each with the variants where the answer must change.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from debug_hang.analyse.patterns import match_thread
from debug_hang.model import Frame, Thread
from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
HEAD_TO_HEAD = CAPTURES / "p2p_sends_head_to_head"
PARITY = CAPTURES / "p2p_parity_exchange_healthy"
GLOO_BENCH = CAPTURES / "gloo_allreduce_bench_healthy"
STORE = CAPTURES / "store_wait_key_never_set"
STORE_BUSY_WRITER = CAPTURES / "store_wait_busy_writer_healthy"
SOCKETS = CAPTURES / "socket_reads_both_ends"
HTTP_SELFCALL = CAPTURES / "http_reader_of_selfcall_gateway"

Edit = Callable[[dict[str, Any]], None]


def variant(tmp_path: Path, case: Path, edit: Edit) -> Path:
    """A copy of a capture with its stacks.json edited (`edit(doc)`), the live diagnosis dropped."""
    out = tmp_path / case.name
    shutil.copytree(case, out)
    (out / "diagnosis.json").unlink(missing_ok=True)
    doc = json.loads((out / "stacks.json").read_text())
    edit(doc)
    (out / "stacks.json").write_text(json.dumps(doc))
    return out


def frames_of(doc: dict[str, Any], pid: int) -> list[list[dict[str, Any]]]:
    """The main thread's frames of every sample of one process."""
    return [t["frames"] for p in doc["processes"] if p["pid"] == pid for t in p["threads"]
            if t.get("name") == "MainThread"]


def pids_of(case: Path, cls: str) -> list[int]:
    doc = json.loads((case / "stacks.json").read_text())
    return sorted({int(p["pid"]) for p in doc["processes"] if p.get("actor_class") == cls})


def nodes_of(diag: Any, cls: str) -> list[Any]:
    return [n for n in diag.graph.nodes.values() if n.class_name == cls and n.kind != "process"]


# ---------------------------------------------------------------- point-to-point ops


def test_two_ranks_each_in_a_blocking_send_to_the_other_are_a_deadlock() -> None:
    # GIVEN two gloo ranks both in `dist.send(act, dst=self.peer)` (64 MB), each before its recv
    diag = reanalyse(HEAD_TO_HEAD)
    # THEN one cause: a loop of the two ranks, both named, with the exchange order as the fix
    [cause] = diag.causes
    assert diag.verdict == "hang" and cause.pattern == "p2p-order-deadlock" and cause.cycle
    assert sorted(c.pid for c in cause.culprits) == pids_of(HEAD_TO_HEAD, "Stage")
    edges = [e for e in diag.graph.edges if e.why == "p2p-order-deadlock"]
    assert len(edges) == 2 and all("is in send to it, not in the matching recv" in e.evidence for e in edges)


def test_a_send_whose_peer_is_in_the_matching_recv_is_no_wait_on_each_other(tmp_path: Path) -> None:
    # GIVEN the head-to-head capture with one rank's op turned into the matching `recv(src=peer)`
    stage = pids_of(HEAD_TO_HEAD, "Stage")[1]

    def to_recv(doc: dict[str, Any]) -> None:
        for frames in frames_of(doc, stage):
            frames[0]["function"] = "recv"
            for f in frames:
                if f.get("code") and "dist.send" in f["code"]:
                    f["code"] = "dist.recv(buf, src=self.peer)"

    diag = reanalyse(variant(tmp_path, HEAD_TO_HEAD, to_recv))
    # THEN it is a transfer in progress: no loop, no hang, and the evidence says so
    assert diag.verdict != "hang" and not any(c.pattern == "p2p-order-deadlock" for c in diag.causes)
    assert not [e for e in diag.graph.edges if e.why in ("collective-wait", "p2p-order-deadlock")]
    assert all(any("a transfer in progress" in t for t in n.evidence) for n in nodes_of(diag, "Stage"))


def test_two_ranks_each_in_recv_from_the_other_are_a_deadlock_too(tmp_path: Path) -> None:
    # GIVEN the capture with both ranks in `recv` instead (each receives first)
    def both_recv(doc: dict[str, Any]) -> None:
        for pid in pids_of(HEAD_TO_HEAD, "Stage"):
            for frames in frames_of(doc, pid):
                frames[0]["function"] = "recv"

    diag = reanalyse(variant(tmp_path, HEAD_TO_HEAD, both_recv))
    [cause] = diag.causes
    assert diag.verdict == "hang" and cause.pattern == "p2p-order-deadlock" and len(cause.culprits) == 2


def test_a_group_bigger_than_the_two_ranks_seen_is_not_read_as_head_to_head(tmp_path: Path) -> None:
    # GIVEN the capture whose ranks say their WORLD_SIZE is 3 (a member not among the job's processes)
    def world_of_three(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            if info.get("pid") in pids_of(HEAD_TO_HEAD, "Stage"):
                info.setdefault("env", {})["WORLD_SIZE"] = "3"

    diag = reanalyse(variant(tmp_path, HEAD_TO_HEAD, world_of_three))
    # THEN the peer of each send is not known: no loop of the two is claimed
    assert not any(c.pattern == "p2p-order-deadlock" for c in diag.causes)


def test_the_peer_a_send_names_in_its_locals_decides(tmp_path: Path) -> None:
    # GIVEN the capture with --locals-like arguments: both sends name the same destination rank 1
    # (impossible for two ranks: one of them would send to itself, so a third member is the peer)
    def same_dst(doc: dict[str, Any]) -> None:
        for pid in pids_of(HEAD_TO_HEAD, "Stage"):
            for frames in frames_of(doc, pid):
                frames[0]["locals"] = {"dst": "1", "tag": "0"}

    diag = reanalyse(variant(tmp_path, HEAD_TO_HEAD, same_dst))
    assert not any(c.pattern == "p2p-order-deadlock" for c in diag.causes)


def test_ranks_exchanging_in_parity_order_are_not_hung() -> None:
    # GIVEN the fixed exchange (even ranks send first, odd ranks receive first), 64 MB each way
    diag = reanalyse(PARITY)
    # THEN every sample's send meets the peer's matching recv: progressing, never a loop
    assert diag.verdict == "no-hang" and not diag.causes
    assert not [e for e in diag.graph.edges if e.why in ("collective-wait", "p2p-order-deadlock")]


def test_healthy_all_reduces_stay_not_hung() -> None:
    # GIVEN two gloo ranks all-reducing 64 MB back to back (redteam gloo_allreduce_bench)
    diag = reanalyse(GLOO_BENCH)
    assert diag.verdict == "no-hang" and not diag.causes


# ---------------------------------------------------------------- store waits


def test_a_rank_waiting_in_a_store_for_a_key_its_writer_spelled_otherwise_is_the_culprit() -> None:
    # GIVEN rank 1 in `self.store.wait([f"ckpt/{epoch + 1}"])`, rank 0 (which set `ckpt/{epoch}`) in barrier
    diag = reanalyse(STORE)
    [cause] = diag.causes
    waiter = next(n for n in nodes_of(diag, "Rank") if n.pattern == "store-key-never-set")
    barrier = next(n for n in nodes_of(diag, "Rank") if n is not waiter)
    # THEN the store wait is the culprit, the rank in barrier its victim (no rank skipped a collective)
    assert diag.verdict == "hang" and cause.pattern == "store-key-never-set"
    assert [c.key for c in cause.culprits] == [waiter.key] and barrier.key in cause.victims
    assert not any(n.pattern == "collective-skipped" for n in diag.graph.nodes.values())
    # AND the key mismatch the source shows is named
    text = " ".join(waiter.evidence)
    assert '`f"ckpt/{epoch + 1}"`' in text and re.search(r'`f"ckpt/\{epoch\}"` \(line \d+\): a different key', text), text


def test_a_store_wait_whose_writer_is_not_waiting_on_it_is_no_finding(tmp_path: Path) -> None:
    # GIVEN the store capture with the writer's barrier frames removed: it sits in its own job line
    # (a computation), not in a collective waiting on the waiter
    doc = json.loads((STORE / "stacks.json").read_text())
    writer = next(p["pid"] for p in doc["processes"] for t in p["threads"]
                  if t.get("name") == "MainThread" and t["frames"] and t["frames"][0]["function"] == "barrier")

    def writer_works(doc: dict[str, Any]) -> None:
        for p in doc["processes"]:
            if p["pid"] != writer:
                continue
            for t in p["threads"]:
                if t.get("name") == "MainThread":
                    t["frames"] = [f for f in t["frames"] if "torch/distributed" not in f["file"]]
                    t["frames"][0]["code"] = "path = self.save_checkpoint(epoch)"

    diag = reanalyse(variant(tmp_path, STORE, writer_works))
    # THEN the writer could still set the key: the waiter waits on it, and nothing is a store-key culprit
    assert not any(c.pattern == "store-key-never-set" for c in diag.causes)
    waiter = next(n for n in nodes_of(diag, "Rank") if n.pattern == "store-wait")
    assert [diag.graph.nodes[e.dst].pid for e in diag.graph.out(waiter.key) if e.why == "store-wait"] == [writer]


def test_a_store_wait_on_a_busy_writer_is_not_hung() -> None:
    # GIVEN rank 1 in store.wait for `ckpt/0` while rank 0 computes for minutes before setting it
    diag = reanalyse(STORE_BUSY_WRITER)
    assert diag.verdict == "no-hang" and not diag.causes
    waiter = next(n for n in nodes_of(diag, "Rank") if n.pattern == "store-wait")
    assert [e.why for e in diag.graph.out(waiter.key)] == ["store-wait"]


@pytest.mark.parametrize(("code", "store"), [
    ('self.store.wait([f"ckpt/{epoch + 1}"])', True),
    ("value = store.get(key)", True),
    ('tcp.wait(["ready"])', True),
    ("self.ready.wait(5)", False),
    ('row = cfg.get("name")', False),
    ("results = ray.get(refs)", False),
])
def test_a_store_wait_is_read_from_the_innermost_job_line(code: str, store: bool) -> None:
    # GIVEN an idle thread whose innermost frame is a job line calling C code (no Python frame below)
    thread = Thread(thread_id="1", name="MainThread", active=False,
                    frames=[Frame("Rank.run_epoch", "/job/train.py", 45, code=code),
                            Frame("actor_method_executor", "ray/_private/function_manager.py", 740)])
    assert (match_thread(thread).pattern == "store-wait") is store


# ---------------------------------------------------------------- sockets


def test_both_ends_of_one_connection_reading_are_a_framing_deadlock() -> None:
    # GIVEN BlobSink reading to EOF and `upload` awaiting the reply, on one loopback connection
    diag = reanalyse(SOCKETS)
    [cause] = diag.causes
    # THEN a socket-read loop, both ends named, not an actor-call cycle
    assert diag.verdict == "hang" and cause.pattern == "socket-read-deadlock" and cause.cycle
    assert sorted(c.label().split(" (")[0] for c in cause.culprits) == ["BlobSink", "upload"]
    inside = [e for e in diag.graph.edges if e.src in cause.cycle and e.dst in cause.cycle]
    assert inside and all(e.why == "io-wait" for e in inside)


def test_a_socket_read_on_a_process_waiting_on_a_ray_call_is_no_framing_deadlock() -> None:
    # GIVEN an HTTP read on a gateway actor whose handler calls its own actor (a Ray call in the loop)
    diag = reanalyse(HTTP_SELFCALL)
    assert diag.verdict == "hang" and all(c.pattern != "socket-read-deadlock" for c in diag.causes)


def test_two_sends_with_a_third_member_connected_to_both_are_not_read_as_head_to_head(tmp_path: Path) -> None:
    # GIVEN the head-to-head capture where both ranks also hold a TCP connection to a process outside
    # the job (a third member of their group, as gloo connects every two members)
    def third_member(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            if info.get("pid") in pids_of(HEAD_TO_HEAD, "Stage"):
                info["socket_peers"].append({"pid": 999999, "title": "python param_server.py", "connections": 1})

    diag = reanalyse(variant(tmp_path, HEAD_TO_HEAD, third_member))
    # THEN the peer of each send is not known: no loop of the two is claimed, the outsider is named
    assert diag.verdict != "hang" or all(c.pattern != "p2p-order-deadlock" for c in diag.causes)
    assert not any(c.pattern == "p2p-order-deadlock" for c in diag.causes)


def test_a_store_wait_connected_to_a_process_outside_the_job_is_no_finding(tmp_path: Path) -> None:
    # GIVEN the store capture where the waiter also holds a TCP connection to a process outside the
    # job (a TCPStore's server, another client: it could set the key)
    waiter = next(n.pid for n in nodes_of(reanalyse(STORE), "Rank") if n.pattern == "store-key-never-set")

    def outsider(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            if info.get("pid") == waiter:
                info["socket_peers"].append({"pid": 999999, "title": "python launcher.py", "connections": 1})

    diag = reanalyse(variant(tmp_path, STORE, outsider))
    # THEN nothing is said to never set the key, and the outside process is named
    assert not any(c.pattern == "store-key-never-set" for c in diag.causes)
    node = next(n for n in nodes_of(diag, "Rank") if n.pid == waiter)
    assert any("pid 999999 `python launcher.py`" in t for t in node.evidence), node.evidence


def test_ranks_and_the_peers_their_sends_name_decide_when_both_are_known(tmp_path: Path) -> None:
    # GIVEN the capture with each Stage's rank (as a RANK-started process shows it) and the `dst`
    # argument --locals would show: rank 0 sends to 1, rank 1 to 0
    first, second = pids_of(HEAD_TO_HEAD, "Stage")

    def ranked(dst_of_first: str) -> Edit:
        def edit(doc: dict[str, Any]) -> None:
            for p in doc["processes"]:
                if p["pid"] in (first, second):
                    p["rank"] = 0 if p["pid"] == first else 1
            for pid, dst in ((first, dst_of_first), (second, "0")):
                for frames in frames_of(doc, pid):
                    frames[0]["locals"] = {"dst": dst}
        return edit

    diag = reanalyse(variant(tmp_path / "a", HEAD_TO_HEAD, ranked("1")))
    assert [c.pattern for c in diag.causes] == ["p2p-order-deadlock"]
    # AND a send rank 0 would make to itself reads as no known peer: nothing is claimed
    diag = reanalyse(variant(tmp_path / "b", HEAD_TO_HEAD, ranked("0")))
    assert not any(c.pattern == "p2p-order-deadlock" for c in diag.causes)
