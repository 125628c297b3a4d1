"""What is shipped to the nodes survives this Ray's cloudpickle, without a cluster.

Each helper of `node_probe.SHIPPED` is pickled by value exactly as `collect.nodes.run_on_nodes`
ships it, then rebuilt in a fresh interpreter in which `debug_hang` cannot be imported (a node has
only Ray and py-spy), and run there for real: `probe_node` on a live Python process, `run_command`
on a real command. CI runs this file with every Ray of its matrix (`.ci/run`): Ray 2.9's bundled
cloudpickle, for one, could not rebuild a `typing.NamedTuple` class.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from debug_hang.collect.nodes import ship_by_value
from debug_hang.probe.commands import run_command
from debug_hang.probe.node_probe import SHIPPED, probe_node

pytestmark = pytest.mark.unit
ray_cloudpickle = pytest.importorskip("ray.cloudpickle")

# Runs in the fresh interpreter: refuses every import of debug_hang, rebuilds the pickled helper
# read from stdin, calls it with the JSON arguments given and prints its JSON result.
NODE_SIDE = textwrap.dedent('''
    import importlib.abc, json, sys

    class NoDebugHang(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "debug_hang" or name.startswith("debug_hang."):
                raise ImportError(f"{name} is not installed on this node")
            return None

    sys.meta_path.insert(0, NoDebugHang())
    import ray.cloudpickle
    helper = ray.cloudpickle.loads(sys.stdin.buffer.read())
    args = json.loads(sys.argv[1])
    print(json.dumps(helper(*args)))
''')


def run_on_a_bare_node(fn: object, args: list[object], tmp_path: Path) -> dict[str, object]:
    ship_by_value(fn)  # type: ignore[arg-type]
    data = ray_cloudpickle.dumps(fn)
    # cwd and sys.path away from the checkout: only the pickle carries debug_hang's code.
    done = subprocess.run([sys.executable, "-I", "-c", NODE_SIDE, json.dumps(args)], input=data, cwd=tmp_path,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_every_shipped_helper_is_covered_here() -> None:
    assert set(SHIPPED) == {probe_node, run_command}


def test_only_the_declared_helpers_may_be_shipped() -> None:
    with pytest.raises(ValueError, match="not one of the helpers shipped"):
        ship_by_value(print)


def test_the_node_probe_is_rebuilt_and_dumps_a_live_process_where_debug_hang_is_not_installed(tmp_path: Path) -> None:
    # GIVEN a live Python process blocked in a known function
    target = subprocess.Popen([sys.executable, "-c", "import time\ndef parked_here():\n    time.sleep(120)\nparked_here()\n"])
    try:
        # WHEN the probe is shipped as run_on_nodes ships it and runs on a node without debug_hang
        value = run_on_a_bare_node(probe_node, ["node-x", [target.pid], {}, 2, 0.2, True, 20.0], tmp_path)
    finally:
        target.kill()
        target.wait()
    # THEN it answers as on a real node: both samples of the process, its frames, no error
    assert value["errors"] == [], value["errors"]
    assert value["samples_taken"] == 2
    processes = value["processes"]
    assert isinstance(processes, list) and len(processes) == 2
    functions = {f["function"].rsplit(".", 1)[-1] for p in processes for t in p["threads"] for f in t["frames"]}
    assert "parked_here" in functions, functions
    assert str(target.pid) in value["info"]  # type: ignore[operator]


def test_the_command_runner_is_rebuilt_and_runs_where_debug_hang_is_not_installed(tmp_path: Path) -> None:
    value = run_on_a_bare_node(run_command, [[sys.executable, "-c", "print('from the node')"], 30.0], tmp_path)
    assert value["error"] is None and value["returncode"] == 0
    assert value["stdout"] == "from the node\n"


FACTS_TARGET = '''
import threading, time
class Holder:
    def __init__(self):
        self.lock = threading.Lock()
        self.items = [1, 2, 3]
    def parked_in_with(self, rounds):
        with self.lock:
            time.sleep(120)
Holder().parked_in_with(7)
'''


def test_the_node_probe_reads_frame_facts_where_debug_hang_is_not_installed(tmp_path: Path) -> None:
    # GIVEN a live Python process asleep inside `with self.lock:` in a method of its own
    (tmp_path / "holder.py").write_text(FACTS_TARGET)  # a file: the `with` blocks are read from the source
    target = subprocess.Popen([sys.executable, str(tmp_path / "holder.py")], cwd=tmp_path)
    try:
        time.sleep(0.5)
        # WHEN the shipped probe reads the frames' facts there (locals reduced on the node: the
        # memory reader for lengths, the `with` blocks from the source)
        value = run_on_a_bare_node(probe_node, ["node-x", [target.pid], {"facts": True}, 2, 0.2, True, 20.0], tmp_path)
    finally:
        target.kill()
        target.wait()
    # THEN the frame has them: the object it works on, a number, and the with block it is inside
    assert value["errors"] == [], value["errors"]
    processes = value["processes"]
    assert isinstance(processes, list)
    frames = [f for p in processes for t in p["threads"] for f in t["frames"] if f["function"].endswith("parked_in_with")]
    facts = [f["facts"] for f in frames if f.get("facts")]
    assert facts, frames
    assert str(facts[-1]["self"]).startswith("Holder@0x") and facts[-1]["rounds"] == 7
    assert facts[-1]["with"] == "self.lock"
