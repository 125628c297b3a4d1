#!/usr/bin/env python3
"""Run one hung target and record its stacks with every native and Python dumper installed.

The target is started in its own session, writes the pid to dump into a ready file, and is killed
(its whole process group) once every tool has run. Each tool runs with a timeout; its stdout and
stderr are stored unedited, as a user would paste them, in OUT/<tool>.txt; OUT/commands.txt
lists the command lines. Tools (skipped when absent or not asked for):

  gdb-bt            gdb -p PID -batch -ex bt                        (the thread gdb stops in)
  gdb-all-bt        gdb -p PID -batch -ex "thread apply all bt"
  gdb-all-bt-full   gdb -p PID -batch -ex "thread apply all bt full" (locals under each frame)
  gdb-py-bt         gdb -p PID -batch -ex "thread apply all py-bt"  (CPython's gdb extension)
  gdb-session       gdb -p PID -q with "info threads", "thread apply all bt" typed at its prompt
  pstack            the classic gstack script: gdb's `thread apply all bt`, `Thread`/`#` lines only
  eu-stack          eu-stack -p PID                (and eu-stack-v: eu-stack -v -p PID)
  lldb              lldb -p PID --batch -o "bt all"
  py-spy            py-spy dump --pid PID          (py-spy-native: --native; py-spy-json: --json)
  faulthandler      SIGUSR1 to a target that registered faulthandler on it (--faulthandler file)

Usage: capture.py OUT [--tools a,b,...] [--wait S] -- COMMAND...   (COMMAND gets --ready FILE)
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TOOLS = ["gdb-bt", "gdb-all-bt", "gdb-all-bt-full", "gdb-py-bt", "gdb-session", "pstack", "eu-stack",
         "eu-stack-v", "lldb", "py-spy", "py-spy-native", "py-spy-json", "faulthandler"]
PYSPY = os.environ.get("PYSPY", shutil.which("py-spy") or "py-spy")
GSTACK_FILTER = ("sed", "-n", "-e", r"s/^\((gdb) \)*//", "-e", "/^#/p", "-e", "/^Thread/p")


def tool_command(tool: str, pid: int) -> list[str] | None:
    p = str(pid)
    return {
        "gdb-bt": ["gdb", "-p", p, "-batch", "-ex", "bt"],
        "gdb-all-bt": ["gdb", "-p", p, "-batch", "-ex", "thread apply all bt"],
        "gdb-all-bt-full": ["gdb", "-p", p, "-batch", "-ex", "thread apply all bt full"],
        "gdb-py-bt": ["gdb", "-p", p, "-batch", "-ex", "thread apply all py-bt"],
        "gdb-session": ["gdb", "-p", p, "-q"],
        "pstack": ["gdb", "--quiet", "-nx", f"/proc/{p}/exe", p],
        "eu-stack": ["eu-stack", "-p", p],
        "eu-stack-v": ["eu-stack", "-v", "-p", p],
        "lldb": ["lldb", "-p", p, "--batch", "-o", "bt all"],
        "py-spy": [PYSPY, "dump", "--pid", p],
        "py-spy-native": [PYSPY, "dump", "--native", "--pid", p],
        "py-spy-json": [PYSPY, "dump", "--json", "--pid", p],
    }.get(tool)


def run_tool(tool: str, pid: int, fh_file: str | None, timeout: float) -> tuple[str, str]:
    if tool == "faulthandler":
        if not fh_file:
            return "", ""
        os.kill(pid, signal.SIGUSR1)
        time.sleep(1.0)
        with open(fh_file, encoding="utf-8", errors="replace") as fh:
            return f"kill -USR1 {pid}  # the target's own SIGUSR1 handler writes the dump", fh.read()
    cmd = tool_command(tool, pid)
    assert cmd is not None
    stdin = None
    if tool == "gdb-session":
        stdin = "info threads\nthread apply all bt\nquit\n"
    elif tool == "pstack":
        stdin = "set width 0\nset height 0\nset pagination no\nthread apply all bt\n"
    try:
        out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout,
                             errors="replace")
        text = out.stdout + out.stderr
    except subprocess.TimeoutExpired as exc:
        text = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        text += f"\n[capture.py: {tool} timed out after {timeout} s]\n"
    if tool == "pstack":  # gstack: gdb's output filtered to the thread and frame lines
        text = subprocess.run(GSTACK_FILTER, input=text, capture_output=True, text=True).stdout
    shown = " ".join(shlex.quote(c) for c in cmd)
    if stdin:
        shown += "  <<< " + repr(stdin)
    return shown, text


def main() -> int:
    argv = sys.argv[1:]
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    split = argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--tools", default=",".join(TOOLS))
    p.add_argument("--wait", type=float, default=1.5, help="seconds after the ready file appears")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--faulthandler", action="store_true", help="pass --faulthandler FILE to the target")
    p.add_argument("--self-dump-name", default="faulthandler",
                   help="name of the output of the target's own SIGUSR1 dump (default faulthandler)")
    args = p.parse_args(argv[:split])
    command = argv[split + 1:]
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="native-capture-")
    ready = os.path.join(tmp, "ready")
    fh_file = os.path.join(tmp, "faulthandler.txt") if args.faulthandler else None
    full = [*command, "--ready", ready] + (["--faulthandler", fh_file] if fh_file else [])
    proc = subprocess.Popen(full, start_new_session=True)
    try:
        deadline = time.time() + 30
        while not os.path.exists(ready):
            if time.time() > deadline or proc.poll() is not None:
                print(f"target did not get ready (rc {proc.poll()})", file=sys.stderr)
                return 1
            time.sleep(0.1)
        time.sleep(args.wait)
        pid = int(open(ready).read())
        shown = [f"# target: {' '.join(shlex.quote(c) for c in full)}  (pid dumped: {pid})"]
        for tool in args.tools.split(","):
            cmd, text = run_tool(tool, pid, fh_file, args.timeout)
            if not text.strip():
                continue
            name = args.self_dump_name if tool == "faulthandler" else tool
            with open(os.path.join(args.out, f"{name}.txt"), "w", encoding="utf-8") as fh:
                fh.write(text)
            shown.append(f"{name}: {cmd}")
            print(f"{args.out}/{name}.txt: {len(text)} chars", file=sys.stderr)
        with open(os.path.join(args.out, "commands.txt"), "w", encoding="utf-8") as fh:
            fh.write("\n".join(shown) + "\n")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
