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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from debug_hang.errors import BadInputError
from debug_hang.flightrec import FRDump, dump_from_obj

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


def read_saved(folder: Path) -> list[dict[str, Any]]:
    """The probe-shaped node entries of a diagnosis folder's `flight_recorder/` (see report/write.py); [] if none."""
    import base64

    index_path = folder / "index.json"
    if not index_path.is_file():
        return []
    nodes: list[dict[str, Any]] = []
    for node in json.loads(index_path.read_text()):
        dumps = []
        for item in node.get("dumps") or []:
            path = folder / os.path.basename(str(item.get("file", "")))
            if path.is_file() and path.stat().st_size <= MAX_FILE_BYTES:
                dumps.append({**item, "data_b64": base64.b64encode(path.read_bytes()).decode("ascii")})
        nodes.append({**node, "dumps": dumps})
    return nodes
