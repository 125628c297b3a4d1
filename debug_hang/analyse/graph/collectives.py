"""Collectives: ranks in a collective wait on the peers that are not in it, or on the odd rank
in another collective."""

from __future__ import annotations

import re

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.model import GNode, WaitGraph
from debug_hang.analyse.graph.rendezvous import mark_never_launched
from debug_hang.analyse.graph.sockets import ray_linked, socket_peers_of
from debug_hang.analyse.graph.threads import frame_text
from debug_hang.analyse.patterns import catalog
from debug_hang.model import ProcessRef


def _in_collective(node: GNode) -> bool:
    """True when the node waits for its peers (a collective, DDP's backward, a rendezvous)."""
    pattern = catalog().get(node.pattern or "")
    return pattern is not None and pattern.edge == "collective-peers"


def _collective_group(b: Builder) -> dict[str, list[str]]:
    """Ranks grouped by actor class: the processes that share a process group."""
    groups: dict[str, list[str]] = {}
    for node in b.g.nodes.values():
        if _in_collective(node) and node.class_name:
            groups.setdefault(node.class_name, [])
    for cls in groups:
        for actor_id, actor in b.actors.items():
            if actor.class_name == cls and actor_id in b.actor_node:
                groups[cls].append(b.actor_node[actor_id])
    return groups


@graph_pass(after=("mark_file_lock_holders",),
            decides=("peer-rank-dead", "collective-skipped", "collective-mismatch", "collective-incomplete",
                     "rank-never-launched"))
def edges_collectives(b: Builder) -> None:
    """Ranks in a collective wait on the peers that are not in it: dead ones first (a dead rank
    explains everything, and peers it took down are collateral), then idle or busy ones."""
    g = b.g
    for _cls, members in _collective_group(b).items():
        waiting = [k for k in members if _in_collective(g.nodes[k])]
        in_it = set(waiting)
        others = [k for k in members if k not in in_it]
        dead = [k for k in others if g.nodes[k].state == "dead"]
        for peer in others:
            node = g.nodes[peer]
            if node.state == "dead":
                node.pattern = "peer-rank-dead"
            elif node.state == "pending":
                # Never started: the waiting ranks wait for it to be scheduled (the pending actor
                # leads on to the resource it waits for).
                node.evidence.append("never started (actor not yet created): its peers wait for it "
                                     "to join the process group")
            elif dead and node.state == "idle":
                node.evidence.append("collateral: not in the collective since a dead peer broke it")
                continue
            elif node.state == "idle" or node.pattern in (None, "idle-worker"):
                node.pattern = "collective-skipped"
                node.evidence.append("not in any collective while its peers are")
            for w in waiting:
                frame = g.nodes[w].frame
                why = "has not started" if node.state == "pending" else "is not"
                g.add_edge(w, peer, g.nodes[w].pattern or "collective-wait",
                           f"in {frame.function if frame is not None else 'a collective'}; "
                           f"{node.name}{'' if node.rank is None else f' rank {node.rank}'} {why}")
        # Ranks in different collectives explain the hang themselves (a mismatch); a member outside
        # the job is looked for only when they all wait in the same one (Ray's own gRPC links a
        # Train controller to every rank too).
        if not others and waiting and _link_p2p(b, waiting):
            continue  # point-to-point ops pair by (source, destination), not by call order
        if not others and waiting and not (len(waiting) > 1 and _mark_mismatch(g, waiting)) \
                and not _link_members_by_socket(b, waiting, _missing_members(b, waiting)[1]) \
                and not mark_never_launched(b, waiting):
            _mark_incomplete(b, _cls, waiting)


# Blocking point-to-point ops (torch.distributed), by the torch frame's function: their direction.
_P2P_DIRECTION = {"send": "send", "send_object_list": "send", "recv": "recv", "recv_object_list": "recv"}
_P2P_PEER_ARG = {"send": ("dst", "group_dst"), "recv": ("src", "group_src")}
_PEER_IN_CODE = {"send": re.compile(r"\bdst\s*=\s*(\d+)\b"), "recv": re.compile(r"\bsrc\s*=\s*(\d+)\b")}


def _p2p_op(node: GNode) -> tuple[str, int | None] | None:
    """The blocking send or recv a rank is in and the peer rank it names, when its stack shows
    it: the torch frame's argument (`dst`/`src`, read with --locals), else a literal in the job's
    line (`dst=1`). None when the rank is in no point-to-point op."""
    frame = node.frame
    direction = _P2P_DIRECTION.get(frame.name) if frame is not None else None
    if direction is None or frame is None:
        return None
    for name in _P2P_PEER_ARG[direction]:
        value = (frame.locals or {}).get(name, "")
        if value.isdigit():
            return direction, int(value)
    code = node.user_frame.code if node.user_frame is not None else None
    found = _PEER_IN_CODE[direction].search(code or "")
    return direction, int(found.group(1)) if found else None


def _p2p_peers(b: Builder, waiting: list[str]) -> dict[str, tuple[str, str]] | None:
    """Each rank's op and the node of the peer it sends to or receives from: {rank: (op, peer)}.
    The peer is read from the ranks' own numbers and the peer each names, or, for a group of two
    (no WORLD_SIZE, no rank number saying it is bigger, no third member connected to both by
    TCP), it is the other rank (a rank never sends to itself; two peers named must differ). None
    unless every rank is in a point-to-point op whose peer is known."""
    g = b.g
    ops = {k: _p2p_op(g.nodes[k]) for k in waiting}
    if any(op is None for op in ops.values()):
        return None
    by_rank = {g.nodes[k].rank: k for k in waiting if g.nodes[k].rank is not None}
    out: dict[str, tuple[str, str]] = {}
    if len(by_rank) == len(waiting) and all(op is not None and op[1] in by_rank for op in ops.values()):
        for k, op in ops.items():
            assert op is not None
            if by_rank[op[1]] == k:
                return None
            out[k] = (op[0], by_rank[op[1]])
        return out
    named = [op[1] for op in ops.values() if op is not None and op[1] is not None]
    if len(waiting) != 2 or _missing_members(b, waiting)[0] is not None or len(set(named)) != len(named) \
            or any(n not in (0, 1) for n in named) or _socket_members(b, waiting):
        return None  # a bigger group (a member seen by its rank numbers, WORLD_SIZE or TCP): peers unknown
    first, second = waiting
    for k, peer in ((first, second), (second, first)):
        op = ops[k]
        assert op is not None
        out[k] = (op[0], peer)
    return out


def _p2p_tag(node: GNode) -> int | None:
    """The tag of the send or recv a rank is in, from the torch frame's facts (its locals, read on the node)."""
    value = (node.frame.facts or {}).get("tag") if node.frame is not None else None
    text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    return int(text) if text.lstrip("-").isdigit() else None


def _link_p2p(b: Builder, waiting: list[str]) -> bool:
    """Ranks in blocking sends and receives: p2p ops pair by (source, destination), not by call
    order, so a send waits for its peer's matching recv (and a recv for its peer's send). A peer
    in the matching op with this rank is a transfer in progress (no wait drawn) - unless their tags,
    read from the torch frames' locals, differ: a send pairs only with a recv of its tag, so the
    two never complete (collective-mismatch); a peer in the same
    op towards this rank, or in an op towards another rank, is what this one waits on: two ranks
    each in send to the other (or each in recv from the other) are a cycle nothing can break.
    True when every rank is in a point-to-point op whose peer is known (decided here)."""
    g = b.g
    peers = _p2p_peers(b, waiting)
    if peers is None:
        return False
    for k, (op, peer) in peers.items():
        peer_op, peer_peer = peers[peer]
        node, other = g.nodes[k], g.nodes[peer]
        who = f"{other.name}{'' if other.rank is None else f' rank {other.rank}'} (pid {other.pid})"
        if peer_op != op and peer_peer == k:
            tags = _p2p_tag(node), _p2p_tag(other)
            if None not in tags and tags[0] != tags[1]:
                node.pattern = "collective-mismatch"
                node.evidence.append(f"in a blocking {op} ({_text(g, k)}) with tag {tags[0]}, while {who} is in the "
                                     f"matching {peer_op} with tag {tags[1]}: a send pairs only with a recv of the same "
                                     "tag (and a recv with a send), so neither can ever complete")
                continue
            node.evidence.append(f"in {op} with {who}, which is in the matching {peer_op}: a transfer in progress, "
                                 "not a wait on each other")
            continue
        towards = f"{'to' if peer_op == 'send' else 'from'} {'it' if peer_peer == k else 'another rank'}"
        match = "recv" if op == "send" else "send"
        node.evidence.append(f"in a blocking {op} ({_text(g, k)}) {'to' if op == 'send' else 'from'} {who}, "
                             f"which is in {peer_op} {towards}: "
                             f"a {op} completes only when its peer posts the matching {match} "
                             "(point-to-point ops pair by source and destination)")
        # A p2p wait of its own kind: a loop made only of them is an ordering deadlock (rootcause).
        g.add_edge(k, peer, "p2p-order-deadlock", f"in {op}; {who} is in {peer_op} {towards}, not in the matching {match}")
    return True


def _where(g: WaitGraph, k: str) -> tuple[str, int | None, str]:
    """The collective a rank is in: the torch frame's function and line, and the job line that called it."""
    node = g.nodes[k]
    frame, user = node.frame, node.user_frame
    return ((frame.function, frame.line) if frame else ("?", None)) + (frame_text(user) if user else "",)


def _text(g: WaitGraph, k: str) -> str:
    fn, _line, caller = _where(g, k)
    return f"{fn}" + (f" called from {caller}" if caller else "")


def _world_sizes(b: Builder, keys: list[str]) -> set[int]:
    """The WORLD_SIZE the ranks' processes were started with (their environment, read on the node)."""
    sizes: set[int] = set()
    for k in keys:
        env = b.inp.info.get(b.g.nodes[k].ref, {}).get("env") or {}
        if str(env.get("WORLD_SIZE", "")).isdigit():
            sizes.add(int(env["WORLD_SIZE"]))
    return sizes


def _missing_members(b: Builder, waiting: list[str]) -> tuple[list[int] | None, str]:
    """Members of the group that are not among the job's processes, from what the ranks say of
    themselves: their WORLD_SIZE beyond the ranks present, or gaps in their rank numbers. (None
    when nothing shows a member missing; a list of rank numbers, empty when only a count is known.)"""
    g = b.g
    ranks = [g.nodes[k].rank for k in waiting]
    known = sorted(r for r in ranks if r is not None) if all(r is not None for r in ranks) else None
    sizes = _world_sizes(b, waiting)
    world = max(sizes) if sizes else None
    if world is not None and world > len(waiting):
        missing = sorted(set(range(world)) - set(known)) if known is not None else []
        return missing, (f"their WORLD_SIZE is {world}, but the job has {len(waiting)} of them"
                         + (f" (rank(s) {', '.join(map(str, known))})" if known else ""))
    if known is not None and known != list(range(len(known))):
        missing = sorted(set(range(max(known) + 1)) - set(known))
        return missing, f"the job's ranks are {', '.join(map(str, known))}: rank(s) {', '.join(map(str, missing))} are not among them"
    return None, ""


def _mark_incomplete(b: Builder, cls: str, waiting: list[str]) -> None:
    """Every rank of the job waits in one collective, at one line, and none is elsewhere: nothing
    in the job can complete it. When the ranks themselves show that a member is not among the
    job's processes (their WORLD_SIZE, their rank numbers), the collective is the culprit, with the
    members it misses; otherwise each rank says what the stacks cannot tell apart (a member outside
    the job, a rank that never joined, ranks in different process groups at this line)."""
    g = b.g
    missing, why = _missing_members(b, waiting)
    first = waiting[0]
    where = _text(g, first)
    if missing is None:
        note = (f"every one of the job's {len(waiting)} {cls} process(es) waits in this collective ({where}) and "
                "none is elsewhere: nothing in the job can complete it. A member outside the job (another job's "
                "process, one started outside Ray), a rank that never joined, or ranks in different process groups "
                "at this line would explain it; the stacks cannot tell which (the Flight Recorder's group ids, the "
                "ranks' WORLD_SIZE, the other members' stacks would)")
        for k in waiting:
            if note not in g.nodes[k].evidence:
                g.nodes[k].evidence.append(note)
        return
    absent = f"rank(s) {', '.join(map(str, missing))}" if missing else "member(s)"
    key = f"collective:{cls}"
    g.nodes[key] = GNode(key=key, kind="collective", name=f"{_where(g, first)[0]} of {cls} ranks, {absent} missing",
                         state="blocked", pattern="collective-incomplete",
                         evidence=[f"every one of the job's {len(waiting)} {cls} process(es) waits in {where} and none "
                                   f"is elsewhere; {why}: {absent} of the group are not processes of this job (another "
                                   "job's, started outside Ray, or never started), and the collective cannot complete "
                                   "without them"])
    for k in waiting:
        frame = g.nodes[k].frame
        g.add_edge(k, key, "collective-wait", f"in {frame.function if frame is not None else 'a collective'} with "
                   f"{len(waiting) - 1} other process(es) of the job; {absent} of its group not among them")


_RAY_DAEMON = re.compile(r"raylet|gcs_server|dashboard|log_monitor|monitor\.py|runtime_env|ray_client_server|ray::IDLE",
                         re.IGNORECASE)
_RAY_TITLE = re.compile(r"^ray::([A-Za-z_]\w*)")


def _socket_members(b: Builder, waiting: list[str]) -> dict[ProcessRef, tuple[str, int]]:
    """Processes connected by TCP to every rank waiting on their node (gloo pairs every two
    members of a group by a TCP connection; peers are read per node), that are not the ranks
    themselves, nor the driver, nor linked to them by a Ray call (those talk over gRPC):
    {process: (title, connections)}."""
    g = b.g
    on_node: dict[str | None, list[str]] = {}
    for k in waiting:
        on_node.setdefault(g.nodes[k].node_id, []).append(k)
    related = ray_linked(b, waiting)
    out: dict[ProcessRef, tuple[str, int]] = {}
    for node_id, here in on_node.items():
        seen: dict[int, list[tuple[str, int]]] = {}
        for k in here:
            for peer in socket_peers_of(b, k):
                seen.setdefault(peer["pid"], []).append((str(peer.get("title") or ""), int(peer.get("connections") or 0)))
        ranks = {g.nodes[k].pid for k in here}
        for pid, hits in seen.items():
            ref = ProcessRef(node_id, pid)
            key = b.by_pid.get(ref)
            if len(hits) < len(here) or pid in ranks or ref in related or (key is not None and g.nodes[key].kind == "driver"):
                continue
            if _RAY_DAEMON.search(hits[0][0]):
                continue  # Ray's own processes talk to every worker
            out[ref] = (hits[0][0], min(n for _t, n in hits))
    return out


def _link_members_by_socket(b: Builder, waiting: list[str], why: str) -> bool:
    """The group's other members, found by TCP: a process of the job elsewhere (its own stack
    judges it) or one outside the job (named from the State API, or by its command line). True
    when one was found and linked."""
    g = b.g
    members = _socket_members(b, waiting)
    for ref, (title, conns) in sorted(members.items(), key=lambda kv: (str(kv[0].node_id), kv[0].pid or 0)):
        node_id, pid = ref.node_id, int(ref.pid or 0)
        key = b.by_pid.get(ref)
        facts = (f"connected by TCP to every one of the {len(waiting)} process(es) waiting in {_text(g, waiting[0])} "
                 f"({conns} connection(s) each; gloo pairs the members of a group by TCP), and no Ray call links it "
                 "to them: a member of their process group" + (f"; {why}" if why else ""))
        if key is None:
            key = _outside_member(b, node_id, pid, title)
            g.nodes[key].evidence.append(facts)
        else:
            node = g.nodes[key]
            node.evidence.append(facts)
            if _in_collective(node):
                continue  # in a collective of its own: a mismatch across classes, not decided here
            if node.state == "idle" or node.pattern in (None, "idle-worker"):
                node.pattern = "collective-skipped"
                node.evidence.append("not in any collective while the other members of its group are")
        for w in waiting:
            frame = g.nodes[w].frame
            g.add_edge(w, key, "collective-wait", f"in {frame.function if frame is not None else 'a collective'}; "
                       f"{g.nodes[key].name} (pid {pid}), a member of its group connected to it by TCP, is not in it")
    return bool(members)


def _outside_member(b: Builder, node_id: str | None, pid: int, title: str) -> str:
    """A node for a member of the group that is not a process of the job (not dumped): the
    State API's actor on that node and pid, if any (another job's), else its command line."""
    actor = next((a for a in b.inp.actors if a.pid == pid and a.node_id == node_id and a.state != "DEAD"), None)
    key = f"peer:{node_id}:{pid}"
    if actor is not None:
        job = next((j for j in b.inp.jobs if j.job_id == actor.job_id), None)
        node = GNode(key=key, kind="actor", name=str(actor.class_name), state="unknown", pid=pid, node_id=node_id,
                     actor_id=actor.actor_id, class_name=actor.class_name, actor_name=actor.name,
                     pattern="collective-incomplete")
        node.evidence.append(f"not a process of this job: an actor of job {actor.job_id}"
                             + (f" ({job.status})" if job is not None and job.status else "")
                             + (", detached" if actor.is_detached else "")
                             + "; its stack was not read (it is not one of the job's processes)")
    else:
        # A Ray worker's title is `ray::<Class>.<method>` (or `ray::<Class>` between calls)
        worker = _RAY_TITLE.match(title)
        cls = worker.group(1) if worker else None
        node = GNode(key=key, kind="actor" if cls else "process", name=cls or title[:60] or f"pid {pid}", state="unknown",
                     pid=pid, node_id=node_id, class_name=cls, pattern="collective-incomplete")
        node.evidence.append(f"not a process of this job (`{title[:100]}`): "
                             + ("a Ray worker the State API rows at hand do not list (another job's?)" if cls else
                                "started outside Ray?") + "; its stack was not read")
    b.g.nodes.setdefault(key, node)
    return key


def _mark_mismatch(g: WaitGraph, waiting: list[str]) -> bool:
    """All ranks are in collectives: the minority deciding line is the odd one out (True when one
    was named).

    Ranks are grouped by the collective they are in (function and line of the torch frame) and
    the job line that called it. A strict majority names the odd ranks; a tie names every group.
    """
    def where(k: str) -> tuple[str, int | None, str]:
        return _where(g, k)

    def text(k: str) -> str:
        return _text(g, k)

    def ranks(keys: list[str]) -> str:
        known = sorted(r for r in (g.nodes[k].rank for k in keys) if r is not None)
        if len(known) != len(keys):
            return f"{len(keys)} peers are"
        return f"rank {known[0]} is" if len(known) == 1 else "ranks " + ", ".join(str(r) for r in known) + " are"

    if all(g.nodes[k].pattern == "rendezvous-wait" for k in waiting):
        # One operation, whatever each rank's inner frame: rank 0 in the store it hosts waiting for
        # its workers, another already connecting to the whole group. No collective was called.
        return False
    groups: dict[tuple[str, int | None, str], list[str]] = {}
    for k in waiting:
        groups.setdefault(where(k), []).append(k)
    if len(groups) < 2:
        return _mark_root_mismatch(g, waiting)
    sizes = sorted((len(v) for v in groups.values()), reverse=True)
    majority = max(groups.values(), key=len) if sizes[0] > sizes[1] else None
    if majority is None:
        # A tie: DDP runs its collectives on every rank every step, so ranks inside DDP are on
        # the common path and the rank in an explicit collective is the odd one.
        in_ddp = [keys for keys in groups.values() if all(g.nodes[k].pattern == "ddp-wait" for k in keys)]
        if len(in_ddp) == 1:
            majority = in_ddp[0]
    for keys in groups.values():
        if keys is majority:
            continue
        mine = set(keys)
        others = ranks([k for k in waiting if k not in mine])  # once per group, not per rank
        for odd in keys:
            g.nodes[odd].pattern = "collective-mismatch"
            g.nodes[odd].evidence.append(
                f"in {text(odd)} while {others} "
                + (f"in {text(majority[0])}" if majority else "in other collectives")
                + " (gloo/NCCL pair collectives by call order: these never match)")
            for k in majority or []:
                frame = g.nodes[k].frame
                g.add_edge(k, odd, "collective-wait",
                           f"in {frame.function if frame is not None else 'a collective'}; "
                           f"{g.nodes[odd].name}{'' if g.nodes[odd].rank is None else f' rank {g.nodes[odd].rank}'} "
                           f"is in {where(odd)[0]} instead")
    return True


# Rooted collectives (torch.distributed), by the torch frame's function: the arguments naming
# their root, the global rank first (group_src/group_dst are ranks within the group).
_ROOT_ARGS = {
    "broadcast": ("src", "group_src"), "broadcast_object_list": ("src", "group_src"),
    "scatter": ("src", "group_src"), "scatter_object_list": ("src", "group_src"),
    "reduce": ("dst", "group_dst"), "gather": ("dst", "group_dst"), "gather_object": ("dst", "group_dst"),
}


def _root_of(node: GNode) -> tuple[str, int] | None:
    """The root a rank names in the rooted collective it is in (`src=1`), from the torch frame's
    facts (its locals, read on the node); None when it is in no rooted collective or the value is unknown."""
    frame = node.frame
    names = _ROOT_ARGS.get(frame.function.rsplit(".", 1)[-1]) if frame is not None else None
    if frame is None or names is None:
        return None
    facts = frame.facts or {}
    for name in names:
        value = facts.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return name, value
    return None


def _on_the_default_group(node: GNode) -> bool:
    """The job line that calls the collective shows the whole call, with no `group=`: it runs on the
    default group, whose members all take part (ranks of different subgroups may each name their own
    root). Unknown (no line, or a call continued on the next line) is False."""
    code = (node.user_frame.code or "") if node.user_frame is not None else ""
    return bool(code) and code.count("(") == code.count(")") and not re.search(r"\bgroup\w*\s*=", code)


def _mark_root_mismatch(g: WaitGraph, waiting: list[str]) -> bool:
    """Every rank in the same rooted collective at the same line on the default group, naming
    different roots (rank 0 broadcasts with src=0, rank 1 with src=1): each waits for a root the
    others do not take for one, and the collective never completes. The minority is named (every rank on a tie). True
    when the ranks' roots, all read, differ."""
    roots = {k: _root_of(g.nodes[k]) for k in waiting}
    if any(r is None for r in roots.values()) or len({r[1] for r in roots.values() if r is not None}) < 2 \
            or not all(_on_the_default_group(g.nodes[k]) for k in waiting):
        return False
    by_root: dict[int, list[str]] = {}
    for k, r in roots.items():
        assert r is not None
        by_root.setdefault(r[1], []).append(k)
    sizes = sorted((len(v) for v in by_root.values()), reverse=True)
    majority = max(by_root.values(), key=len) if sizes[0] > sizes[1] else None
    fn = _where(g, waiting[0])[0]
    said = "; ".join(f"{_who(g, keys)} with {roots[keys[0]][0]}={root}"  # type: ignore[index]
                     for root, keys in sorted(by_root.items()))
    for root, keys in by_root.items():
        if keys is majority:
            continue
        for odd in keys:
            g.nodes[odd].pattern = "collective-mismatch"
            g.nodes[odd].evidence.append(
                f"in {_text(g, odd)} with the same call on every rank, but the ranks name different roots ({said}): "
                f"a {fn} completes only when every rank names the same root, so this one never does")
            for k in majority or []:
                g.add_edge(k, odd, "collective-wait",
                           f"in {fn} naming root {roots[k][1]}; {g.nodes[odd].label()} names root {root}")  # type: ignore[index]
    return True


def _who(g: WaitGraph, keys: list[str]) -> str:
    known = sorted(r for r in (g.nodes[k].rank for k in keys) if r is not None)
    if len(known) != len(keys):
        return ", ".join(g.nodes[k].label() for k in keys)
    return f"rank {known[0]}" if len(known) == 1 else "ranks " + ", ".join(map(str, known))
