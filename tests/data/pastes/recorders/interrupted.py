#!/usr/bin/env python3
"""Record a hung program the way a user sees it: `py-spy dump` while it hangs (OUT/pyspy.txt),
then Ctrl-C (SIGINT) and its KeyboardInterrupt traceback (OUT/traceback.txt).

PROGRAM is hung_lock.py (a thread re-acquiring its own threading.Lock, the default) or
hung_logging.py (a FileHandler created while another thread holds logging's module lock).
Usage: python interrupted.py OUT_DIR [PROGRAM]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    if len(sys.argv) not in (2, 3) or sys.argv[1].startswith("-"):
        print(__doc__)
        return 0 if sys.argv[1:] in (["-h"], ["--help"]) else 2
    out = sys.argv[1]
    program = sys.argv[2] if len(sys.argv) == 3 else "hung_lock.py"
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "traceback.txt"), "w") as log:
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, program)],
                                stdout=subprocess.PIPE, stderr=log, text=True, cwd=HERE)
        assert proc.stdout is not None
        proc.stdout.readline()
        time.sleep(1.5)
        pyspy = os.path.join(os.path.dirname(sys.executable), "py-spy")
        with open(os.path.join(out, "pyspy.txt"), "w") as fh:
            subprocess.run([pyspy, "dump", "--pid", str(proc.pid)], stdout=fh,
                           stderr=subprocess.STDOUT, timeout=30, check=False)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # hung_logging.py hangs again at exit (logging.shutdown)
            proc.kill()
            proc.wait()
    print("rc", proc.returncode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
