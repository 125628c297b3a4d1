"""Facts read from a dumped process's memory: container lengths and the ids of Ray ObjectRefs.

py-spy shows a list cut after ~128 characters and an ObjectRef as `<ray.ObjectRef at 0x..>`,
without its id. Both are a few bytes at a known address of the target: CPython's length fields
(offset 16 of a list, tuple, bytes, str, dict or deque; 24 of a set) and the 28-byte ObjectID
Ray's ObjectRef holds (the creating task's 24-byte TaskID, then the object's 4-byte index; Ray's
src/ray/design_docs/id_specification.md). They are read here, on the node, right after the dump,
through /proc/PID/mem: read-only, the target never paused, the same permission py-spy needs. A
value read from memory that does not have the expected shape is dropped, and an object id is
used by the analysis only when it names a task the State API knows.
"""

from __future__ import annotations

import os
import re
from typing import Any

from debug_hang.facts import MAX_FACTS, NAME, Facts, identities_of_text

# Per process and sample: a read of /proc/PID/mem costs ~0.1-0.4 ms on a loaded node.
MAX_READS = 128
MAX_REFS = 64  # ObjectRefs read of one list
OBJECT_ID_BYTES = 28
# Where the ObjectID sits in Ray's ObjectRef (PyObject header 16, Cython vtable 8, C++ hash 8),
# then the offsets tried when a Ray version lays it out otherwise.
OBJECT_ID_OFFSETS = (32, 24, 40, 48, 16)
_LEN_OFFSET = {"list": 16, "tuple": 16, "str": 16, "bytes": 16, "dict": 16, "collections.deque": 16,
               "set": 24, "frozenset": 24}
_MAX_LEN = 1 << 40
# Files of the Python runtime and installed packages: not the job's own code.
LIBRARY_FILE = re.compile(r"(/site-packages/|/dist-packages/|/lib/python\d+\.\d+/|^<frozen )")


class Memory:
    """Bounded reads of one process's memory (/proc/PID/mem), opened on first use."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.reads = 0
        self._fd: int | None = None
        self._failed = False

    def read(self, address: int, size: int) -> bytes | None:
        if self._failed or self.reads >= MAX_READS or address <= 0 or size <= 0:
            return None
        if self._fd is None:
            try:
                self._fd = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY)
            except OSError:
                self._failed = True
                return None
        self.reads += 1
        try:
            data = os.pread(self._fd, size, address)
        except (OSError, OverflowError, ValueError):
            return None
        return data if len(data) == size else None

    def word(self, address: int) -> int | None:
        data = self.read(address, 8)
        return int.from_bytes(data, "little") if data is not None else None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def add_memory_facts(facts: Facts, raw_locals: list[dict[str, Any]], memory: Memory, job_code: bool) -> None:
    """Add `ids(name)` facts for the ObjectRefs a frame holds and, in a frame of the job's own
    code (`job_code`: where a loop's state lives), `len(name)` facts for its containers."""
    for raw in raw_locals:
        name, text, address = raw.get("name"), str(raw.get("repr") or ""), raw.get("addr")
        if not isinstance(name, str) or not NAME.match(name) or not isinstance(address, int) or len(facts) >= MAX_FACTS:
            continue
        refs = "ObjectRef" in text
        if not (refs or job_code):
            continue
        kind = _container_kind(text)
        if kind is not None and job_code:
            length = _length(memory, address, kind)
            if length is not None:
                facts[f"len({name})"] = length
        ids = _object_ids(memory, address, text, kind) if refs else []
        if ids:
            facts[f"ids({name})"] = ",".join(ids)


def _container_kind(text: str) -> str | None:
    """The container type a repr shows (py-spy formats lists, tuples, dicts and strings inline)."""
    head = text[:1]
    if head == "[":
        return "list"
    if head == "(" and text.endswith(")"):
        return "tuple"
    if head == "{":
        return "dict"
    if head in ("\"", "'"):
        return "str"
    for kind in ("bytes", "set", "frozenset", "collections.deque"):
        if text.startswith(f"<{kind} at 0x"):
            return kind
    return None


def _length(memory: Memory, address: int, kind: str) -> int | None:
    value = memory.word(address + _LEN_OFFSET[kind])
    return value if value is not None and 0 <= value < _MAX_LEN else None


def _object_ids(memory: Memory, address: int, text: str, kind: str | None) -> list[str]:
    """The object ids of an ObjectRef, or of the ObjectRefs of a list or tuple."""
    shown = [(t, a) for t, a in identities_of_text(text) if t.endswith("ObjectRef")]
    if kind is None:
        found = object_id_at(memory, address) if text.startswith("<") and text.split(" ", 1)[0].endswith("ObjectRef") else None
        return [found] if found else []
    if kind not in ("list", "tuple") or not shown:
        return []
    size = _length(memory, address, kind)
    if size is None or size < len(shown):
        return []
    count = min(size, MAX_REFS)
    if kind == "list":
        items_at = memory.word(address + 24)
        if items_at is None:
            return []
    else:
        items_at = address + 24
    raw = memory.read(items_at, 8 * count)
    if raw is None:
        return []
    pointers = [int.from_bytes(raw[i:i + 8], "little") for i in range(0, len(raw), 8)]
    if [a for _t, a in shown] != pointers[:len(shown)]:
        return []  # not the list py-spy showed (freed and reused since the dump)
    ref_type = memory.word(shown[0][1] + 8)
    ids: list[str] = []
    for pointer in pointers:
        if memory.word(pointer + 8) != ref_type:
            continue  # not an ObjectRef (a list of mixed objects)
        found = object_id_at(memory, pointer)
        if found and found not in ids:
            ids.append(found)
    return ids


def object_id_at(memory: Memory, address: int) -> str | None:
    """The hex id of the ObjectRef at `address`, if its bytes have an ObjectID's shape."""
    data = memory.read(address, max(OBJECT_ID_OFFSETS) + OBJECT_ID_BYTES)
    if data is None:
        return None
    for offset in OBJECT_ID_OFFSETS:
        candidate = data[offset:offset + OBJECT_ID_BYTES]
        if plausible_object_id(candidate):
            return candidate.hex()
    return None


def plausible_object_id(data: bytes) -> bool:
    """An ObjectID's shape: a job number in the TaskID's last 4 bytes (job ids count up from 1)
    and a small index (1 .. 2^31: the task's returns, then its puts) after it."""
    if len(data) != OBJECT_ID_BYTES:
        return False
    job = int.from_bytes(data[20:24], "little")
    index = int.from_bytes(data[24:28], "little")
    return 0 < job < (1 << 24) and 0 < index < (1 << 31) and any(data[:8])
