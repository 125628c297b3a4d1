"""Which Ray and Python the cluster runs, and which this side runs.

A node helper is a function shipped by value (cloudpickle) into a Ray task: it needs a driver
connected from here, which Ray refuses when this side's Ray or Python version differs from the
cluster's, and code pickled by one Python and Ray is rebuilt by the node's. So a diagnosis run
with another Ray than the cluster's can fail in ways that say nothing about the job; knowing both
versions lets the report say so, with the fix.

The cluster's versions are the ones Ray's own `ray.init` check compares: the `CLUSTER_METADATA`
key the head writes into the GCS key-value store at start (`usage_lib.put_cluster_metadata`),
read by one raw gRPC call. This side's are read from the installed distribution, without
importing Ray (~250 ms): from the files of the installed package.
"""

from __future__ import annotations

import json
import platform
import re
from importlib import util
from pathlib import Path
from typing import Any

from debug_hang.collect.address import ClusterAddress, kv_get
from debug_hang.timeouts import call_with_timeout

# ray._private.usage.usage_constants.CLUSTER_METADATA_KEY, ray_constants.KV_NAMESPACE_CLUSTER
METADATA_KEY = b"CLUSTER_METADATA"
METADATA_NAMESPACE = b"cluster"
# One key-value read; a loaded head answers in well under a second.
READ_TIMEOUT_S = 3.0


_ASSIGNED = r"^{name} = ['\"]([^'\"]{{1,40}})['\"]"


def tool_versions() -> dict[str, str]:
    """Ray, Python and the cloudpickle bundled with Ray (`ray.cloudpickle`) of this side."""
    out = {"python": platform.python_version(), "ray": _ray_file_value("_version.py", "version") or "not installed"}
    pickler = _ray_file_value("cloudpickle/__init__.py", "__version__")
    if pickler:
        # Ray does not always update that string when it updates its copy (2.10 and 2.31 say 2.0.0).
        out["cloudpickle"] = pickler
    return out


def _ray_file_value(relative: str, name: str) -> str | None:
    """A string assigned at the top level of one of the installed Ray package's files (without
    importing Ray): `version` in ray/_version.py, `__version__` in ray/cloudpickle/__init__.py."""
    try:
        spec = util.find_spec("ray")
        roots = list(spec.submodule_search_locations or []) if spec else []
        text = (Path(roots[0]) / relative).read_text(encoding="utf-8") if roots else ""
    except (ImportError, OSError, ValueError):
        return None
    found = re.search(_ASSIGNED.format(name=re.escape(name)), text, re.MULTILINE)
    return found.group(1) if found else None


def cluster_versions(address: ClusterAddress, timeout_s: float = READ_TIMEOUT_S) -> dict[str, str]:
    """{"ray", "python"} the cluster was started with, or {"error": why} (never raises)."""
    try:
        raw = call_with_timeout(lambda: kv_get(address.gcs, METADATA_KEY, METADATA_NAMESPACE, timeout_s),
                                timeout_s + 1.0, what=f"reading the cluster's versions from {address.gcs}")
        found = json.loads(raw) if raw else {}
    except Exception as exc:  # noqa: BLE001 - the versions only explain other failures: report and go on
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    if not isinstance(found, dict) or not found.get("ray_version"):
        return {"error": "the GCS holds no cluster metadata (a head started by another tool?)"}
    return {"ray": str(found["ray_version"])[:40], "python": str(found.get("python_version") or "?")[:40]}


def read_versions(address: ClusterAddress, timeout_s: float = READ_TIMEOUT_S) -> dict[str, Any]:
    """Both sides' versions, as the snapshot records them: {"cluster": {...}, "tool": {...}}."""
    return {"cluster": cluster_versions(address, timeout_s), "tool": tool_versions()}
