"""Record the dumps under tests/data/library/ from the reproductions in this folder.

Usage: python record.py [NAME ...]   (default: all). Each target is started; its marker line
(READY / RANK / WORKERS) gives the pids to dump; each is dumped twice, the way a user and the
tool see it: `py-spy dump --json --pid P` as is (../NAME/<role>.pyspy.json) and debug-hang's node
probe (`probe_node`: py-spy plus the source line of each frame, read on this machine) as
debug-hang/stacks/v1 (../NAME/<role>.json). Then the target's process group is killed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent

# name -> (argv after the interpreter, marker, number of marker lines, seconds to wait after the marker)
TARGETS: dict[str, tuple[list[str], str, int, float]] = {
    "logging_dictconfig_handler": (["logging_dictconfig_handler.py"], "READY", 1, 0.0),
    "logging_shutdown_flush": (["logging_shutdown_flush.py"], "READY", 1, 0.0),
    "gc_del_reenters_executor": (["gc_del_reenters_executor.py", "5"], "READY", 1, 0.0),
    "collective_broadcast_vs_allreduce": (["collective_mismatch_gloo.py", "lightning"], "RANK", 2, 3.0),
    "collective_allgather_vs_barrier": (["collective_mismatch_gloo.py", "accelerate"], "RANK", 2, 3.0),
    "collective_coalesced_vs_barrier": (["collective_mismatch_gloo.py", "coalesced"], "RANK", 2, 3.0),
    "dataloader_worker_killed": (["dataloader_worker_killed.py"], "WORKERS", 1, 0.0),
}


def dump(pid: int, path: Path, how: str) -> None:
    out = subprocess.run(["py-spy", "dump", "--json", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise SystemExit(f"py-spy failed on {pid}: {out.stderr.strip()[:200]}")
    path.with_suffix(".pyspy.json").write_text(out.stdout)
    try:
        from debug_hang.probe.node_probe import probe_node  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from debug_hang.node_probe import probe_node  # type: ignore[import-not-found,no-redef,unused-ignore]
    probed = probe_node("local", [pid], {}, samples=1, children=False)
    if probed["errors"]:
        raise SystemExit(f"probe failed on {pid}: {probed['errors']}")
    doc = {"schema": "debug-hang/stacks/v1", "meta": {"how": how}, "processes": probed["processes"]}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print("wrote", path.relative_to(OUT.parent.parent.parent), "and", path.with_suffix(".pyspy.json").name)


def record(name: str) -> None:
    argv, marker, count, settle = TARGETS[name]
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", PYTHONWARNINGS="ignore")
    log = tempfile.NamedTemporaryFile("w+", prefix=f"record-{name}-", suffix=".out", delete=False)
    proc = subprocess.Popen([sys.executable, *argv], cwd=HERE, stdout=log, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)
    lines: list[list[str]] = []
    try:
        deadline = time.monotonic() + 60
        while len(lines) < count:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"{name}: no marker; output in {log.name}")
            time.sleep(0.2)
            lines = [ln.split() for ln in Path(log.name).read_text().splitlines() if ln.startswith(marker)]
        folder = OUT / name
        folder.mkdir(exist_ok=True)
        for old in folder.glob("*.json"):
            old.unlink()
        time.sleep(settle)
        how = " ".join(argv)
        if marker == "WORKERS":  # kill worker 0, then dump the parent waiting on it
            parent, first = int(lines[0][1]), int(lines[0][2])
            time.sleep(1.0)
            os.kill(first, signal.SIGKILL)
            time.sleep(0.5)
            dump(parent, folder / "parent.json", f"{how}: worker pid {first} SIGKILLed 0.5 s before the dump")
        elif marker == "RANK":
            for fields in lines:
                dump(int(fields[2]), folder / f"rank{fields[1]}.json", f"{how}: rank {fields[1]}")
        else:
            dump(int(lines[0][1]), folder / "process.json", how)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"targets to record (default: all): {', '.join(TARGETS)}")
    names = parser.parse_args().names or list(TARGETS)
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s): {', '.join(unknown)}")
    for name in names:
        record(name)


if __name__ == "__main__":
    main()
