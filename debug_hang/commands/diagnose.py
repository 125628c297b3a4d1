"""`debug-hang diagnose` / scripts/diagnose_ray_hang.sh: the whole diagnosis in one command."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import sys
from pathlib import Path

from debug_hang.errors import EXIT_CODES_HELP, EXIT_OK
from debug_hang.pipeline import Options, reanalyse, run
from debug_hang.report.json_out import to_json
from debug_hang.report.summary import summary_lines
from debug_hang.timeouts import DEFAULT_DEADLINE_S

DESCRIPTION = """Diagnose why a Ray job hangs: cluster state, blocked tasks and actors, Python stacks of every
process of the job (py-spy, on each process's own node), wait-for graph, root cause.

Writes into OUTPUT_DIR: 01_cluster.txt, 02_jobs.json, 03_tasks.json, 04_actors.json,
05_stacks.txt, stacks.json, snapshot.json, report.md (for people), diagnosis.json (for machines,
schema references/diagnosis.schema.json). Prints the report path and a short summary.
Read-only: nothing is restarted, killed or reconfigured."""

EPILOG = f"""examples:
  diagnose_ray_hang.sh                          # $RAY_ADDRESS, the RUNNING job, /tmp/ray_hang_diag_<time>
  diagnose_ray_hang.sh 10.0.0.5 /tmp/diag       # port 6379 assumed
  diagnose_ray_hang.sh 10.0.0.5:6380 --job-id 02000000 --json
  debug-hang diagnose --reanalyse /tmp/diag     # re-run the analysis on a recorded folder

{EXIT_CODES_HELP}"""


def build_parser(prog: str = "debug-hang diagnose") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("address", nargs="?", help="GCS address host[:port] (default $RAY_ADDRESS; port 6379 if omitted)")
    p.add_argument("output_dir", nargs="?", help="output folder (default /tmp/ray_hang_diag_<timestamp>)")
    p.add_argument("--job-id", help="job id or submission id to diagnose (default: the RUNNING job)")
    p.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE_S,
                   help=f"seconds the whole run may take; a partial report is written by then (default {DEFAULT_DEADLINE_S:.0f})")
    p.add_argument("--samples", type=int, default=2, help="stack samples per process, to tell stuck from moving (default 2)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1.0)")
    p.add_argument("--native", action="store_true", help="include native (C/C++) frames: slower, shows NCCL/gloo internals")
    p.add_argument("--nonblocking", action="store_true",
                   help="do not pause targets while dumping (no impact on the job, but stacks may be torn)")
    p.add_argument("--locals", action="store_true",
                   help="include local variables of frames (may contain data: off by default)")
    p.add_argument("--json", action="store_true", help="print diagnosis.json to stdout instead of the summary")
    p.add_argument("-v", "--verbose", action="store_true", help="also print the seconds each phase took")
    p.add_argument("--reanalyse", metavar="DIR", help="re-run the analysis on a recorded output folder (no cluster needed)")
    return p


def diag_out(args: argparse.Namespace) -> str:
    return str(args.output_dir or args.reanalyse)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.reanalyse:
        diag = reanalyse(Path(args.reanalyse))
        if not args.json:
            from debug_hang.report.markdown import render_markdown

            print(render_markdown(diag))
            return EXIT_OK
    else:
        out = Path(args.output_dir or f"/tmp/ray_hang_diag_{dt.datetime.now():%Y%m%d_%H%M%S}")
        args.output_dir = str(out)
        opts = Options(address=args.address, job_id=args.job_id, output_dir=out, deadline_s=args.deadline,
                       samples=args.samples, interval_s=args.interval, native=args.native,
                       nonblocking=args.nonblocking, locals=args.locals)
        # Ray's driver prints cluster errors ("node ... marked dead") to stdout from a background
        # thread once connected; keep stdout for our own output (--json must stay valid JSON).
        with contextlib.redirect_stdout(sys.stderr):
            diag = run(opts)
    if args.json:
        print(json.dumps(to_json(diag), indent=2, default=str))
        return EXIT_OK
    out = Path(diag_out(args))
    print(f"report: {out / 'report.md'}")
    print(f"verdict: {diag.verdict} (job {diag.job_id}, {diag.seconds:.1f}s)")
    print(diag.summary)
    for line in summary_lines(diag):
        print(line)
    if diag.fr_notes:
        print(f"  {diag.fr_notes[0]}")
    if args.verbose and diag.timings:
        print("phases: " + ", ".join(f"{name} {secs:.2f}s" for name, secs in diag.timings.items()))
    errors = diag.collection.errors + diag.errors
    if errors:
        print(f"  ! {len(errors)} collection error(s): see the report", file=sys.stderr)
    return EXIT_OK

