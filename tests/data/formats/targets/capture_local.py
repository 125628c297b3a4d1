"""Re-create the local (non-Ray) captures under tests/data/formats/ from the targets beside this file.

Run from the repository root with the project venv active:
    python tests/data/formats/targets/capture_local.py [--old-pyspy DIR] [--python3.7 PATH]
Every capture is the real output of the real tool on a real target; nothing is edited afterwards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.dirname(HERE)
READY_TIMEOUT_S = 20.0  # a target starts in well under a second; 20 s covers a loaded 2-core box


def wait_ready(path: str, proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if os.path.exists(path) and open(path).read().strip():
            return int(open(path).read())
        if proc.poll() is not None:
            raise SystemExit(f"target exited early with {proc.returncode}")
        time.sleep(0.05)
    raise SystemExit("target never became ready")


def start(python: str, script: str, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    ready = tempfile.mktemp(prefix="ready-")
    proc = subprocess.Popen([python, os.path.join(HERE, script), "--ready", ready, *extra])
    return proc, wait_ready(ready, proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    for p in [proc]:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)


def run_to(path: str, argv: list[str]) -> None:
    res = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    with open(os.path.join(OUT, path), "wb") as fh:
        fh.write(res.stdout)
        if res.returncode != 0:
            fh.write(res.stderr)
    print(f"{path}: rc={res.returncode} {len(res.stdout)} bytes", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--old-pyspy", default="", help="dir with vX.Y.Z/ unpacked py-spy wheels")
    parser.add_argument("--python37", default="/root/.pyenv/versions/3.7.16/bin/python3.7")
    parser.add_argument("--python313", default="/root/.pyenv/versions/3.13.0/bin/python3.13")
    args = parser.parse_args()
    pyspy = shutil.which("py-spy") or "py-spy"
    for sub in ("pyspy", "pyspy-old", "faulthandler"):
        os.makedirs(os.path.join(OUT, sub), exist_ok=True)

    # py-spy 0.4 on the threads target (with a spinner), every flag.
    proc, pid = start(sys.executable, "threads_target.py", "--spin", "--lifetime", "60")
    try:
        run_to("pyspy/threads.txt", [pyspy, "dump", "--pid", str(pid)])
        run_to("pyspy/threads-native.txt", [pyspy, "dump", "--pid", str(pid), "--native"])
        run_to("pyspy/threads-locals.txt", [pyspy, "dump", "--pid", str(pid), "--locals"])
        run_to("pyspy/threads.json", [pyspy, "dump", "--pid", str(pid), "--json"])
        run_to("pyspy/threads-native.json", [pyspy, "dump", "--pid", str(pid), "--json", "--native"])
        run_to("pyspy/threads-locals.json", [pyspy, "dump", "--pid", str(pid), "--json", "--locals"])
    finally:
        stop(proc)

    proc, pid = start(sys.executable, "subprocess_target.py", "--lifetime", "60")
    try:
        run_to("pyspy/subprocesses.txt", [pyspy, "dump", "--pid", str(pid), "--subprocesses"])
        run_to("pyspy/subprocesses.json",
               [pyspy, "dump", "--pid", str(pid), "--subprocesses", "--json"])
    finally:
        subprocess.run(["pkill", "-P", str(pid)], check=False)
        stop(proc)

    # Older py-spy releases (their own layouts) on an older Python they support.
    if args.old_pyspy:
        proc, pid = start(args.python37, "threads_target.py", "--lifetime", "60")
        try:
            for version, argv in (
                ("0.1.11", ["--dump", "--pid", str(pid)]),
                ("0.2.2", ["dump", "--pid", str(pid)]),
                ("0.2.2-locals", ["dump", "--pid", str(pid), "--locals"]),
                ("0.3.14", ["dump", "--pid", str(pid)]),
                ("0.3.14-locals", ["dump", "--pid", str(pid), "--locals"]),
            ):
                ver = version.split("-")[0]
                exe = os.path.join(args.old_pyspy, f"v{ver}", f"py_spy-{ver}.data", "scripts", "py-spy")
                run_to(f"pyspy-old/py-spy-{version}.txt", [exe, *argv])
        finally:
            stop(proc)

    # faulthandler, three ways, on this Python and on 3.13.
    for python, tag in ((sys.executable, "py311"), (args.python313, "py313")):
        if not os.path.exists(python):
            continue
        for mode in ("later", "signal", "fatal"):
            out = os.path.join(OUT, "faulthandler", f"{mode}-{tag}.txt")
            ready = tempfile.mktemp(prefix="ready-")
            proc = subprocess.Popen([python, os.path.join(HERE, "faulthandler_target.py"),
                                     "--mode", mode, "--out", out, "--ready", ready,
                                     "--lifetime", "20"])
            if mode == "signal":
                wait_ready(ready, proc)
                time.sleep(0.3)
                os.kill(proc.pid, signal.SIGUSR1)
                time.sleep(0.5)
                proc.kill()
            proc.wait(timeout=30)
            print(f"faulthandler/{mode}-{tag}.txt rc={proc.returncode}", file=sys.stderr)


if __name__ == "__main__":
    main()
