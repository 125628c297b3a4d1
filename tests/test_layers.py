"""The package's layers point one way: commands → pipeline → collect/report → analyse → model.

Checked on the import statements of the source (no import machinery needed): the analysis never
imports the collection or the node side, the node side imports only the shared model, and the
shared modules import nothing of the pipeline.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parent.parent / "debug_hang"
SHARED = {"model", "facts", "errors", "timeouts", "paths", "perf", "snapshot", "rows", "libraries", "redact", "untrusted",
          "printer", "flightrec"}

# layer -> the layers it may import (besides itself and the shared modules)
ALLOWED: dict[str, set[str]] = {
    "shared": set(),
    "probe": set(),
    "parse": {"probe"},
    "analyse": set(),
    "report": {"analyse"},
    "collect": {"probe", "analyse", "parse"},
    "pipeline": {"collect", "probe", "analyse", "report", "parse"},
    "localcluster": {"collect"},
    "watch": {"collect", "pipeline"},
    "commands": {"collect", "probe", "analyse", "report", "parse", "pipeline", "localcluster", "watch"},
}


def layer_of(module: str) -> str:
    """`debug_hang.analyse.graph` → `analyse`; shared modules → `shared`."""
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else ""
    if head == "__main__":
        return "commands"
    if head in SHARED or head in ("", "__init__"):
        return "shared"
    return head


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("debug_hang"):
            found.add(node.module if node.module != "debug_hang" else "debug_hang." + node.names[0].name)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("debug_hang")}
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "_bundle" not in p.parts)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_one_way(path: Path) -> None:
    module = "debug_hang." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    own = layer_of(module)
    allowed = ALLOWED[own] | {own, "shared"}
    bad = sorted(m for m in imports_of(path) if layer_of(m) not in allowed)
    assert not bad, f"{module} ({own}) imports {bad}: {own} may import only {sorted(allowed)}"


def test_every_module_has_a_known_layer() -> None:
    for path in MODULES:
        module = "debug_hang." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        assert layer_of(module) in ALLOWED, module


def test_a_wrong_way_import_is_caught(tmp_path: Path) -> None:
    """The check reads real import statements: an analysis module importing the collection fails it."""
    bad = tmp_path / "graph.py"
    bad.write_text("from debug_hang.collect.state import DashboardClient\nimport debug_hang.probe.pyspy\n")
    found = imports_of(bad)
    assert found == {"debug_hang.collect.state", "debug_hang.probe.pyspy"}
    assert {layer_of(m) for m in found} - (ALLOWED["analyse"] | {"analyse", "shared"}) == {"collect", "probe"}


def test_ray_state_names_are_ray_own() -> None:
    """The Literal state names in snapshot.py are exactly the installed Ray's protobuf enums."""
    from typing import get_args

    gcs_pb2 = pytest.importorskip("ray.core.generated.gcs_pb2")
    common_pb2 = pytest.importorskip("ray.core.generated.common_pb2")
    from debug_hang.snapshot import ActorState, PlacementGroupState, TaskState

    assert set(get_args(TaskState)) == set(common_pb2.TaskStatus.keys())
    assert set(get_args(ActorState)) == set(gcs_pb2.ActorTableData.ActorState.keys())
    assert set(get_args(PlacementGroupState)) == set(gcs_pb2.PlacementGroupTableData.PlacementGroupState.keys())
