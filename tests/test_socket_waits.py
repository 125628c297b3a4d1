"""A socket read waits for the process at the other end of its connection, when the probe's TCP
peers (read on the node) show exactly one that no Ray call explains. On the real red-team capture
http_reader_of_selfcall_gateway (tests/data/captures/README.md), with one fact taken away."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

GATEWAY = ROOT / "tests" / "data" / "captures" / "http_reader_of_selfcall_gateway"


def _by_class(diag: Diagnosis, name: str) -> str:
    (key,) = [k for k, n in diag.graph.nodes.items() if n.class_name == name]
    return key


def test_an_http_read_leads_to_the_server_at_the_other_end() -> None:
    # GIVEN the LoadTester in an HTTP read, connected by TCP to the gateway and (Ray's gRPC) the driver
    diag = reanalyse(GATEWAY)
    tester, gateway = _by_class(diag, "LoadTester"), _by_class(diag, "ModelGateway")
    # THEN its wait leads to the gateway (the driver's connection is Ray's: it created and called it)
    assert [(e.dst, e.why) for e in diag.graph.out(tester)] == [(gateway, "io-wait")]
    # AND the only root cause is the gateway's self-call; the reader is its victim, not a second cause
    assert diag.verdict == "hang"
    assert [(c.pattern, [n.class_name for n in c.culprits]) for c in diag.causes] == [
        ("actor-call-cycle", ["ModelGateway"])]


def test_without_the_peers_the_read_ends_the_chain(tmp_path: Path) -> None:
    # GIVEN the same capture without the probe's TCP peers (an older probe, /proc unreadable)
    out = tmp_path / GATEWAY.name
    shutil.copytree(GATEWAY, out)
    doc = json.loads((out / "stacks.json").read_text())
    for info in doc["meta"]["info"]:
        info.pop("socket_peers", None)
    (out / "stacks.json").write_text(json.dumps(doc))
    diag = reanalyse(out)
    # THEN the read leads nowhere: the LoadTester is an io-wait of its own, as the live run said
    assert not diag.graph.out(_by_class(diag, "LoadTester"))
    assert any(c.pattern == "io-wait" and [n.class_name for n in c.culprits] == ["LoadTester"] for c in diag.causes)
