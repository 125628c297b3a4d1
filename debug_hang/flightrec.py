"""PyTorch Flight Recorder dumps as data (shared): one rank's dump, its process-group status and entries.

`dump_from_obj` turns what a dump holds (plain dicts/lists, from the restricted unpickler or JSON in
`parse.flight_recorder`) into these dataclasses, checking types and cutting long text; pg_config
ranks stored as text are read as integer lists by a regular expression, never evaluated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from debug_hang.errors import BadInputError


@dataclass
class FRFrame:
    name: str
    file: str
    line: int


@dataclass
class FREntry:
    """One collective (or p2p op) as one rank recorded it."""

    record_id: int
    pg_name: str  # the process group's uid ('0' is the default group)
    pg_desc: str  # 'default_pg', or the desc given to new_group ('undefined' when none)
    seq: int  # collective_seq_id (p2p ops: 0 here, their own p2p_seq_id)
    p2p_seq: int
    op: str  # profiling_name, e.g. 'nccl:all_reduce', 'gloo:broadcast'
    input_sizes: list[Any]
    output_sizes: list[Any]
    state: str  # scheduled / started / completed
    retired: bool | None
    is_p2p: bool
    time_created_ns: int | None
    frames: list[FRFrame] = field(default_factory=list)

    @property
    def op_short(self) -> str:
        return self.op.split(":", 1)[-1]


@dataclass
class PGStatus:
    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None


@dataclass
class FRDump:
    rank: int
    source: str  # file name (or path) it came from
    format: str  # 'pickle' or 'json'
    version: str
    pg_config: dict[str, dict[str, Any]]
    pg_status: dict[str, PGStatus]
    entries: list[FREntry]
    node_id: str | None = None
    mtime: float | None = None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,19}", value.strip()):
        return int(value)
    return None


FRAMES_KEPT = 64  # entries (the most recent) whose Python stacks are kept
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _text(value: Any, limit: int = 300) -> str:
    """Text from a dump, cut and without control characters (it reaches terminals and Markdown)."""
    text = value[:limit] if isinstance(value, str) else ("" if value is None else str(value)[:limit])
    return _CONTROL.sub("?", text)


def _frames(raw: Any) -> list[FRFrame]:
    if not isinstance(raw, list):
        return []
    out = []
    for f in raw[:64]:
        if isinstance(f, dict):
            out.append(FRFrame(name=_text(f.get("name"), 200), file=_text(f.get("filename"), 400), line=_int(f.get("line")) or 0))
    return out


def _sizes(raw: Any) -> list[Any]:
    """Tensor shapes: lists of lists of ints (anything else dropped)."""
    if not isinstance(raw, list):
        return []
    return [[d for d in shape if isinstance(d, int) and not isinstance(d, bool)][:16] for shape in raw[:64] if isinstance(shape, list)]


def _entry(raw: Any, with_frames: bool = True) -> FREntry | None:
    if not isinstance(raw, dict):
        return None
    pg = raw.get("process_group")
    pg_name, pg_desc = (_text(pg[0], 200), _text(pg[1], 200)) if isinstance(pg, list | tuple) and len(pg) == 2 else (
        _text(raw.get("pg_id")), "")
    seq = _int(raw.get("collective_seq_id"))
    if seq is None:
        return None
    return FREntry(
        record_id=_int(raw.get("record_id")) or 0, pg_name=pg_name, pg_desc=pg_desc, seq=seq,
        p2p_seq=_int(raw.get("p2p_seq_id")) or 0, op=_text(raw.get("profiling_name"), 120),
        input_sizes=_sizes(raw.get("input_sizes")), output_sizes=_sizes(raw.get("output_sizes")),
        state=_text(raw.get("state"), 40), retired=raw.get("retired") if isinstance(raw.get("retired"), bool) else None,
        is_p2p=bool(raw.get("is_p2p")), time_created_ns=_int(raw.get("time_created_ns")),
        frames=_frames(raw.get("frames")) if with_frames else [])


def dump_from_obj(obj: Any, rank: int, source: str, fmt: str) -> FRDump:
    """Check and normalise an unpickled (or JSON) dump; BadInputError when it is not one."""
    if not isinstance(obj, dict) or "entries" not in obj or not isinstance(obj.get("entries"), list):
        raise BadInputError(f"{source}: not a Flight Recorder dump (no 'entries' list)")
    status: dict[str, PGStatus] = {}
    raw_status = obj.get("pg_status")
    if isinstance(raw_status, dict):
        for key, value in raw_status.items():
            if isinstance(value, dict):
                status[_text(key, 200)] = PGStatus(_int(value.get("last_enqueued_collective")),
                                                   _int(value.get("last_started_collective")),
                                                   _int(value.get("last_completed_collective")))
    config: dict[str, dict[str, Any]] = {}
    raw_config = obj.get("pg_config")
    if isinstance(raw_config, dict):
        for key, value in raw_config.items():
            if isinstance(value, dict):
                config[_text(key, 200)] = {"name": _text(value.get("name"), 200), "desc": _text(value.get("desc"), 200),
                                           "ranks": parse_ranks(value.get("ranks"))}
    raw_entries = obj["entries"]
    # Stacks are kept for the most recent entries and the last one of each group (what the analysis
    # shows); reading all 2,000 entries' stacks costs more than the rest of the dump together.
    last_of_group = {}
    for i, r in enumerate(raw_entries):
        if isinstance(r, dict):
            last_of_group[_text(str(r.get("process_group")), 400)] = i
    keep = set(last_of_group.values()) | set(range(max(0, len(raw_entries) - FRAMES_KEPT), len(raw_entries)))
    entries = [e for e in (_entry(r, i in keep) for i, r in enumerate(raw_entries)) if e is not None]
    return FRDump(rank=rank, source=source, format=fmt, version=_text(obj.get("version"), 40), pg_config=config,
                  pg_status=status, entries=entries)


def parse_ranks(value: Any) -> list[int]:
    """pg_config's ranks ('[0, 1, 2]' as text, or a list) as ints; anything else as []. Never eval'd."""
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)][:100_000]
    if isinstance(value, str) and re.fullmatch(r"\[\s*(\d+\s*(,\s*\d+\s*)*)?\]", value.strip()[:1_000_000]):
        return [int(x) for x in re.findall(r"\d+", value)]
    return []
