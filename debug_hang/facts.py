"""Per-frame facts: what a frame's locals say about the objects it works on, without their data.

`py-spy dump --locals` prints every argument and local of every frame. Locals can hold data and
secrets, so they are written only when the user asks (--locals); what the analysis needs is kept
as *facts*, small and safe:

| fact | value | from |
|---|---|---|
| `name` | `Event@0x7fc8a1b2c3d0` (an identity: the object's type and address) | `<Event at 0x7fc8a1b2c3d0>` |
| `name` | `[Future@0x7f01, Future@0x7f02, ...]` (the identities py-spy shows of a list or tuple) | `[<Future at 0x7f01>, ...]` |
| `name` | `196`, `0.5`, `True`, `None` (a number, a flag, no value) | the repr |
| `len(name)` | `4096` (the length of a str, bytes, list, tuple, dict, set or deque) | the object's memory, on its node |
| `ids(name)` | `<56 hex>,<56 hex>` (the ids of the ObjectRefs held: an ObjectRef or a list of them) | the object's memory, on its node |
| `loopback(host)` | `True` (a connect frame's `host` is a loopback address: `127.0.0.1`, `::1`, `localhost`) | the repr of `host` |

Strings, byte strings and containers of values are never kept (their length is). One address
names one live object in one process: two frames of one process that show the same identity work
on the same object (the `self` of two methods, the Event one thread waits on and another holds).
Facts read from the object's memory (`len(...)`, `ids(...)`) are added on the node
(probe/objmem.py); the rest is read from the repr alone, so pasted `py-spy dump --locals` text
gives the same identities.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

FactValue = str | int | float
Facts = dict[str, FactValue]

MAX_FACTS = 32  # per frame: the locals of a big function stay a few lines
MAX_LISTED = 8  # identities kept of one list or tuple
# py-spy writes an object it does not format as `<type at 0xADDR>`.
_IDENTITY = re.compile(r"^<(?P<type>[A-Za-z_][\w.]{0,99}) at 0x(?P<addr>[0-9a-fA-F]{1,16})>$")
_IDENTITY_IN = re.compile(r"<([A-Za-z_][\w.]{0,99}) at 0x([0-9a-fA-F]{1,16})>")
# A local's name as py-spy prints it: an identifier, or `.0` (a comprehension's iterator).
NAME = re.compile(r"^[A-Za-z_.][\w.]{0,63}$")
_INT = re.compile(r"^-?\d{1,19}$")
_FLOAT = re.compile(r"^-?(\d+\.\d*|\.\d+|\d+)(e[-+]?\d{1,3})?$")  # finite floats only (JSON has no nan)
_FACT_IDENTITY = re.compile(r"^(?P<type>[A-Za-z_][\w.]{0,99})@0x(?P<addr>[0-9a-f]{1,16})$")


def identity(type_name: str, address: int) -> str:
    """The identity fact of one object: `Event@0x7fc8a1b2c3d0`."""
    return f"{type_name}@{address:#x}"


def reduce_repr(text: str) -> FactValue | None:
    """The fact a local's repr gives, or None when it would carry data (text, bytes, values)."""
    text = text.strip()
    head = text[:1]
    if head == "<":
        match = _IDENTITY.match(text)
        return identity(match.group("type"), int(match.group("addr"), 16)) if match else None
    if head in "-0123456789." and head:
        if _INT.match(text):
            return int(text)
        number = float(text) if _FLOAT.match(text.lower()) else None
        return number if number is not None and abs(number) < 1e300 else None
    if head in "TFN":
        return _WORDS.get(text)
    if head in "[(" and text.endswith(("]", ")")):
        return _listed_identities(text)
    return None


_WORDS: dict[str, FactValue] = {"True": True, "False": False, "None": "None"}


def _listed_identities(text: str) -> str | None:
    """`[<A at 0x1>, <B at 0x2>, ...]` → `[A@0x1, B@0x2, ...]`; None if anything else is listed."""
    inner = text[1:-1].strip().rstrip(",").strip()
    if not inner:
        return None
    items = [item.strip() for item in _split_top(inner)]
    found: list[str] = []
    cut = False
    for item in items:
        if item in ("...", "…"):
            cut = True
            continue
        match = _IDENTITY.match(item)
        if not match:
            return None
        found.append(identity(match.group("type"), int(match.group("addr"), 16)))
    if not found:
        return None
    shown = found[:MAX_LISTED]
    cut = cut or len(found) > MAX_LISTED
    return "[" + ", ".join(shown) + (", ...]" if cut else "]")


def _split_top(text: str) -> list[str]:
    """Split on the commas outside brackets (an identity holds no comma)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[(<{":
            depth += 1
        elif ch in "])>}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def reduce_locals(local_reprs: Mapping[str, str]) -> Facts:
    """Facts from a frame's locals as py-spy printed them ({name: repr})."""
    facts: Facts = {}
    for name, text in local_reprs.items():
        if len(facts) >= MAX_FACTS:
            break
        if not NAME.match(name):
            continue
        value = reduce_repr(str(text))
        if value is not None:
            facts[name] = value
    return facts


# A frame that opens a connection (`socket.create_connection`, a job's `connect(host, port)`).
# A frame that reads a socket or a stream over one (socket.recv*, a job line calling `.recv(`,
# http.client's response reads): the probe reads that connection's traffic (probe/tcp_info.py).
SOCKET_READ_FRAME = re.compile(r"\b(recv\w*|readinto|read|_read_status|begin|getresponse|readline)\b")
CONNECT_FRAME = re.compile(r"(^|\.)(create_connection|connect|connect_ex)$")
LOOPBACK_FACT = "loopback(host)"
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


_ADDRESS = re.compile(r"""^\(\s*(?P<q>['"])(?P<host>[^'"]{1,255})(?P=q)\s*,\s*(?P<port>\d{1,5})\s*[,)]""")


def add_loopback_fact(facts: Facts, function: str, local_reprs: Mapping[str, str]) -> None:
    """`loopback(host)` for a connect frame whose `host` local is a string: whether it names this
    host's loopback (the host string itself is never kept). A frame caught before it unpacks its
    `address` argument (`create_connection(("127.0.0.1", 5000))` at its first lines: no `host` or
    `port` local yet) is read from that tuple: its `port`, and whether its host is loopback."""
    if CONNECT_FRAME.search(function) and "host" not in local_reprs and "port" not in facts:
        found = _ADDRESS.match(str(local_reprs.get("address") or ""))
        if found and 0 < int(found["port"]) < 65536 and len(facts) + 2 <= MAX_FACTS:
            facts["port"] = int(found["port"])
            facts[LOOPBACK_FACT] = is_loopback(found["host"])
        return
    text = str(local_reprs.get("host") or "")
    if not CONNECT_FRAME.search(function) or len(text) < 2 or text[0] not in "'\"" or text[-1] != text[0] \
            or len(facts) >= MAX_FACTS:
        return
    facts[LOOPBACK_FACT] = is_loopback(text[1:-1])


def is_loopback(host: str) -> bool:
    """The host names this host's loopback (127.0.0.0/8, ::1, localhost)."""
    host = host.strip().lower().strip("[]")
    if host in _LOOPBACK_NAMES:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def parse_identity(value: object) -> tuple[str, int] | None:
    """(type, address) of an identity fact, None for any other value."""
    if not isinstance(value, str):
        return None
    match = _FACT_IDENTITY.match(value)
    return (match.group("type"), int(match.group("addr"), 16)) if match else None


def identities_in(value: object) -> list[str]:
    """The identities a fact holds: one, or those listed (`[A@0x1, B@0x2, ...]`)."""
    if not isinstance(value, str):
        return []
    if value.startswith("["):
        return [v.strip() for v in value.strip("[]").split(",") if parse_identity(v.strip())]
    return [value] if parse_identity(value) else []


def type_of(value: object) -> str | None:
    """The type name of an identity fact (`Event`, `ray.ObjectRef`)."""
    parsed = parse_identity(value)
    return parsed[0] if parsed else None


def identities_of_text(text: str) -> list[tuple[str, int]]:
    """(type, address) of every `<type at 0xADDR>` in a repr (a list py-spy shows in part)."""
    return [(m.group(1), int(m.group(2), 16)) for m in _IDENTITY_IN.finditer(text)]


def object_ids(facts: Mapping[str, FactValue] | None) -> list[str]:
    """Every Ray object id a frame's facts hold (`ids(name)` facts), in order, each once."""
    found: list[str] = []
    for key, value in (facts or {}).items():
        if key.startswith("ids(") and isinstance(value, str):
            for item in value.split(","):
                if item and item not in found:
                    found.append(item)
    return found
