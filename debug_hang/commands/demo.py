"""`debug-hang demo [SCENARIO]`: a real hang on a local loopback cluster, diagnosed end to end.

Starts a Ray head on 127.0.0.1 (own ports and temp dir), submits examples/<SCENARIO>.py, waits
until it prints READY (it is then hung), runs the full diagnosis, prints the report, and stops
what it started. With --address it uses an existing cluster instead and leaves it running.
Exits 0 when the diagnosis is the answer the scenario declares (its EXPECTED), 9 when it is not.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import Any

from debug_hang import localcluster
from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.commands.rerun import command, invoked_as, without_value
from debug_hang.errors import EXIT_CODES_HELP, EXIT_OK, EXIT_WRONG, UsageError
from debug_hang.pipeline import Options, run
from debug_hang.report.markdown import render_markdown
from debug_hang.report.write import FolderNotEmptyError, prepare_output_dir

DEFAULT_SCENARIO = "producer_never_produces"
DEMO_PORT = 6420  # away from Ray's default 6379 and from the test suite's 6400
PORT_ENV = "DEBUG_HANG_DEMO_PORT"  # moves the demo cluster (its other ports follow); --port wins


def build_parser(prog: str = "debug-hang demo") -> argparse.ArgumentParser:
    names = ", ".join(localcluster.examples()) or "(none found)"
    p = argparse.ArgumentParser(prog=prog, description=__doc__, epilog=f"scenarios: {names}\n\n{EXIT_CODES_HELP}",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", nargs="?", default=DEFAULT_SCENARIO, help=f"example to run (default {DEFAULT_SCENARIO})")
    p.add_argument("--address", help="use this running cluster (GCS host:port) instead of starting one")
    p.add_argument("--port", type=int, default=None,
                   help=f"GCS port of the demo cluster, 6400-7399; its other ports follow (default ${PORT_ENV} or {DEMO_PORT})")
    p.add_argument("--output-dir", default=None, help="where to write the diagnosis, new or empty (default: a new private /tmp/ray_hang_diag_*)")
    p.add_argument("--keep", action="store_true", help="leave the demo cluster and job running afterwards")
    p.add_argument("--list", action="store_true", help="list the scenarios and their expected root cause")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        names = localcluster.examples()
        width = max((len(n) for n in names), default=0) + 2
        for name in names:
            exp = localcluster.expected_of(name)
            needs = f"  (needs {', '.join(exp['needs'])})" if exp.get("needs") else ""
            print(f"{name:<{width}}{exp.get('verdict')}: {exp.get('pattern')}{needs}")
        return EXIT_OK
    if args.scenario not in localcluster.examples():
        raise UsageError(f"unknown scenario {args.scenario!r}; try --list")
    _check_needs(args.scenario)
    port = demo_port(args.port)
    try:
        out = prepare_output_dir(Path(args.output_dir) if args.output_dir else None)
    except FolderNotEmptyError as exc:
        raw = list(sys.argv[1:] if argv is None else argv)
        fresh = command(invoked_as("demo") + without_value(raw, args.output_dir, flag="--output-dir"))
        raise UsageError(f"{exc.reason}. For a new folder of its own (its path is printed), run: {fresh}") from None
    if args.address:
        cluster = localcluster.attach(args.address)
    else:
        print(f"starting a local Ray cluster on 127.0.0.1:{port} ...", file=sys.stderr)
        cluster = localcluster.start(port, num_cpus=4)
    address = cluster.gcs
    job = None
    try:
        print(f"submitting examples/{args.scenario}.py and waiting for it to hang ...", file=sys.stderr)
        job = localcluster.submit_example(cluster, args.scenario)
        print(f"job {job.job_id} is hung; diagnosing ...", file=sys.stderr)
        diag = run(Options(address=address, job_id=job.job_id, output_dir=out, force=True))
        print(render_markdown(diag))
        expected = localcluster.expected_of(args.scenario)
        found = diag.causes[0].pattern if diag.causes else None
        wrong = mismatch(expected, diag)
        print(f"expected: {expected.get('verdict')} / {expected.get('pattern')}; "
              f"diagnosed: {diag.verdict} / {found} in {diag.seconds:.1f}s"
              + (f" — WRONG: {wrong}" if wrong else "") + f". Files: {out}", file=sys.stderr)
    finally:
        if not args.keep:
            if job is not None:
                localcluster.stop_job(cluster, job)
            if not args.address:
                localcluster.stop(cluster)
    return EXIT_WRONG if wrong else EXIT_OK


def demo_port(given: int | None) -> int:
    """--port, else $DEBUG_HANG_DEMO_PORT, else DEMO_PORT; refused outside 6400-7399."""
    raw = given if given is not None else os.environ.get(PORT_ENV) or DEMO_PORT
    try:
        port = int(raw)
    except ValueError:
        raise UsageError(f"${PORT_ENV} must be a port number, got {raw!r}") from None
    if not 6400 <= port <= 7399:
        raise UsageError(f"demo port {port} must be in 6400-7399 (the cluster's other ports are derived from it)")
    return port


def mismatch(expected: dict[str, Any], diag: Diagnosis) -> str | None:
    """Why the diagnosis is not the answer the scenario declares (None: it is): the verdict, and
    for a hang the top root cause's pattern and its culprits (class, and rank when declared)."""
    if diag.verdict != expected.get("verdict"):
        return f"verdict {diag.verdict}, expected {expected.get('verdict')}"
    if expected.get("verdict") != "hang":
        return None
    top = diag.causes[0] if diag.causes else None
    if top is None or top.pattern != expected.get("pattern"):
        return f"root cause {top.pattern if top else None}, expected {expected.get('pattern')}"
    for want in expected.get("culprits") or []:
        if not any(localcluster.culprit_name(c.kind, c.class_name, c.task_name or c.name) == want.get("class_name")
                   and (want.get("rank") is None or c.rank == want["rank"]) for c in top.culprits):
            return f"culprits {', '.join(c.label() for c in top.culprits)}; expected {want.get('class_name')}" + (
                f" rank {want['rank']}" if want.get("rank") is not None else "")
    return None


def _check_needs(scenario: str) -> None:
    """Refuse, before starting anything, a scenario whose libraries are not installed here."""
    for module in localcluster.expected_of(scenario).get("needs") or []:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise UsageError(f"scenario {scenario} needs {module} ({exc}); install it with: "
                             "pip install 'debug-hang[train]'") from None
