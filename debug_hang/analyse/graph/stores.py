"""Store waits: a rank stopped in a torch.distributed store's `wait`/`get` (a c10d key/value
store: TCPStore, FileStore, HashStore) waits for a key, not in a collective. Only the members of
its group could set that key; when every one of them waits on the waiter (in a collective it has
not joined) or has ended, nothing ever will."""

from __future__ import annotations

import re

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.model import GNode
from debug_hang.analyse.graph.sockets import socket_peers_of
from debug_hang.analyse.graph.threads import frame_text, reachable_from
from debug_hang.model import ProcessRef

# The key(s) a wait/get names in the job's line: `store.wait(["k1", f"k/{i}"])`, `store.get(f"k/{i}")`.
_WAITED = re.compile(r"([\w.\[\]]+)\.(?:wait|get|multi_get)\(\s*(\[[^\]]*\]|f?(['\"])[^'\"]*\3)")
_KEY = re.compile(r"f?(['\"])[^'\"]*\1")
# A set of a key on a store (the same receiver), in the source lines shown around the ranks' lines.
_SET = re.compile(r"([\w.\[\]]+)\.(?:set|compare_set|add)\(\s*(f?(['\"])[^'\"]*\3)")
_CONTEXT_LINE = re.compile(r"^\s*(\d+):\s?(.*)$")


def _waited(node: GNode) -> tuple[str, list[str]] | None:
    """The store (the receiver's expression) and the key expressions the waiting line names."""
    code = node.user_frame.code if node.user_frame is not None else None
    found = _WAITED.search(code or "")
    if found is None:
        return None
    return found.group(1), [k.group(0) for k in _KEY.finditer(found.group(2))]


def _sets(members: list[GNode], store: str) -> list[tuple[int, str]]:
    """The keys set on the same store in the job's source lines around the members' lines:
    [(line, key expression)], each once."""
    seen: dict[tuple[int, str], None] = {}
    for node in members:
        frame = node.user_frame
        for raw in (frame.context or []) if frame is not None else []:
            numbered = _CONTEXT_LINE.match(raw)
            if numbered is None:
                continue
            for found in _SET.finditer(numbered.group(2)):
                if found.group(1) == store:
                    seen[(int(numbered.group(1)), found.group(2))] = None
    return sorted(seen)


def _key_text(node: GNode, members: list[GNode]) -> str:
    """What the source shows of the key: the key waited for, and the keys set on that store."""
    waited = _waited(node)
    if waited is None:
        return ""
    store, keys = waited
    sets = _sets([node, *members], store)
    shown = ", ".join(f"`{k}`" for k in keys) or "its key"
    if not sets:
        return f"; it waits for {shown} on `{store}`"
    other = [(line, k) for line, k in sets if k not in keys]
    same = [(line, k) for line, k in sets if k in keys]
    text = f"; it waits for {shown} on `{store}`, and the source sets " + ", ".join(f"`{k}` (line {line})" for line, k in sets)
    if other and not same:
        text += ": a different key (the writer and the waiter spell it differently)"
    return text


def _group(b: Builder, node: GNode) -> list[GNode]:
    """The other processes of the waiter's group: the job's other actors of its class."""
    if not node.class_name:
        return []
    keys = {b.actor_node[a] for a, actor in b.actors.items()
            if actor.class_name == node.class_name and a in b.actor_node}
    return [b.g.nodes[k] for k in sorted(keys) if k != node.key]


def _outside_peers(b: Builder, node: GNode) -> list[str]:
    """The waiter's TCP peers on its node that are no process of the job (a TCPStore's server or
    another client may be one: it could set the key), each as its pid and title."""
    return [f"pid {p['pid']} `{str(p.get('title') or '')[:60]}`" for p in socket_peers_of(b, node.key)
            if b.by_pid.get(ProcessRef(node.node_id, p["pid"])) is None]


def _setters(b: Builder, node: GNode) -> list[GNode]:
    """Every other process of the job the graph holds (any of them may hold the store): its
    group's members first."""
    group = _group(b, node)
    rest = [n for n in b.g.nodes.values() if n.pid is not None and n.key != node.key and n not in group
            and n.kind in ("driver", "actor", "task", "process", "rank")]
    return group + rest


@graph_pass(after=("edges_collectives",), decides=("store-key-never-set",))
def mark_store_waits(b: Builder) -> None:
    """A rank in a store wait waits for the job's processes that could still set the key (its
    group's members, the other actors of its class, first): each that works or waits on something
    other than the waiter is followed; when every one waits on the waiter itself (in a collective
    the waiter has not joined, in ray.get on its call) or has ended, nothing will set it. A waiter
    with no member of its own is left as it is (who shares the store is not known)."""
    g = b.g
    for node in [n for n in g.nodes.values() if n.pattern == "store-wait"]:
        members = _group(b, node)
        if not members:
            continue  # no peer of its own: who shares the store is not known
        setters = _setters(b, node)
        waiting_on_it = [m for m in setters if node.key in reachable_from(g, m.key)]
        ended = [m for m in setters if m not in waiting_on_it and m.state in ("dead", "idle")]
        could = [m for m in setters if m not in waiting_on_it and m not in ended]
        where = frame_text(node.user_frame)
        outside = _outside_peers(b, node)
        if outside and not could:
            node.evidence.append(f"in a torch.distributed store wait at {where}; every process of the job waits on it or "
                                 "has ended, but it is connected by TCP to process(es) outside the job that could set "
                                 "the key: " + ", ".join(outside[:4]))
            continue
        if could:
            for m in could:
                role = "a member of its group" if m in members else "a process of the job"
                g.add_edge(node.key, m.key, "store-wait", f"waits at {where} for a key {m.name} (pid {m.pid}), "
                           f"{role} that waits on nothing it does, could still set")
            continue
        node.pattern = "store-key-never-set"
        parts = []
        if waiting_on_it:
            parts.append(", ".join(f"{m.name} (pid {m.pid})" for m in waiting_on_it[:6])
                         + " wait(s) on it (in a collective it has not joined, or on its call)")
        if ended:
            parts.append(", ".join(f"{m.name} (pid {m.pid}, {m.state})" for m in ended[:6]) + " ended or idle")
        node.evidence.append(f"in a torch.distributed store wait at {where}: only the job's processes could set the key "
                             f"(its group's members first), and {'; '.join(parts)}: none will" + _key_text(node, members))
