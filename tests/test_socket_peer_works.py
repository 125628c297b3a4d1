"""A socket read is no hang while a peer of it on the node works, on a real capture
(tests/data/captures/healthy_socket_read_peer_paces_sender, redteam/healthy_allreduce_rank_throttled_download.py,
round 12's false hang): rank 1 reads a throttled HTTP download whose server paces its bytes;
/proc/PID/io counts no socket bytes, so the reader's silence proved nothing."""

from __future__ import annotations

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "healthy_socket_read_peer_paces_sender"


def test_a_socket_reader_whose_peer_paces_its_sends_is_not_called_hung() -> None:
    # GIVEN rank 1 in HTTPResponse.read with two TCP peers on its node (the ShardStore sending
    # 32 KiB per 0.5 s, and rank 0's gloo connection), rank 0 in all_reduce waiting for it
    diag = reanalyse(CAPTURE)
    # THEN not hung: inconclusive, naming the working peer as the likely sender
    assert diag.verdict == "inconclusive", diag.summary
    assert "ShardStore" in diag.summary and "may be sending" in diag.summary, diag.summary
    reader = next(n for n in diag.graph.nodes.values() if n.pattern == "io-wait")
    assert len(reader.peers) == 2, reader.peers
