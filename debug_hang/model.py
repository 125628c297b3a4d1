"""The stack data model shared by every parser, the collector, the matcher and the report.

One model, several renderers: py-spy JSON, py-spy text, faulthandler and `ray stack` output all
parse into `Process` → `Thread` → `Frame`; `to_dict`/`from_dict` give the versioned JSON form
(`debug-hang/stacks/v1`) that `parse_stacks.py` prints and `match_patterns.py` reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any, Literal, cast, get_args

from debug_hang.facts import Facts

STACKS_SCHEMA = "debug-hang/stacks/v1"

# What went wrong when something could not be read: py-spy on a target (probe/pyspy.py), a command
# or /proc read on a node (probe/node_probe.py), a node's helper (collect/nodes.py), the diagnosis
# itself (pipeline.py). Notes on a dump that worked (target-resumed, dumped-nonblocking) too.
# What a process's stack was read from (Process.source): a dumper's format or a pasted form.
StackSource = Literal["py-spy-text", "py-spy-text-0.1", "py-spy-json", "ray-stack", "stacks-v1", "node-stacks-v1",
                      "node-dump", "faulthandler", "traceback", "frames", "thread-dump", "gdb", "eu-stack", "lldb",
                      "torch-mismatch", "collective-facts"]
ErrorKind = Literal[
    "pyspy-missing", "permission-denied", "process-exited", "not-python", "dump-timeout", "bad-output",
    "pyspy-failed", "uninterruptible", "target-resumed", "dumped-nonblocking",
    "command-not-found", "command-timeout", "command-failed-to-start", "locks-truncated",
    "node-dead", "node-unknown", "not-scheduled", "helper-crashed", "helper-failed", "helper-error", "version-mismatch",
    "targets-capped", "deadline", "state-api-down", "socket-peers-failed",
]
ERROR_KINDS: frozenset[str] = frozenset(get_args(ErrorKind))


def error_kind(value: object) -> ErrorKind | None:
    """A kind read from a node's answer or a saved folder, if it is one (tests keep the node
    side's constants inside ErrorKind)."""
    return cast(ErrorKind, value) if value in ERROR_KINDS else None

# Ray sets the process title of a worker to `ray::<Class>.<method>` (actor running a method),
# `ray::<Class>` (idle actor), `ray::<task_name>` (task) or `ray::IDLE` (pooled worker).
_RAY_TITLE = re.compile(r"^ray::(?P<rest>[^\s]+)")


class ProcessRef(tuple[str | None, int | None]):
    """Who a process is across the cluster. PIDs repeat across machines and pods, so a process is
    known by its node and its pid together: the one identity a dump target, a dumped process, its
    per-process evidence and its graph node share (a plain `(node_id, pid)` tuple compares equal).

    A plain tuple subclass, not a `typing.NamedTuple`: this module travels to the nodes by value
    with Ray's cloudpickle, and the one bundled with Ray 2.9 cannot rebuild a NamedTuple class
    there (KeyError: '__module__').
    """

    __slots__ = ()

    def __new__(cls, node_id: str | None, pid: int | None) -> ProcessRef:
        return super().__new__(cls, (node_id, pid))

    def __getnewargs__(self) -> tuple[str | None, int | None]:
        return self[0], self[1]

    def __repr__(self) -> str:
        return f"ProcessRef(node_id={self[0]!r}, pid={self[1]!r})"

    @property
    def node_id(self) -> str | None:
        return self[0]

    @property
    def pid(self) -> int | None:
        return self[1]

    @property
    def key(self) -> str:
        """The process's key in the wait-for graph."""
        return f"proc:{self.node_id}:{self.pid}"


@dataclass
class Frame:
    """One stack frame; `function` is class-qualified when the dumper knows the class."""

    function: str
    file: str = ""
    line: int | None = None
    native: bool = False
    locals: dict[str, str] | None = None
    code: str | None = None  # the source line, read on the process's node when available
    context: list[str] | None = None  # numbered lines around it, for the job's innermost frame
    # What the frame's locals say, without their data (debug_hang/facts.py): identities of the
    # objects it works on (`self`: `Svc@0x7f..`), numbers, lengths, ObjectRef ids. None when the
    # dump had no locals.
    facts: Facts | None = None
    # Read from the job's source on the node (probe/setters.py), None when not read: for a frame
    # waiting on `self.X.wait()`, the functions that set X (`Gate.open:32`); for a job frame, the
    # Ray calls its function makes after its current line (`open:49` for `gate.open.remote()`).
    setters: list[str] | None = None
    calls_after: list[str] | None = None

    @property
    def short_file(self) -> str:
        """The file path from the package root on (`ray/_private/worker.py`), as py-spy shows it."""
        return short_path(self.file)

    @property
    def name(self) -> str:
        """The function without its class: `join` for `Thread.join` (py-spy 0.3.14, tracebacks
        and faulthandler print only this; py-spy 0.4 qualifies it)."""
        return self.function.rsplit(".", 1)[-1]


@dataclass
class Thread:
    """One thread; `frames` are innermost first, as every dumper prints them."""

    thread_id: str | None = None
    os_thread_id: int | None = None
    name: str | None = None
    active: bool | None = None
    owns_gil: bool | None = None
    frames: list[Frame] = field(default_factory=list)

    @property
    def idle(self) -> bool | None:
        return None if self.active is None else not self.active


@dataclass
class Process:
    """One process and what is known about its place in the Ray job."""

    pid: int | None = None
    title: str | None = None
    python: str | None = None
    threads: list[Thread] = field(default_factory=list)
    node_id: str | None = None
    node_ip: str | None = None
    # Ray identity, filled by the collector from the State API (None when unknown).
    role: str | None = None  # driver | actor | task | child | worker
    actor_id: str | None = None
    actor_class: str | None = None
    actor_name: str | None = None
    task_id: str | None = None
    task_name: str | None = None
    job_id: str | None = None
    rank: int | None = None
    parent_pid: int | None = None
    sample: int = 0  # index of the sample when a process was dumped several times
    source: str | None = None  # format the stack came from: py-spy-json, py-spy-text, ...
    error: str | None = None  # set when the dump failed; `threads` is then empty
    # What a TORCH_DISTRIBUTED_DEBUG=DETAIL mismatch message says this rank was running, read
    # from the message, not a stack: {"op", "sequence", "shapes", "dtypes", "reported_by", ...}.
    collective: dict[str, Any] | None = None
    # What the running method of an actor with no job frame (an async call suspended in `await`)
    # awaits, read from its class's source on the node (probe/setters.py `awaited_in`):
    # {"method", "file", "line", "awaits": ["self.X"], "setters": ["Cls.m:line"]}.
    awaiting: dict[str, Any] | None = None
    # A Ray Serve replica's deployment class, read on its node: the awaits of `.remote(` calls in its
    # methods (probe/setters.py `remote_awaits`): [{"method", "file", "line", "code"}]. A request
    # awaiting a handle call shows no frame; these are the lines it can be awaiting at.
    remote_awaits: list[dict[str, Any]] | None = None
    # When `awaiting` found nothing: where that method's source first awaits, followed into the
    # methods of its class it awaits (probe/setters.py `await_site`): {"method", "file", "line",
    # "code", "via"}. Its first await, not a reading of where the coroutine is suspended.
    await_at: dict[str, Any] | None = None

    @property
    def title_parts(self) -> tuple[str | None, str | None]:
        """(actor class or task name, method) from a `ray::...` title; (None, None) otherwise."""
        return split_ray_title(self.title)

    @property
    def ref(self) -> ProcessRef:
        return ProcessRef(self.node_id, self.pid)

    @property
    def label(self) -> str:
        """A short human name: `Consumer(pid 123)`, `rank 2 (pid 9)`, `pid 77`."""
        name = self.actor_class or self.task_name or ("driver" if self.role == "driver" else None)
        if name is None:
            cls, meth = self.title_parts
            name = cls if meth is None else f"{cls}.{meth}"
        if self.rank is not None:
            name = f"{name or 'rank'}[rank {self.rank}]"
        return f"{name} (pid {self.pid})" if name else f"pid {self.pid}"


def split_ray_title(title: str | None) -> tuple[str | None, str | None]:
    """Split a Ray worker title: `ray::Consumer.consume` → ("Consumer", "consume")."""
    if not title:
        return None, None
    match = _RAY_TITLE.match(title.strip())
    if not match:
        return None, None
    rest = match.group("rest")
    if rest == "IDLE":
        return None, None
    head, _, tail = rest.partition(".")
    return head, (tail or None)


def short_path(path: str) -> str:
    """Shorten a file path the way py-spy does: from the site-packages/ or lib/pythonX.Y/ root."""
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    match = re.search(r"/lib/python\d+\.\d+/(.+)$", path)
    if match:
        return match.group(1)
    pkg = re.search(r"/_ray_pkg_[0-9a-f]+/(.+)$", path)
    if pkg:
        return pkg.group(1)
    return path


def process_to_dict(proc: Process) -> dict[str, Any]:
    """The JSON form of one process (fields with value None are kept: unknown is null); the
    same as `dataclasses.asdict`, built directly (asdict's deep copies cost 3 s on 20k processes)."""
    out: dict[str, Any] = {}
    for name in _PROCESS_FIELDS:
        if name == "threads":
            out[name] = [_thread_to_dict(t) for t in proc.threads]
        else:
            value = getattr(proc, name)
            out[name] = dict(value) if isinstance(value, dict) else value
    return out


def _thread_to_dict(t: Thread) -> dict[str, Any]:
    return {"thread_id": t.thread_id, "os_thread_id": t.os_thread_id, "name": t.name,
            "active": t.active, "owns_gil": t.owns_gil, "frames": [_frame_to_dict(f) for f in t.frames]}


def _frame_to_dict(f: Frame) -> dict[str, Any]:
    return {"function": f.function, "file": f.file, "line": f.line, "native": f.native,
            "locals": None if f.locals is None else dict(f.locals), "code": f.code,
            "context": None if f.context is None else list(f.context),
            "facts": None if f.facts is None else dict(f.facts),
            "setters": None if f.setters is None else list(f.setters),
            "calls_after": None if f.calls_after is None else list(f.calls_after)}


def process_from_dict(data: dict[str, Any]) -> Process:
    """Inverse of `process_to_dict`; unknown keys are ignored so newer files still load."""
    threads = [
        Thread(
            thread_id=None if t.get("thread_id") is None else str(t.get("thread_id")),
            os_thread_id=t.get("os_thread_id"),
            name=t.get("name"),
            active=t.get("active"),
            owns_gil=t.get("owns_gil"),
            frames=[
                Frame(
                    function=str(f.get("function", "?")),
                    file=str(f.get("file") or ""),
                    line=f.get("line"),
                    native=bool(f.get("native", False)),
                    locals=f.get("locals"),
                    code=f.get("code"),
                    context=f.get("context"),
                    facts=_facts(f.get("facts")),
                    setters=_names(f.get("setters")),
                    calls_after=_names(f.get("calls_after")),
                )
                for f in t.get("frames") or []
            ],
        )
        for t in data.get("threads") or []
    ]
    known = {k: v for k, v in data.items() if k in Process.__dataclass_fields__ and k != "threads"}
    return Process(threads=threads, **known)


def _names(raw: Any) -> list[str] | None:
    """A saved list of names (a frame's setters or later calls): its strings only."""
    return [str(v) for v in raw if isinstance(v, str)] if isinstance(raw, list) else None


def _facts(raw: Any) -> Facts | None:
    """A frame's facts as saved: only str/int/float values (a newer or edited file's others dropped)."""
    if not isinstance(raw, dict):
        return None
    return {str(k): v for k, v in raw.items() if isinstance(v, (str, int, float))}


_PROCESS_FIELDS = [f.name for f in fields(Process)]


def stacks_to_dict(processes: list[Process], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The versioned document `parse_stacks.py` prints: {"schema", "meta", "processes"}."""
    return {
        "schema": STACKS_SCHEMA,
        "meta": meta or {},
        "processes": [process_to_dict(p) for p in processes],
    }


def stacks_from_dict(doc: dict[str, Any]) -> list[Process]:
    """Read a `debug-hang/stacks/v1` document; raises ValueError on another schema."""
    schema = doc.get("schema")
    if schema != STACKS_SCHEMA:
        raise ValueError(f"expected schema {STACKS_SCHEMA!r}, got {schema!r}")
    return [process_from_dict(p) for p in doc.get("processes") or []]


@dataclass
class CollectionError:
    """Something that could not be read: which node and process, what went wrong, of what kind."""

    error: str
    node_id: str | None = None
    pid: int | None = None
    kind: ErrorKind | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "pid": self.pid, "error": self.error, "kind": self.kind}

    @classmethod
    def from_dict(cls, raw: dict[str, Any], node_id: str | None = None) -> CollectionError:
        """From a probe's or a saved folder's record; `node_id` fills in what a node-side record lacks."""
        pid = raw.get("pid")
        return cls(error=str(raw.get("error")), node_id=raw.get("node_id") or node_id,
                   pid=int(pid) if isinstance(pid, int) or (isinstance(pid, str) and pid.isdigit()) else None,
                   kind=error_kind(raw.get("kind")))


@dataclass
class Collection:
    """Stacks of every sample, per-process evidence, and what went wrong."""

    processes: list[Process] = field(default_factory=list)
    # Per-process evidence read on its node (title, ppid, child_of, env, cpu_percent), keyed by
    # (node_id, pid): PIDs repeat across machines and pods.
    info: dict[ProcessRef, dict[str, Any]] = field(default_factory=dict)
    errors: list[CollectionError] = field(default_factory=list)
    nodes: int = 0
    targets: int = 0
    seconds: float = 0.0
    paths: dict[str, str] = field(default_factory=dict)  # node_id -> "local" | "ray-task"
    probe_seconds: dict[str, float] = field(default_factory=dict)  # node_id -> its probe's time there
    # PyTorch Flight Recorder dump files read on each node: [{"node_id", "dumps": [{"path", "rank",
    # "format", "size", "mtime", "data_b64"}], "skipped", "pipes", "prefixes"}] (probe/flight_recorder.py).
    flight_recorder: list[dict[str, Any]] = field(default_factory=list)
    # Ray Serve's counters read on each node: {node_id: {"samples": [{name, labels, value}],
    # "read_at", "error"?}} (probe/libraries.py); empty when Serve does not run.
    library_metrics: dict[str, dict[str, Any]] = field(default_factory=dict)

    def info_of(self, proc: Process) -> dict[str, Any]:
        """The node-side evidence of one process ({} when none was read)."""
        return self.info.get(proc.ref, {})

    def info_to_json(self) -> list[dict[str, Any]]:
        return [{"pid": pid, **value} for (_, pid), value in self.info.items()]

    @staticmethod
    def info_from_json(raw: Any) -> dict[ProcessRef, dict[str, Any]]:
        """Read `info_to_json` output; also the older {pid: {...}} form of early recordings."""
        rows = [{"pid": int(k), **v} for k, v in raw.items()] if isinstance(raw, dict) else list(raw or [])
        return {ProcessRef(row.get("node_id"), int(row["pid"])): {k: v for k, v in row.items() if k != "pid"}
                for row in rows}

    def latest(self) -> list[Process]:
        """The last sample of each process."""
        last: dict[ProcessRef, Process] = {}
        for proc in self.processes:
            key = proc.ref
            if key not in last or proc.sample >= last[key].sample:
                last[key] = proc
        return list(last.values())


@dataclass
class NodeEvidence:
    """What was found for one graph node."""

    logs: dict[str, str] = field(default_factory=dict)  # "err"/"out" -> full fetched text
    highlights: list[str] = field(default_factory=list)  # the lines worth showing
    history: list[str] = field(default_factory=list)  # recent finished/failed tasks
    errors: list[str] = field(default_factory=list)


@dataclass
class Evidence:
    per_node: dict[str, NodeEvidence] = field(default_factory=dict)
    driver_log: str = ""
    driver_highlights: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
