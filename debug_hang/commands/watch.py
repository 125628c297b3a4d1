"""`debug-hang watch`: follow a running job with cheap signals, diagnose it once when it stalls."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from debug_hang.errors import EXIT_CODES_HELP
from debug_hang.report.write import diagnoses_folder
from debug_hang.timeouts import DEFAULT_DEADLINE_S
from debug_hang.watch import ON_HANG_TIMEOUT_S, Watcher, WatchOptions

DESCRIPTION = """Watch a running Ray job (or every running job) and capture a diagnosis the moment it stops moving.

Signals, read every --interval (adaptive: up to 4x slower while nothing changes, never faster):
the job's task summary (State API, filtered by job on the server: task completions, including
ray.train.report barriers), the tail of its driver log (submitted jobs), and --progress-file
(mtime/size) if given. When none moves for --stall, a second reading confirms the stall, then the
full diagnosis runs once into a new folder OUT/<job>-<time>/ (report.md, diagnosis.json), its summary is printed
and --on-hang runs with DEBUG_HANG_REPORT, DEBUG_HANG_DIR, DEBUG_HANG_JOB_ID, DEBUG_HANG_VERDICT and
DEBUG_HANG_SUMMARY in its environment. A diagnosis that sees the job move (verdict no-hang) fires
nothing. It fires once per stall, re-arms when progress resumes, and ends (exit 0) when the job
ends. No stack is dumped before a stall; the watcher sends nothing over the network but its
requests to the dashboard. Survives dashboard restarts (retries with back-off)."""

EPILOG = f"""examples:
  debug-hang watch 10.0.0.5 --job-id raysubmit_abc --stall 15m --out /shared/hangs
  debug-hang watch --stall 10m --on-hang 'python notify.py --channel ml-oncall'
  ray job submit --entrypoint-num-cpus 0 --no-wait --working-dir . -- python -m debug_hang watch --job-id 02000000

durations: 90, 90s, 15m, 2h

{EXIT_CODES_HELP}"""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")


def duration(text: str) -> float:
    """'90', '90s', '15m', '2h' → seconds."""
    match = _DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: use e.g. 90s, 15m, 2h")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def build_parser(prog: str = "debug-hang watch") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("address", nargs="?", help="GCS address host[:port] or dashboard URL http://host:port (default $RAY_ADDRESS)")
    p.add_argument("--job-id", help="job id or submission id to watch (default: every RUNNING job)")
    p.add_argument("--stall", type=duration, default=600.0, help="silence that counts as a stall (default 10m)")
    p.add_argument("--interval", type=duration, default=30.0, help="seconds between readings (default 30s)")
    p.add_argument("--out", type=Path, default=None,
                   help="folder for the diagnoses, each in a new subfolder <job>-<time> (default: a new private "
                        "/tmp/ray_hang_watch_XXXXXXXX, made and printed at the first diagnosis)")
    p.add_argument("--once", action="store_true", help="exit after the first diagnosis that fires")
    p.add_argument("--on-hang", metavar="CMD",
                   help="command run when a diagnosis fires (split like a shell would, never run by one)")
    p.add_argument("--on-hang-timeout", type=duration, default=ON_HANG_TIMEOUT_S,
                   help=f"kill --on-hang after this long (default {ON_HANG_TIMEOUT_S:.0f}s)")
    p.add_argument("--progress-file", type=Path, help="a file the job writes as it progresses (its mtime and size are a signal)")
    p.add_argument("--no-log-signal", action="store_true",
                   help="do not count driver-log growth as progress (for jobs that print heartbeats while stuck)")
    p.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE_S,
                   help=f"seconds a diagnosis may take (default {DEFAULT_DEADLINE_S:.0f})")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.out is not None:
        args.out = diagnoses_folder(args.out)  # checked (yours, not writable by all) and made 0700 now
    opts = WatchOptions(address=args.address, job_id=args.job_id, stall_s=args.stall, interval_s=args.interval,
                        out_dir=args.out, once=args.once, on_hang=args.on_hang, on_hang_timeout_s=args.on_hang_timeout,
                        progress_file=args.progress_file, log_signal=not args.no_log_signal, deadline_s=args.deadline)
    return Watcher(opts).run()
