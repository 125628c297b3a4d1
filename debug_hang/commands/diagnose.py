"""`debug-hang diagnose` / scripts/diagnose_ray_hang.sh: the whole diagnosis in one command."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.collect.stacks import MAX_TARGETS
from debug_hang.commands.rerun import command, invoked_as, without_value
from debug_hang.errors import EXIT_CODES_HELP, EXIT_INCONCLUSIVE, EXIT_OK, UsageError
from debug_hang.pipeline import Options, reanalyse, run
from debug_hang.report.json_out import to_json
from debug_hang.report.summary import fix_line, full_summary, summary_lines
from debug_hang.report.write import FolderNotEmptyError, prepare_output_dir
from debug_hang.timeouts import DEFAULT_DEADLINE_S
from debug_hang.untrusted import strip_controls

DESCRIPTION = """Diagnose why a Ray job hangs: cluster state, blocked tasks and actors, Python stacks of every
process of the job (py-spy, on each process's own node), wait-for graph, root cause.

Writes into OUTPUT_DIR: 01_cluster.txt, 02_jobs.json, 03_tasks.json, 04_actors.json,
05_stacks.txt, stacks.json, snapshot.json, report.md (for people), report.html (the same as one
self-contained page, stacks expandable), graph.svg (the wait-for graph), diagnosis.json (for
machines, schema references/diagnosis.schema.json). Prints the report path and a short summary.
Read-only: nothing is restarted, killed or reconfigured. Safe to share: the folder is private
(0700, files 0600), secrets (tokens, keys, passwords, secret env values) are redacted from every
file and from what is printed, and runtime_env rows are left out (README, "Safety")."""

EPILOG = f"""examples:
  diagnose_ray_hang.sh                          # $RAY_ADDRESS, the RUNNING job, a new /tmp/ray_hang_diag_XXXXXXXX (printed)
  diagnose_ray_hang.sh 10.0.0.5                 # port 6379 assumed
  diagnose_ray_hang.sh 10.0.0.5:6380 --job-id 02000000 --json
  diagnose_ray_hang.sh 10.0.0.5 "$HOME/hangs/$(date +%Y%m%d-%H%M%S)"   # a folder of your choice: new or empty
  debug-hang diagnose --reanalyse DIR           # re-run the analysis on a recorded folder (the printed one)

{EXIT_CODES_HELP}"""


def build_parser(prog: str = "debug-hang diagnose") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("address", nargs="?", help="GCS address host[:port] (default $RAY_ADDRESS; port 6379 if omitted)")
    p.add_argument("output_dir", nargs="?",
                   help="output folder, new or empty (default: a new private /tmp/ray_hang_diag_XXXXXXXX)")
    p.add_argument("--force", action="store_true",
                   help="use a non-empty OUTPUT_DIR: the outputs of the earlier diagnosis there are removed first")
    p.add_argument("--include-runtime-env", action="store_true",
                   help="also write jobs' runtime_env and metadata, actors' and tasks' runtime env rows "
                        "(they hold env_vars, where secrets live; redacted, but left out by default)")
    p.add_argument("--job-id", help="job id or submission id to diagnose (default: the RUNNING job)")
    p.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE_S,
                   help=f"seconds the whole run may take; a partial report is written by then (default {DEFAULT_DEADLINE_S:.0f})")
    p.add_argument("--samples", type=int, default=2, help="stack samples per process, to tell stuck from moving (default 2)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds from one sample's start to the next (default 1.0)")
    # py-spy refuses the pair: refused here, at parsing (exit 2), before anything is read.
    pause = p.add_mutually_exclusive_group()
    pause.add_argument("--native", action="store_true", help="include native (C/C++) frames: slower, shows NCCL/gloo internals")
    pause.add_argument("--nonblocking", action="store_true",
                       help="do not pause targets while dumping (no impact on the job, but stacks may be torn)")
    p.add_argument("--locals", action="store_true",
                   help="include local variables of frames (may contain data: off by default)")
    p.add_argument("--max-targets", type=int, default=MAX_TARGETS,
                   help=f"processes dumped at most: those in unfinished calls, their peers and the actors they "
                        f"wait on first; the cut is reported (default {MAX_TARGETS})")
    p.add_argument("--json", action="store_true", help="print diagnosis.json to stdout instead of the summary")
    p.add_argument("-v", "--verbose", action="store_true", help="also print the seconds each phase took")
    p.add_argument("--reanalyse", metavar="DIR",
                   help="re-run the analysis on a recorded output folder (no cluster needed): report.md to stdout, and "
                        "a whole new output folder (report.html, graph.svg, ...) into OUTPUT_DIR or a new private one, "
                        "named on stderr; the one positional is then OUTPUT_DIR")
    return p


def diag_out(args: argparse.Namespace) -> str:
    return str(args.output_dir or args.reanalyse)


def reanalysed(args: argparse.Namespace) -> Diagnosis:
    """`--reanalyse FOLDER`: the analysis again on a saved folder, written into a new one."""
    # The one positional, if any, is the folder to write (there is no cluster to address).
    given = args.output_dir or args.address
    out = prepare_output_dir(Path(given) if given else None, force=args.force)
    try:
        diag = reanalyse(Path(args.reanalyse), out, force=True)
    except BaseException:
        if not given and not any(out.iterdir()):
            out.rmdir()
        raise
    print(f"written: {out} (report.md, report.html, graph.svg, diagnosis.json)", file=sys.stderr)
    return diag


def diagnosed(args: argparse.Namespace, argv: list[str]) -> Diagnosis:
    """A live diagnosis into the given folder, or into a fresh one whose path is printed."""
    if args.max_targets < 1:
        raise UsageError(f"--max-targets must be at least 1, got {args.max_targets}")
    # Checked (and created private) before anything is read: a refused folder costs nothing.
    given = Path(args.output_dir) if args.output_dir else None
    try:
        out = prepare_output_dir(given, force=args.force)
    except FolderNotEmptyError as exc:
        raise UsageError(refusal(exc, argv, args.output_dir)) from None
    if given is None:
        print(f"writing into {out}", file=sys.stderr)
    args.output_dir = str(out)
    opts = Options(address=args.address, job_id=args.job_id, output_dir=out, deadline_s=args.deadline,
                   samples=args.samples, interval_s=args.interval, native=args.native,
                   nonblocking=args.nonblocking, locals=args.locals, force=True,
                   include_runtime_env=args.include_runtime_env, max_targets=args.max_targets)
    # Ray's driver prints cluster errors ("node ... marked dead") to stdout from a background
    # thread once connected; keep stdout for our own output (--json must stay valid JSON).
    try:
        with contextlib.redirect_stdout(sys.stderr):
            diag = run(opts)
    except BaseException:
        if given is None and not any(out.iterdir()):
            out.rmdir()  # no diagnosis: leave no empty folder of ours behind
        raise
    return diag


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.reanalyse:
        diag = reanalysed(args)
        if not args.json:
            from debug_hang.report.markdown import render_markdown

            print(render_markdown(diag))
            return exit_code(diag)
    else:
        diag = diagnosed(args, list(sys.argv[1:] if argv is None else argv))
    if args.json:
        print(json.dumps(to_json(diag), indent=2, default=str))
        return exit_code(diag)
    out = Path(diag_out(args))
    print(f"report: {out / 'report.md'}")
    print(f"verdict: {diag.verdict} (job {diag.job_id}, {diag.seconds:.1f}s)")
    print(strip_controls(full_summary(diag), newlines=False))
    fix = fix_line(diag)
    if fix:
        print(strip_controls(fix, newlines=False))
    for line in summary_lines(diag):
        print(strip_controls(line, newlines=False))
    if diag.fr_notes:
        print(f"  {strip_controls(diag.fr_notes[0], newlines=False)}")
    if args.verbose and diag.timings:
        print("phases: " + ", ".join(f"{name} {secs:.2f}s" for name, secs in diag.timings.items()))
    errors = diag.collection.errors + diag.errors
    if errors:
        print(f"  ! {len(errors)} collection error(s): see the report", file=sys.stderr)
    return exit_code(diag)


def refusal(exc: FolderNotEmptyError, argv: list[str], folder: str) -> str:
    """The refusal of a used folder, with the two commands to run instead, in full."""
    again = invoked_as("diagnose")
    fresh = command(again + without_value(argv, folder))
    forced = command(again + argv + ([] if "--force" in argv else ["--force"]))
    return (f"{exc.reason}. For a new folder of its own (its path is printed), run: {fresh}   "
            f"To replace the earlier diagnosis there instead: {forced}")


def exit_code(diag: Diagnosis) -> int:
    """0 when a diagnosis was produced; EXIT_INCONCLUSIVE when the blocked processes could not be
    inspected (no stacks: a verdict would be a guess)."""
    return EXIT_INCONCLUSIVE if diag.verdict == "inconclusive" and diag.uninspected else EXIT_OK
