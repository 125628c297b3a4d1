"""Read PyTorch Flight Recorder dumps safely: a pickle is never loaded with plain `pickle.load`.

A dump is what `torch._C._distributed_c10d._dump_fr_trace()` returns (and NCCL's watchdog writes
to `<prefix><rank>`): a pickle of plain dicts, lists, tuples, strings, numbers, booleans and None;
`_dump_fr_trace_json()` gives the same without the Python stacks. `SafeUnpickler` admits exactly
those types: `find_class` refuses every global, so a pickle that would build any object (and run
code through `__reduce__`) is refused with `UnsafeDumpError` before anything runs. The file's rank
is the number at the end of its name (torch's `<prefix><rank>` convention).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from debug_hang.errors import BadInputError

# Files bigger than this are not read (a 2,000-entry dump with stacks is a few MB).
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_FILES = 4096
_RANK_NAME = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d{1,7})(?P<json>\.json)?$")


class UnsafeDumpError(BadInputError):
    """The pickle needs more than plain containers and scalars: refused, nothing was executed."""


class SafeUnpickler(pickle.Unpickler):
    """Plain containers and scalars only; every global (class, function) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafeDumpError(f"refused: the pickle asks for {module[:80]}.{name[:80]}; a Flight Recorder dump holds "
                              "only plain dicts, lists, strings and numbers, so this file is not one (or was tampered "
                              "with). Nothing in it was executed.")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeDumpError("refused: the pickle uses persistent ids, which a Flight Recorder dump never does. "
                              "Nothing in it was executed.")


def safe_loads(data: bytes) -> Any:
    """Unpickle `data` admitting only builtin containers and scalars."""
    try:
        return SafeUnpickler(io.BytesIO(data)).load()
    except UnsafeDumpError:
        raise
    except Exception as exc:  # noqa: BLE001 - any malformed pickle is bad input, not a crash
        raise BadInputError(f"not a readable pickle: {type(exc).__name__}: {str(exc)[:200]}") from None


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


def _text(value: Any, limit: int = 300) -> str:
    return value[:limit] if isinstance(value, str) else ("" if value is None else str(value)[:limit])


def _frames(raw: Any) -> list[FRFrame]:
    if not isinstance(raw, list):
        return []
    out = []
    for f in raw[:64]:
        if isinstance(f, dict):
            out.append(FRFrame(name=_text(f.get("name"), 200), file=_text(f.get("filename"), 400), line=_int(f.get("line")) or 0))
    return out


def _entry(raw: Any) -> FREntry | None:
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
        input_sizes=raw.get("input_sizes") if isinstance(raw.get("input_sizes"), list) else [],
        output_sizes=raw.get("output_sizes") if isinstance(raw.get("output_sizes"), list) else [],
        state=_text(raw.get("state"), 40), retired=raw.get("retired") if isinstance(raw.get("retired"), bool) else None,
        is_p2p=bool(raw.get("is_p2p")), time_created_ns=_int(raw.get("time_created_ns")), frames=_frames(raw.get("frames")))


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
    entries = [e for e in (_entry(r) for r in obj["entries"]) if e is not None]
    return FRDump(rank=rank, source=source, format=fmt, version=_text(obj.get("version"), 40), pg_config=config,
                  pg_status=status, entries=entries)


def parse_ranks(value: Any) -> list[int]:
    """pg_config's ranks ('[0, 1, 2]' as text, or a list) as ints; anything else as []. Never eval'd."""
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)][:100_000]
    if isinstance(value, str) and re.fullmatch(r"\[\s*(\d+\s*(,\s*\d+\s*)*)?\]", value.strip()[:1_000_000]):
        return [int(x) for x in re.findall(r"\d+", value)]
    return []


def load_bytes(data: bytes, rank: int, source: str, fmt: str | None = None) -> FRDump:
    """One dump from its bytes: JSON when it is JSON, else the restricted unpickler."""
    kind = fmt or ("json" if data[:1] in (b"{", b" ", b"\n") else "pickle")
    if kind == "json":
        try:
            obj = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise BadInputError(f"{source}: not valid JSON: {str(exc)[:200]}") from None
    else:
        try:
            obj = safe_loads(data)
        except UnsafeDumpError as exc:
            raise UnsafeDumpError(f"{source}: {exc}") from None
        except BadInputError as exc:
            raise BadInputError(f"{source}: {exc}") from None
    return dump_from_obj(obj, rank, source, kind)


def rank_of_name(name: str) -> tuple[str, int, str] | None:
    """(prefix, rank, format) from a dump file name `<prefix><rank>[.json]`, else None."""
    m = _RANK_NAME.match(name)
    if not m or name.endswith(".pipe"):
        return None
    return m.group("prefix"), int(m.group("rank")), "json" if m.group("json") else "pickle"


@dataclass
class ReadResult:
    dumps: list[FRDump]
    errors: list[str]  # one line per file refused or unreadable


def read_dir(path: Path, prefix: str | None = None) -> ReadResult:
    """Every dump under `path` (a folder, searched one level deep, or one file).

    Files are `<prefix><rank>` or `<prefix><rank>.json`; with both, the pickle wins (it holds the
    stacks) unless it cannot be read. Unsafe or unreadable files are listed in `errors`.
    """
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(p for p in [*path.iterdir(), *(q for d in path.iterdir() if d.is_dir() for q in d.iterdir())]
                       if p.is_file())[:MAX_FILES]
    else:
        raise BadInputError(f"{path}: no such file or folder")
    by_rank: dict[tuple[str, int], list[tuple[Path, str]]] = {}
    for f in files:
        parsed = rank_of_name(f.name)
        if parsed is None or (prefix is not None and parsed[0] != prefix):
            continue
        by_rank.setdefault((str(f.parent), parsed[1]), []).append((f, parsed[2]))
    dumps: list[FRDump] = []
    errors: list[str] = []
    for (_, rank), candidates in sorted(by_rank.items(), key=lambda kv: kv[0][1]):
        candidates.sort(key=lambda c: c[1] != "pickle")
        for f, fmt in candidates:
            try:
                size = f.stat().st_size
                if size > MAX_FILE_BYTES:
                    raise BadInputError(f"{f.name}: {size} bytes, over the {MAX_FILE_BYTES}-byte bound")
                dump = load_bytes(f.read_bytes(), rank, f.name, fmt)
                dump.mtime = f.stat().st_mtime
                dumps.append(dump)
                break
            except BadInputError as exc:
                errors.append(str(exc))
            except OSError as exc:
                errors.append(f"{f.name}: cannot read: {exc.strerror or exc}")
    return ReadResult(dumps=dumps, errors=errors)


def from_probe(items: list[dict[str, Any]], node_id: str | None = None) -> ReadResult:
    """Dumps as the node probe returns them ({"path", "rank", "format", "data_b64", "mtime"})."""
    import base64

    best: dict[int, list[dict[str, Any]]] = {}
    for item in items:
        if isinstance(item.get("rank"), int):
            best.setdefault(item["rank"], []).append(item)
    dumps: list[FRDump] = []
    errors: list[str] = []
    for rank, candidates in sorted(best.items()):
        candidates.sort(key=lambda c: c.get("format") != "pickle")
        for item in candidates:
            source = os.path.basename(str(item.get("path", f"rank{rank}")))
            try:
                data = base64.b64decode(str(item.get("data_b64", "")), validate=True)
                dump = load_bytes(data, rank, source, str(item.get("format") or "pickle"))
            except BadInputError as exc:
                errors.append(str(exc))
                continue
            except ValueError:
                errors.append(f"{source}: damaged in transfer")
                continue
            dump.node_id = node_id
            dump.mtime = item.get("mtime") if isinstance(item.get("mtime"), int | float) else None
            dumps.append(dump)
            break
    return ReadResult(dumps=dumps, errors=errors)
