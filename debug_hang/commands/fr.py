"""`debug-hang fr DIR`: which rank never entered which collective, from PyTorch Flight Recorder dumps.

Works on a folder copied from a cluster (no Ray needed): one dump per rank, named `<prefix><rank>`
(torch's naming; `.json` twins too), or a diagnose output folder (its `flight_recorder/`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from debug_hang.analyse.flight_recorder import IDLE, FRAnalysis, analyse, describe, torch_crosscheck
from debug_hang.errors import EXIT_CODES_HELP, EXIT_OK, BadInputError
from debug_hang.parse.flight_recorder import read_dir

FR_SCHEMA = "debug-hang/flight-recorder/v1"
# An agent's harness cuts tool output at 10-30K characters: a summary of a few hundred ranks fits.
DEFAULT_MAX_LINES = 200
PROG = "debug-hang fr"

DESCRIPTION = """Analyse PyTorch Flight Recorder dumps, one per rank, per process group and sequence number:
which ranks entered the first collective not completed by all, which never entered it (and what
they last issued, with the call site), which issued a different op or sizes there (a desync), and
which left no dump. Pickles are read with a restricted unpickler that admits only plain
containers and scalars: a file that needs anything else is refused and nothing in it runs.
torch's own analyzer is run as a cross-check when torch is importable (on validated data only)."""

EPILOG = f"""examples:
  {PROG} /tmp/fr_dumps/                       # rank_0, rank_1, ... copied from the nodes
  {PROG} /tmp/ray_hang_diag_20261130_101500   # a diagnose output folder (its flight_recorder/)
  {PROG} /tmp/fr_dumps --world-size 8 --format json

dumps are written by torch at TORCH_FR_DUMP_TEMP_FILE<rank> (default /tmp/nccl_trace_rank_<rank>):
by NCCL's watchdog with TORCH_NCCL_DUMP_ON_TIMEOUT=1, on demand through
TORCH_NCCL_DEBUG_INFO_PIPE_FILE, or by the job calling torch._C._distributed_c10d._dump_fr_trace().

{EXIT_CODES_HELP}"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="a folder of dumps (one per rank), one dump file, or a diagnose output folder")
    p.add_argument("--prefix", help="only files named <prefix><rank> (default: any name ending in a rank number)")
    p.add_argument("--world-size", type=int, help="members of the default group (default: from the dumps)")
    p.add_argument("--format", choices=("summary", "json"), default="summary", help="output format (default summary)")
    p.add_argument("--no-torch", action="store_true", help="skip the cross-check with torch's own analyzer")
    p.add_argument("--max-lines", type=int, default=DEFAULT_MAX_LINES,
                   help=f"cut the summary at this many lines (default {DEFAULT_MAX_LINES}; 0: no cut; JSON is never cut)")
    return p


def summary_lines(fr: FRAnalysis) -> list[str]:
    lines = [f"Flight Recorder dumps of rank(s) {', '.join(map(str, fr.ranks_dumped))}"]
    culprits = fr.culprits()
    if culprits:
        lines.append(f"culprit rank(s): {', '.join(map(str, culprits))}")
    elif not fr.hung_groups():
        lines.append("no collective pending: every collective in these dumps completed on every rank that dumped")
    for g in fr.groups:
        lines.append(f"- [{g.kind}] {g.summary()}")
        if g.kind == IDLE:
            continue
        for r in sorted(g.ranks):
            x = g.ranks[r]
            state = ("no dump" if not x.dumped else
                     f"enqueued #{x.last_enqueued}, completed #{x.last_completed}; last: {describe(x.last, x.last_enqueued)}")
            lines.append(f"    rank {r}: {state}")
    if fr.torch_check:
        lines.append(fr.torch_check)
    lines += [f"not read: {e}" for e in fr.errors]
    return lines


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    path = Path(args.input)
    if (path / "flight_recorder").is_dir():
        path = path / "flight_recorder"
    read = read_dir(path, args.prefix)
    for err in read.errors:
        print(f"warning: {err}", file=sys.stderr)
    if not read.dumps:
        why = f" ({len(read.errors)} file(s) refused or unreadable: {read.errors[0]})" if read.errors else ""
        raise BadInputError(f"{args.input}: no Flight Recorder dump read{why}; dumps are named <prefix><rank>")
    fr = analyse(read.dumps, args.world_size, read.errors)
    if not args.no_torch:
        fr.torch_check = torch_crosscheck(read.dumps, fr.groups)
    if args.format == "json":
        print(json.dumps({"schema": FR_SCHEMA, **fr.to_json()}, indent=1))
    else:
        lines = summary_lines(fr)
        if 0 < args.max_lines < len(lines):
            lines = [*lines[: args.max_lines], f"... {len(lines) - args.max_lines} more line(s): --max-lines 0 or --format json"]
        print("\n".join(lines))
    return EXIT_OK
