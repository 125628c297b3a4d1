"""The graph passes' declarations agree with the catalog and with what the passes do.

Each graph pass (and edge handler) declares the patterns whose rule it holds; the root-cause step
declares those a cycle is named by. Every `detect: graph|state` pattern of the catalog has exactly
one declared decider, and on every recorded real capture each such pattern is set only while its
decider runs (GNode attribute writes are watched pass by pass).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from debug_hang.analyse import graph as G
from debug_hang.analyse import rootcause
from debug_hang.analyse.analysis import graph_inputs
from debug_hang.analyse.graph.builder import GraphPass, pass_order
from debug_hang.analyse.graph.model import GNode
from debug_hang.analyse.patterns import catalog
from debug_hang.pipeline import load_capture

pytestmark = pytest.mark.unit
DATA = Path(__file__).resolve().parent / "data"
CAPTURES = sorted(p.parent for p in [*DATA.glob("cases/*/stacks.json"), *DATA.glob("captures/*/stacks.json")]
                  if (p.parent / "snapshot.json").exists())


def _decides(p: GraphPass) -> frozenset[str]:
    """What a pass decides; follow_edges decides what its edge handlers decide."""
    if p.name == "follow_edges":
        return p.decides | frozenset().union(*(h.decides for h in G.HANDLERS.values()))
    return p.decides


def _graph_ids() -> set[str]:
    return {pid for pid, pat in catalog().items() if pat.detect in ("graph", "state")}


def test_every_graph_or_state_pattern_has_exactly_one_decider() -> None:
    deciders: Counter[str] = Counter()
    for p in G.PASSES:
        deciders.update(p.decides)
    for h in {id(h): h for h in G.HANDLERS.values()}.values():  # a handler of several edges counts once
        deciders.update(h.decides)
    deciders.update(rootcause.CYCLE_DECIDES)
    ids = _graph_ids()
    assert not [i for i in ids if deciders[i] == 0], f"no pass decides {sorted(i for i in ids if deciders[i] == 0)}"
    assert not [i for i in ids if deciders[i] > 1], f"decided twice: {sorted(i for i in ids if deciders[i] > 1)}"


def test_declarations_name_only_catalog_patterns() -> None:
    known = set(catalog())
    for p in G.PASSES:
        assert p.decides <= known, f"{p.name} declares {sorted(p.decides - known)}, not in the catalog"
    for h in G.HANDLERS.values():
        assert h.decides <= known, f"{h.run.__name__} declares {sorted(h.decides - known)}"
    carried = rootcause.CYCLE_DECIDES | rootcause.CYCLE_CARRIES | rootcause.END_CARRIES
    assert carried <= known, f"root causes named {sorted(carried - known)}, not in the catalog"


def test_what_a_cycle_or_chain_end_carries_is_decided_somewhere() -> None:
    decided = {i for p in G.PASSES for i in _decides(p)} | {i for i, p in catalog().items() if p.detect == "stack"}
    for pid in rootcause.CYCLE_CARRIES | rootcause.END_CARRIES:
        assert pid in decided, f"{pid} is carried by root causes but nothing decides it"


def test_pass_order_keeps_every_declared_dependency() -> None:
    seen: set[str] = set()
    for p in G.PASSES:
        assert set(p.after) <= seen, f"{p.name} runs before {sorted(set(p.after) - seen)}"
        seen.add(p.name)
    assert seen == set(G.DECLARED)


def test_pass_order_refuses_unknown_and_circular_declarations() -> None:
    def step(b: Any) -> None:
        """A pass that does nothing."""

    a = GraphPass(step, ("b",), frozenset())
    with pytest.raises(ValueError, match="not declared"):
        pass_order({"a": a})
    b = GraphPass(step, ("a",), frozenset())
    with pytest.raises(ValueError, match="wait on each other"):
        pass_order({"a": a, "b": b})


@pytest.mark.parametrize("case", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_pattern_is_set_only_by_its_declared_decider(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cap = load_capture(case)
    b = G.Builder.start(graph_inputs(cap.job, cap.snapshot, cap.collection))
    ids = _graph_ids()
    running: list[GraphPass] = []
    wrong: list[str] = []
    plain = object.__setattr__

    def watch(node: GNode, name: str, value: object) -> None:
        if name == "pattern" and value in ids and value not in _decides(running[-1]):
            wrong.append(f"{running[-1].name} set {value} on {node.key}")
        plain(node, name, value)

    monkeypatch.setattr(GNode, "__setattr__", watch)
    for p in G.PASSES:
        running.append(p)
        p.run(b)
    monkeypatch.undo()
    assert not wrong, wrong
    for cause in rootcause.root_causes(b.g):
        if cause.cycle:
            assert cause.pattern in rootcause.CYCLE_DECIDES | rootcause.CYCLE_CARRIES, cause.pattern
        else:
            assert cause.pattern in {cause.culprits[0].pattern, "unknown"} | rootcause.END_CARRIES, cause.pattern
