"""scripts/run_on_each_ray_node.py: list the nodes, or run one command (or a batched stack dump)
on each chosen node through a pinned, CPU-free Ray helper task, with a per-node timeout.

The seed's interface, kept: `--list`, `-n/--node ID_OR_IP` (repeatable), `COMMAND...`, and it
runs either as a job (`ray job submit --working-dir . -- python scripts/run_on_each_ray_node.py
...`, address from the job's environment) or directly as a driver (`--address`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any, TextIO

from debug_hang.collect.address import check_reachable, parse_address
from debug_hang.collect.nodes import (
    MAX_NODES_IN_FLIGHT,
    NODE_TIMEOUT_S,
    NodeInfo,
    NodeRun,
    connect,
    list_nodes,
    run_on_nodes,
    select_nodes,
)
from debug_hang.errors import EXIT_OK, EXIT_PARTIAL, NotFoundError, UsageError
from debug_hang.model import process_from_dict
from debug_hang.probe.commands import MAX_OUTPUT_BYTES, run_command
from debug_hang.probe.node_probe import probe_node
from debug_hang.probe.pyspy import NONBLOCKING_TRADE_OFF, DumpOptions, validate_pid

PROG = "run_on_each_ray_node.py"
NODES_SCHEMA = "debug-hang/nodes/v1"
RUN_SCHEMA = "debug-hang/run-on-nodes/v1"
DUMP_SCHEMA = "debug-hang/node-stacks/v1"
# Frames printed per thread by the --dump text view (JSON always has them all).
MAX_FRAMES_SHOWN = 40

DESCRIPTION = """List the nodes of a Ray cluster, or run one command on each chosen node.

The command runs on the node itself, in a Ray helper task pinned there with
NodeAffinitySchedulingStrategy(soft=False) and num_cpus=0 (so it still runs when every CPU is
held), with a per-node --timeout: a dead, unreachable or slow node is reported, never waited on.
COMMAND is an argument list, never given to a shell; a single quoted string such as
"py-spy dump --pid 123" is split like a shell would split it (shlex), but pipes, redirections
and variables are NOT interpreted. Without -n the command runs on every alive node.

--dump PID dumps Python stacks of PIDs (and their child processes) on the chosen node with
py-spy, all in parallel in one helper task: much faster than one `py-spy dump` command per pid.
"""

EPILOG = f"""examples:
  # the seed's way, as a job (the address comes from the job's environment):
  ray job submit --working-dir . --address http://HEAD:8265 -- \\
      python scripts/run_on_each_ray_node.py --list
  ray job submit --working-dir . --address http://HEAD:8265 -- \\
      python scripts/run_on_each_ray_node.py -n 7f3a9c "py-spy dump --pid 12345"
  # directly as a driver (faster: no job, no working-dir upload):
  {PROG} --address HEAD:6379 --list --json
  {PROG} --address HEAD:6379 -n 10.0.0.5 -- py-spy dump --pid 12345
  {PROG} --address HEAD:6379 -n 7f3a9c --dump 12345,12346 --samples 2

nodes: -n takes a full node id, a unique prefix of one (an ambiguous prefix is refused and the
candidates listed), or an IP (every node with that IP). Dead nodes are listed by --list and
reported, never run on.

{textwrap.fill("--nonblocking: " + NONBLOCKING_TRADE_OFF + ".", 96)}

exit codes:
  0  every chosen node ran the command (each command's own exit code is printed per node)
  1  internal error (rerun with DEBUG_HANG_TRACEBACK=1 and report it)
  2  usage error (bad flags, invalid or ambiguous node selector, empty command)
  4  cluster unreachable: nothing answers at the address, or the GCS does not respond
  5  not found: no node matches -n, or no alive node
  7  partial: at least one node failed (dead, helper not scheduled in time, command not found
     or timed out, py-spy missing or refused for --dump); the others' results are printed"""


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--address", help="GCS address host[:port] (default $RAY_ADDRESS, which a job "
                   "submitted with `ray job submit` has; port 6379 if omitted)")
    p.add_argument("--list", action="store_true", help="list the nodes: id, IP, alive/dead, head, resources")
    p.add_argument("-n", "--node", action="append", default=[], metavar="ID_OR_IP",
                   help="node id, unique id prefix, or IP; repeatable (default: every alive node)")
    p.add_argument("--timeout", type=float, default=NODE_TIMEOUT_S,
                   help=f"seconds each node may take, helper start-up included (default {NODE_TIMEOUT_S:.0f}); "
                   f"past {MAX_NODES_IN_FLIGHT} nodes they run {MAX_NODES_IN_FLIGHT} at a time, each with this time from its turn")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    p.add_argument("--max-output", type=int, default=MAX_OUTPUT_BYTES, metavar="BYTES",
                   help=f"cut each node's stdout and stderr to BYTES (default {MAX_OUTPUT_BYTES}; 0 = no cut)")
    dump = p.add_argument_group("batched stack dump (instead of COMMAND)")
    dump.add_argument("--dump", action="append", default=[], metavar="PID[,PID...]",
                      help="dump these pids and their children with py-spy on the node given by -n")
    pause = dump.add_mutually_exclusive_group()  # py-spy refuses the pair: exit 2 at parsing
    pause.add_argument("--native", action="store_true", help="include native (C/C++) frames")
    pause.add_argument("--nonblocking", action="store_true",
                       help="never pause the targets (stacks may be torn; see below)")
    dump.add_argument("--locals", action="store_true", help="include frame locals (may hold data)")
    dump.add_argument("--samples", type=int, default=1, help="dumps per process, to tell stuck from moving (default 1)")
    dump.add_argument("--interval", type=float, default=0.5, help="seconds from one sample's start to the next (default 0.5)")
    dump.add_argument("--no-children", action="store_true", help="do not dump the pids' child processes")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND...",
                   help='command to run on each node: `-- prog args...` or one quoted string "prog args"')
    return p


def parse_command(parts: list[str]) -> list[str]:
    """COMMAND... as an argv list: a lone string with spaces is split with shlex (no shell)."""
    if parts and parts[0] == "--":
        parts = parts[1:]
    if len(parts) == 1 and (parts[0] != parts[0].strip() or any(c.isspace() for c in parts[0])):
        try:
            parts = shlex.split(parts[0])
        except ValueError as exc:
            raise UsageError(f"cannot split the command {parts[0]!r}: {exc}") from None
    if not parts or not parts[0]:
        raise UsageError("empty command: give COMMAND..., --dump PID or --list")
    return parts


def parse_pids(values: list[str]) -> list[int]:
    pids: list[int] = []
    for value in values:
        for item in value.split(","):
            if not item.strip():
                continue
            try:
                pid = validate_pid(item)
            except ValueError:
                raise UsageError(f"invalid pid {item!r} in --dump") from None
            if pid not in pids:
                pids.append(pid)
    if not pids:
        raise UsageError("--dump needs at least one pid")
    return pids


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    modes = [bool(args.list), bool(args.dump), bool(args.command)]
    if sum(modes) != 1:
        raise UsageError("give exactly one of --list, --dump PID or COMMAND... (see --help)")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout}")
    if args.max_output < 0:
        raise UsageError("--max-output must be 0 (no cut) or positive")
    argv_cmd: list[str] = []
    pids: list[int] = []
    options = DumpOptions(native=args.native, nonblocking=args.nonblocking, locals=args.locals)
    if args.command:
        argv_cmd = parse_command(args.command)
    if args.dump:
        pids = parse_pids(args.dump)
        if not args.node:
            raise UsageError("--dump needs -n NODE: a pid means something only on its own node")
        if args.samples < 1 or args.interval < 0:
            raise UsageError("--samples must be >= 1 and --interval >= 0")

    address = parse_address(args.address)
    check_reachable(address)
    nodes = list_nodes(address)
    if args.list:
        emit(render_list_json(nodes) if args.json else "\n".join(render_list(nodes)))
        return EXIT_OK
    chosen = select_nodes(nodes, args.node)
    if not chosen:
        raise NotFoundError(f"no alive node in the cluster at {address.gcs} ({len(nodes)} listed, all dead)")

    out = sys.stdout
    start = time.monotonic()
    # A connected driver prints cluster errors ("node ... has been marked dead") to stdout from a
    # background thread: send them to stderr, where diagnostics belong, so stdout stays ours.
    with contextlib.redirect_stdout(sys.stderr):
        connect(address)
        # Each node gets --timeout from its turn; past MAX_NODES_IN_FLIGHT nodes, turns come in waves.
        total = args.timeout * -(-len(chosen) // MAX_NODES_IN_FLIGHT)
        if argv_cmd:
            runs = run_on_nodes(run_command, {n.node_id: (argv_cmd, args.timeout, args.max_output) for n in chosen},
                                timeout_s=total, node_timeout_s=args.timeout, deadline_kw="deadline")
            doc = run_document(argv_cmd, chosen, runs, time.monotonic() - start)
            text = json.dumps(doc, indent=1) if args.json else "\n".join(render_runs(doc))
        else:
            budget = max(args.timeout - 2.0, 1.0)  # the probe answers before the caller gives up
            runs = run_on_nodes(probe_node, {n.node_id: (n.node_id, pids, options.to_dict(), args.samples,
                                                         args.interval, not args.no_children, budget)
                                             for n in chosen}, timeout_s=total, node_timeout_s=args.timeout,
                                deadline_kw="deadline_epoch")
            doc = dump_document(pids, chosen, runs, time.monotonic() - start)
            text = json.dumps(doc, indent=1) if args.json else "\n".join(render_dump(doc))
    emit(text, out)
    return EXIT_OK if doc["summary"]["failed"] == 0 else EXIT_PARTIAL


def emit(text: str, stream: TextIO | None = None) -> None:
    print(text, file=stream or sys.stdout, flush=True)


def render_list_json(nodes: list[NodeInfo]) -> str:
    return json.dumps({"schema": NODES_SCHEMA, "nodes": [n.to_dict() for n in nodes]}, indent=1)


def render_list(nodes: list[NodeInfo]) -> Iterator[str]:
    """One line per node: id, IP, state, head marker, resources (CPU/GPU first)."""
    alive = sum(n.alive for n in nodes)
    yield f"{len(nodes)} node(s), {alive} alive"
    for n in nodes:
        res = _resources(n.resources)
        state = "ALIVE" if n.alive else "DEAD "
        head = " head" if n.is_head else ""
        line = f"{n.node_id}  {n.node_ip:<15} {state}{head:5}  {res}"
        if not n.alive and n.death_reason:
            line += f"  ({n.death_reason[:120]})"
        yield line


def _resources(resources: dict[str, float]) -> str:
    def fmt(key: str, value: float) -> str:
        if key in ("memory", "object_store_memory"):
            return f"{key}={value / 2**30:.1f}GiB"
        return f"{key}={value:g}"

    first = [k for k in ("CPU", "GPU") if k in resources]
    rest = sorted(k for k in resources if k not in first)
    return " ".join(fmt(k, resources[k]) for k in first + rest)


def _node_entry(node: NodeInfo, run: NodeRun | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"node_id": node.node_id, "node_ip": node.node_ip, "is_head": node.is_head,
                             "ok": False, "error": None, "kind": None, "seconds": None}
    if run is None:
        entry.update(error="no result (internal)", kind="helper-failed")
    else:
        entry.update(error=run.error, kind=run.kind, seconds=round(run.seconds, 3))
    return entry


def run_document(argv: list[str], chosen: list[NodeInfo], runs: dict[str, NodeRun],
                 seconds: float) -> dict[str, Any]:
    """The JSON result of COMMAND on each node (schema debug-hang/run-on-nodes/v1)."""
    rows = []
    for node in chosen:
        run = runs.get(node.node_id)
        entry = _node_entry(node, run)
        entry.update(returncode=None, stdout="", stderr="", stdout_cut=0, stderr_cut=0, hostname=None)
        if run is not None and run.error is None and isinstance(run.value, dict):
            value = run.value
            entry.update({k: value.get(k) for k in ("returncode", "stdout", "stderr", "stdout_cut",
                                                   "stderr_cut", "hostname", "pid_namespace")})
            entry.update(error=value.get("error"), kind=value.get("kind"))
        entry["ok"] = entry["error"] is None
        rows.append(entry)
    failed = sum(not r["ok"] for r in rows)
    return {"schema": RUN_SCHEMA, "command": argv, "seconds": round(seconds, 3), "nodes": rows,
            "summary": {"nodes": len(rows), "ran": len(rows) - failed, "failed": failed,
                        "nonzero_exit": sum(r["ok"] and r["returncode"] != 0 for r in rows)}}


def render_runs(doc: dict[str, Any]) -> Iterator[str]:
    for row in doc["nodes"]:
        where = f"node {row['node_id']} ({row['node_ip']}{', head' if row['is_head'] else ''})"
        if row["ok"]:
            yield f"=== {where}: exit {row['returncode']} in {row['seconds']}s"
        else:
            yield f"=== {where}: FAILED [{row['kind']}] {row['error']}"
        if row["stdout"]:
            yield row["stdout"].rstrip("\n")
        if row["stdout_cut"]:
            yield f"[... {row['stdout_cut']} more bytes of stdout cut; raise --max-output]"
        if row["stderr"]:
            yield "--- stderr ---"
            yield row["stderr"].rstrip("\n")
        if row["stderr_cut"]:
            yield f"[... {row['stderr_cut']} more bytes of stderr cut; raise --max-output]"
    s = doc["summary"]
    yield (f"=== {s['nodes']} node(s): {s['ran']} ran the command ({s['nonzero_exit']} with a "
           f"non-zero exit), {s['failed']} failed; {doc['seconds']}s")


def dump_document(pids: list[int], chosen: list[NodeInfo], runs: dict[str, NodeRun],
                  seconds: float) -> dict[str, Any]:
    """The JSON result of --dump (schema debug-hang/node-stacks/v1): probe_node's data per node."""
    rows = []
    for node in chosen:
        run = runs.get(node.node_id)
        entry = _node_entry(node, run)
        entry.update(processes=[], info={}, errors=[])
        if run is not None and run.error is None and isinstance(run.value, dict):
            value = run.value
            info = {pid: {k: v for k, v in row.items() if k != "window_start"} if isinstance(row, dict) else row
                    for pid, row in (value.get("info") or {}).items()}  # a later round's input, not a finding
            entry.update(processes=value.get("processes", []), info=info,
                         errors=value.get("errors", []), hostname=value.get("hostname"),
                         pid_namespace=value.get("pid_namespace"), pyspy=value.get("pyspy"))
            # The node answered; it failed if nothing at all could be dumped there.
            if entry["errors"] and not entry["processes"]:
                entry.update(error="no process could be dumped on this node",
                             kind=entry["errors"][0].get("kind"))
        entry["ok"] = entry["error"] is None
        rows.append(entry)
    failed = sum(not r["ok"] for r in rows)
    return {"schema": DUMP_SCHEMA, "pids": pids, "seconds": round(seconds, 3), "nodes": rows,
            "summary": {"nodes": len(rows), "ran": len(rows) - failed, "failed": failed,
                        "process_errors": sum(len(r["errors"]) for r in rows)}}


def render_dump(doc: dict[str, Any]) -> Iterator[str]:
    """py-spy-like text: per node, per process and sample, threads with innermost frame first."""
    for row in doc["nodes"]:
        where = f"node {row['node_id']} ({row['node_ip']}{', head' if row['is_head'] else ''})"
        if row["error"] and not row["processes"]:
            yield f"=== {where}: FAILED [{row['kind']}] {row['error']}"
        else:
            yield f"=== {where}: {len(row['processes'])} stack(s) in {row['seconds']}s"
        for raw in row["processes"]:
            proc = process_from_dict(raw)
            info = row["info"].get(str(proc.pid), {})
            extra = f" child of {info['child_of']}" if info.get("child_of") else ""
            cpu = f" cpu {info['cpu_percent']}%" if info.get("cpu_percent") is not None else ""
            # py-spy's own text layout, so parse_stacks.py / match_patterns.py read it back.
            yield f"# sample {proc.sample}{extra}{cpu}"
            yield f"Process {proc.pid}: {proc.title or '?'}"
            for thread in proc.threads:
                state = "idle" if thread.active is False else "active"
                gil = "+gil" if thread.owns_gil else ""
                yield f'Thread {thread.os_thread_id or thread.thread_id} ({state}{gil}): "{thread.name or ""}"'
                for frame in thread.frames[:MAX_FRAMES_SHOWN]:
                    yield f"    {frame.function} ({frame.short_file}:{frame.line})"
                if len(thread.frames) > MAX_FRAMES_SHOWN:
                    yield f"# ... {len(thread.frames) - MAX_FRAMES_SHOWN} outer frames; see --json"
        for err in row["errors"]:
            yield f"  ! pid {err.get('pid')}: [{err.get('kind')}] {err.get('error')}"
    s = doc["summary"]
    yield (f"=== {s['nodes']} node(s): {s['ran']} answered, {s['failed']} failed, "
           f"{s['process_errors']} process error(s); {doc['seconds']}s")
