"""Write a collection folder like diagnose's: `stacks.json` (debug-hang/stacks/v1) made by the
project's own collector module (`debug_hang.pyspy.dump_pids`, py-spy --json) plus the same
processes as raw py-spy text under `raw/`, so a reader can check that the folder's stacks.json wins.

Usage (repo root, venv active): python tests/data/formats/targets/capture_collect_dir.py PID...
"""

from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))

from debug_hang.model import stacks_to_dict  # noqa: E402
from debug_hang.probe.pyspy import DumpOptions, dump_pids  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "collect-dir")


def main() -> None:
    import json

    pids = [int(p) for p in sys.argv[1:]]
    results = dump_pids(pids, DumpOptions())
    processes = [p for r in results for p in r.processes]
    os.makedirs(os.path.join(OUT, "raw"), exist_ok=True)
    doc = stacks_to_dict(processes, meta={"collector": "debug_hang.pyspy.dump_pids",
                                          "errors": {str(r.pid): r.error for r in results if r.error}})
    with open(os.path.join(OUT, "stacks.json"), "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    for pid in pids:
        res = subprocess.run(["py-spy", "dump", "--pid", str(pid)], capture_output=True,
                             timeout=30, check=False)
        with open(os.path.join(OUT, "raw", f"{pid}.txt"), "wb") as fh:
            fh.write(res.stdout)


if __name__ == "__main__":
    main()
