#!/usr/bin/env python3
"""Benchmark: what reading frame locals (py-spy dump --locals) costs per dump, and per probe.

The facts the wait-for graph decides with (debug_hang/facts.py: identities, numbers, lengths,
ObjectRef ids) come from `py-spy dump --locals` plus a few reads of the target's memory. This
measures, on local target processes of three shapes (started here, plain Python, killed at the
end), one dump each way:

  plain    py-spy dump --json
  locals   py-spy dump --json --locals (py-spy's own cost)
  facts    debug_hang.probe.pyspy.dump_pid with facts=True (py-spy --locals, reduced to facts,
           memory reads for lengths and ObjectRef ids; what a diagnosis runs)

and the node probe (probe_node: every target, 2 samples, 0.2 s apart) without facts and with
facts on every sample. Shapes: `idle` (an actor-like process: 3 threads parked), `deep` (16
threads, 30 frames each, 10 locals per frame), `big` (4 threads holding large containers and
strings). It prints a table (--json: the figures) with the load average before and after: the
numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from debug_hang.probe.node_probe import probe_node  # noqa: E402
from debug_hang.probe.pyspy import DumpOptions, dump_pid, find_pyspy  # noqa: E402

SHAPES = {
    "idle": '''
import threading, time
ev = threading.Event()
for i in range(2):
    threading.Thread(target=ev.wait, daemon=True).start()
print("READY", flush=True)
time.sleep(10**6)
''',
    "deep": '''
import threading, time
ev = threading.Event()
def level(n, a=1, b=2.5, c="text", d=None, e=(1, 2), f=[1, 2, 3], g={"k": 1}, h=True, i=object()):
    if n == 0:
        ev.wait()
    return level(n - 1)
for i in range(15):
    threading.Thread(target=level, args=(30,), daemon=True).start()
print("READY", flush=True)
level(30)
''',
    "big": '''
import threading, time
ev = threading.Event()
def hold(k):
    items = [object() for _ in range(100000)]
    table = {i: str(i) * 10 for i in range(50000)}
    text = "x" * 1000000
    ev.wait()
for k in range(3):
    threading.Thread(target=hold, args=(k,), daemon=True).start()
print("READY", flush=True)
hold(3)
''',
}


def start_targets(folder: Path) -> dict[str, subprocess.Popen[str]]:
    procs = {}
    for name, code in SHAPES.items():
        script = folder / f"{name}.py"
        script.write_text(code)
        procs[name] = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    for proc in procs.values():
        assert proc.stdout is not None
        proc.stdout.readline()
    time.sleep(1.0)
    return procs


def timed(fn: Any, repeat: int) -> dict[str, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(1000.0 * (time.perf_counter() - start))
    times.sort()
    return {"median_ms": round(statistics.median(times), 1), "p90_ms": round(times[int(0.9 * (len(times) - 1))], 1)}


def bench_dumps(pid: int, repeat: int) -> dict[str, Any]:
    pyspy = find_pyspy()
    assert pyspy
    out: dict[str, Any] = {}
    for label, extra in (("plain", []), ("locals", ["--locals"])):
        argv = [pyspy, "dump", "--json", "--pid", str(pid), *extra]
        out[label] = timed(lambda a=argv: subprocess.run(a, capture_output=True, check=True), repeat)
        out[label]["bytes"] = len(subprocess.run(argv, capture_output=True, check=True).stdout)
    out["facts"] = timed(lambda: dump_pid(pid, DumpOptions(facts=True)), repeat)
    result = dump_pid(pid, DumpOptions(facts=True))
    out["facts"]["facts"] = sum(len(f.facts or {}) for p in result.processes for t in p.threads for f in t.frames)
    out["facts"]["bytes"] = len(json.dumps([[f.facts for f in t.frames] for p in result.processes for t in p.threads]))
    return out


def bench_probe(pids: list[int], repeat: int) -> dict[str, Any]:
    out = {}
    for label, facts in (("probe_plain", False), ("probe_facts", True)):
        opts = DumpOptions(facts=facts).to_dict()
        out[label] = timed(lambda o=opts: probe_node("bench", pids, o, samples=2, interval_s=0.2, children=False), repeat)
    return out


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="dumps per measurement (default 15)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    before = load()
    with tempfile.TemporaryDirectory(prefix="bench_locals_") as tmp:
        procs = start_targets(Path(tmp))
        try:
            figures: dict[str, Any] = {name: bench_dumps(p.pid, args.repeat) for name, p in procs.items()}
            figures["probe (3 targets, 2 samples)"] = bench_probe([p.pid for p in procs.values()], max(3, args.repeat // 3))
        finally:
            for proc in procs.values():
                proc.kill()
                proc.wait()
    figures["load_before"], figures["load_after"] = before, load()
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"load average before: {figures['load_before']}; after: {figures['load_after']}")
    print("| target | plain ms (p90) | --locals ms (p90) | facts ms (p90) | json bytes plain / locals | facts kept (bytes) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in SHAPES:
        f = figures[name]
        print(f"| {name} | {f['plain']['median_ms']} ({f['plain']['p90_ms']}) | {f['locals']['median_ms']} "
              f"({f['locals']['p90_ms']}) | {f['facts']['median_ms']} ({f['facts']['p90_ms']}) | "
              f"{f['plain']['bytes']} / {f['locals']['bytes']} | {f['facts']['facts']} ({f['facts']['bytes']}) |")
    probe = figures["probe (3 targets, 2 samples)"]
    print(f"probe_node, 3 targets, 2 samples 0.2 s apart: without facts {probe['probe_plain']['median_ms']} ms "
          f"(p90 {probe['probe_plain']['p90_ms']}), with facts on every sample {probe['probe_facts']['median_ms']} ms "
          f"(p90 {probe['probe_facts']['p90_ms']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
