"""From the wait-for graph to root causes: cycles are deadlocks, chains end at culprits.

`root_causes` ranks what it finds (cycles first, then chain ends that most processes wait on);
`chains` gives, for each cause, the path from its farthest victim down to the culprit, which the
report draws.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from debug_hang.analyse.fixes import choose
from debug_hang.analyse.graph import GNode, WaitGraph
from debug_hang.analyse.graph.model import EdgeReason, NodeState
from debug_hang.analyse.pattern_ids import PatternId
from debug_hang.analyse.patterns import Reading, catalog, settings
from debug_hang.snapshot import QUEUE_ACTOR_CLASS


@dataclass
class RootCause:
    pattern: Reading
    culprits: list[GNode]
    victims: list[str]  # node keys that (transitively) wait on the culprits
    confidence: float
    evidence: list[str]
    summary: str
    cycle: list[str] = field(default_factory=list)


def find_cycles(g: WaitGraph) -> list[list[str]]:
    """Strongly connected components with a cycle (Tarjan), each as a list of node keys."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]
    succ: dict[str, list[str]] = {}
    for e in g.edges:
        if not e.guessed:  # a deadlock is proven by facts, never closed by a guess
            succ.setdefault(e.src, []).append(e.dst)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in succ.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in succ.get(v, []):
                cycles.append(list(reversed(comp)))

    for v in list(g.nodes):
        if v not in index:
            visit(v)
    return cycles


def _upstream(g: WaitGraph, keys: set[str]) -> list[str]:
    """Every node that transitively waits on one of `keys`."""
    seen: set[str] = set()
    todo = list(keys)
    while todo:
        k = todo.pop()
        for e in g.into(k):
            if e.src not in seen and e.src not in keys:
                seen.add(e.src)
                todo.append(e.src)
    return sorted(seen)


# What a chain end stands for when its own reading is no root cause, by its state (those patterns
# are decided by the graph passes or the stack matcher; a chain end carries them).
_END_PATTERN: dict[NodeState, PatternId] = {
    "busy": "busy-loop",
    "idle": "idle-no-work",
    "dead": "peer-rank-dead",
    "infeasible": "infeasible-resource",
    "starved": "resource-starvation",
}


def root_causes(g: WaitGraph) -> list[RootCause]:
    """Cycles first (deadlocks), then chain ends that someone waits on, most victims first."""
    causes = _cycle_causes(g)
    in_cycle = {k for c in causes for k in c.cycle}
    causes += [_end_cause(g, key, victims) for key, victims in _chain_ends(g, in_cycle).items()]
    causes = _merge_peers(_explained_driver(g, causes))
    causes.sort(key=lambda c: (-(len(c.victims) + (5 if c.cycle else 0)) * c.confidence, c.summary))
    if any(c.confidence >= settings().confident for c in causes):
        # Waits that could not be followed are noise beside a confident finding.
        causes = [c for c in causes if c.confidence >= settings().noise_below]
    return causes


def _explained_driver(g: WaitGraph, causes: list[RootCause]) -> list[RootCause]:
    """Once a cause explains what the driver waits for, a process nobody waits on (a monitor
    looping on its own, a stuck helper) is no reason the job is hung: left out."""
    if not any(g.nodes[v].kind == "driver" for c in causes for v in c.victims):
        return causes
    return [c for c in causes if c.victims or c.cycle]


def _cycle_causes(g: WaitGraph) -> list[RootCause]:
    """One cause per wait-for cycle: a deadlock (actor calls, locks, resources, a barrier)."""
    causes: list[RootCause] = []
    for cycle in find_cycles(g):
        members = [g.nodes[k] for k in cycle]
        has_resource = any(n.kind in ("resource", "placement_group") for n in members)
        pattern, leaders = _cycle_pattern(g, cycle, has_resource)
        culprits = [n for n in members if n.kind != "resource"] if has_resource else members
        if pattern == "queue-cycle":  # the queues are the conduit; the fix is in the processes
            culprits = [n for n in culprits if n.class_name != QUEUE_ACTOR_CLASS]
        if leaders:  # where the fix goes comes first
            culprits = sorted(culprits, key=lambda n: n.key not in leaders)
            if pattern in _ONLY_LEADERS:
                culprits = [n for n in culprits if n.key in leaders]
        outside = [g.nodes[e.dst] for e in g.edges if e.why == "train-barrier" and e.src in cycle and e.dst in cycle]
        if outside:
            # Ranks in Ray Train's barrier and ranks still in a DDP step wait on each other. The
            # ones outside it may never call report, or the ones inside may have run fewer steps:
            # both are named, those outside first.
            inside = [n for n in members if n.class_name == outside[0].class_name and n not in outside]
            pattern, culprits = "train-barrier-skipped", outside + inside
        evidence = [f"{e.src.split(':')[0]} {g.nodes[e.src].label()} → {g.nodes[e.dst].label()}: {e.evidence}"
                    for e in g.edges if e.src in cycle and e.dst in cycle]
        evidence += [f"{n.label()}: {text}" for n in members for text in n.evidence if text.startswith("another thread waits for a lock")]
        evidence += [f"{n.label()}: {g.constructing[n.key]}" for n in culprits if n.key in leaders and n.key in g.constructing]
        names = " → ".join(g.nodes[k].label() for k in cycle) + f" → {g.nodes[cycle[0]].label()}"
        all_blocked = all(n.state in ("blocked", "starved", "pending") for n in members)
        victims = _upstream(g, set(cycle)) + sorted(k for k in cycle if k not in {n.key for n in culprits})
        causes.append(RootCause(
            pattern=pattern, culprits=culprits, victims=victims,
            confidence=settings().cycle_confidence if all_blocked else settings().partial_cycle_confidence,
            evidence=evidence, cycle=list(cycle),
            summary=f"deadlock cycle: {names}",
        ))
    return causes


# The patterns a wait-for cycle is named by whose rule is here (_cycle_pattern, _cycle_causes)...
CYCLE_DECIDES: frozenset[PatternId] = frozenset({"actor-call-cycle", "pipe-full-deadlock", "file-lock-deadlock", "train-barrier-skipped",
                                                 "queue-cycle", "split-consumer-left", "create-order-deadlock",
                                                 "socket-read-deadlock", "p2p-order-deadlock", "placement-group-hold-and-wait",
                                                 "child-awaits-input", "set-order-deadlock"})
# ... and those a cycle carries from its members or its closing edge, decided elsewhere.
CYCLE_CARRIES: frozenset[PatternId] = frozenset({"resource-starvation", "generator-backpressure", "async-loop-blocked", "lock-order-deadlock",
                                                  "rank-never-launched", "fifo-never-opened", "executor-self-wait"})
END_CARRIES = frozenset(_END_PATTERN.values()) | {"queue-get-wait"}  # and a queue actor's consumers (_chain_ends)

# Edges that close a cycle of their own kind: (edge, the cycle's pattern, whether the process the
# edge leads to is where the fix goes, and so comes first among the culprits).
_CLOSING_EDGES: tuple[tuple[EdgeReason, PatternId, bool], ...] = (
    # A member holds an OS file lock (/proc/locks) another waits for.
    ("file-lock-wait", "file-lock-deadlock", False),
    # A child writes a full pipe that only its parent reads, and the parent waits for the child
    # instead of reading: the parent's wait is the line to change.
    ("pipe-write-wait", "pipe-full-deadlock", True),
    # ... or reads its stdin to the end, and the parent waits for it without closing that pipe.
    ("pipe-read-wait", "pipe-full-deadlock", True),
    # ... or reads its stdin (a prompt) while the parent reads its output: the parent must answer.
    ("child-awaits-input", "child-awaits-input", True),
    # A paused stream whose consumer waits on what the stream would do: the consumer must read on.
    ("generator-backpressure", "generator-backpressure", True),
    # A full queue nobody ever read from, whose creator (its reader) waits in the loop itself: the
    # creator reads too late.
    ("never-read", "queue-cycle", True),
    # A streaming_split whose consumer left its shard early and waits on what the other consumers
    # would do once the split hands them blocks again: the consumer that left must read on.
    ("split-consumer-left", "split-consumer-left", True),
    # A poll for a named actor whose only possible creators wait on the poller: the creator must
    # create it before it waits (or pass the handle in).
    ("named-actor-wait", "create-order-deadlock", True),
    # An actor's event set only by a method its caller calls after a wait on that actor: the
    # caller must make the call before it waits.
    ("setter-call", "set-order-deadlock", True),
    # Ranks in a rendezvous for a world larger than the ranks started, whose creator waits on them:
    # the creator launched too few (graph/rendezvous.py).
    ("rank-never-launched", "rank-never-launched", True),
    # A child blocked opening a FIFO whose only possible partner, its parent, waits for the child's
    # exit before it opens the other end: the parent's wait is the line to change (graph/kernel_objects.py).
    ("fifo-never-opened", "fifo-never-opened", True),
    # A ray.util.ActorPool whose busy actors wait on a queue only a call still unsent in the pool
    # would fill, while its holder waits in get_next (graph/queues.py): the submit order is the fix.
    ("executor-self-wait", "executor-self-wait", True),
)
# Cycles whose closing edge's end alone is the culprit: the other members wait as designed.
_ONLY_LEADERS: frozenset[PatternId] = frozenset({"split-consumer-left", "create-order-deadlock", "placement-group-hold-and-wait",
                                                 "child-awaits-input", "set-order-deadlock", "rank-never-launched",
                                                 "fifo-never-opened", "executor-self-wait"})


def _cycle_pattern(g: WaitGraph, cycle: list[str], has_resource: bool) -> tuple[PatternId, set[str]]:
    """What kind of deadlock a cycle is, from its members and the edges that close it, and the
    members to name first (where the fix goes; empty: the cycle's own order)."""
    inside = set(cycle)
    closing = [e for e in g.edges if e.src in inside and e.dst in inside]
    if has_resource:
        # Groups held by creators that wait, inside the loop, for more groups: hold-and-wait; the
        # creators (where the reservation is made in two steps) are the culprits.
        creators = {e.dst for e in closing if e.why == "placement-group-hold-and-wait"}
        return ("placement-group-hold-and-wait", creators) if creators else ("resource-starvation", set())
    for why, pattern, fix_at_end in _CLOSING_EDGES:
        ends = {e.dst for e in closing if e.why == why}
        if ends:
            return pattern, ends if fix_at_end else set()
    if closing and all(e.why == "io-wait" for e in closing):
        # Every wait of the loop is a socket read whose other end is the next member (the only
        # io-wait edges: graph/sockets.py): each end waits for bytes only the other would send.
        return "socket-read-deadlock", set()
    if closing and all(e.why == "p2p-order-deadlock" for e in closing):
        # Every wait of the loop is a blocking send or recv whose peer is in an op that does not
        # match it (graph/collectives.py): each would post the matching op only after its own.
        return "p2p-order-deadlock", set()
    members = [g.nodes[k] for k in cycle]
    if any(n.class_name == QUEUE_ACTOR_CLASS for n in members):
        return "queue-cycle", set()  # ray.util.queue's actors on the loop: it runs through queues
    # Members the loop waits on to be built: an actor whose constructor still runs (calls to it
    # wait behind __init__), or a Serve replica a deploy waits on (serve.run waits for its
    # constructor). What such a member's constructor waits on is the cause, however it waits.
    built = {k for k in cycle if k in g.constructing
             or any(e.src in inside and e.why == "serve-deploy-wait" for e in g.into(k))}
    blocking = {n.key for n in members if n.pattern == "async-loop-blocked" and n.key not in built}
    if blocking:
        # An async actor blocks its own event loop (ray.get in a coroutine): the call back into it
        # cannot start on that loop. Awaiting instead would let it run: the cycle is the block.
        # Not so for a constructor the loop waits on: it cannot await, and the member waiting for it
        # to be built waits for its __init__ to return, not for a call its loop would run.
        return "async-loop-blocked", blocking
    if any(n.pattern == "lock-order-deadlock" for n in members) or all(
            n.lock_wait is not None for n in members if n.kind != "driver"):
        # Every actor of the cycle has one thread in ray.get and another at a lock line: each
        # holds its lock across the call into the other.
        return "lock-order-deadlock", set()
    # A member still in its constructor that another member calls: that call waits until __init__
    # returns, and __init__ waits (through the loop) on that call. The constructor's wait is the
    # cause: a constructor must not block on calls that call back into the actor being built.
    behind = {k for k in built if any(e.src in inside for e in g.into(k))}
    for k in behind:
        choose(g.nodes[k], "constructor_calls_back")
    if not behind and closing and all(e.why == "serve-response-wait" for e in closing if e.src in g.nodes):
        # Every wait of the loop is a request at a Serve deployment: the deployments call each other.
        choose(members[0], "serve_handle_cycle")
    return "actor-call-cycle", behind


def _chain_ends(g: WaitGraph, in_cycle: set[str]) -> dict[str, list[str]]:
    """Nodes where a chain of waits ends, each with everything that waits on it."""
    ends: dict[str, list[str]] = {}
    for key in g.nodes:
        if key in in_cycle or not g.into(key):
            continue
        if any(e.dst not in in_cycle for e in g.out(key)):
            continue  # waits on something further down the chain
        if any(e.dst in in_cycle for e in g.out(key)):
            continue  # waits on a cycle: a victim, not a cause
        ends[key] = _upstream(g, {key})
    for key in [k for k in ends if _conduit(g, k)]:
        # A queue actor serves the get it is waited on for: an end nobody could follow there is the
        # consumers' wait (their line, their process), not Ray's queue (tests/test_actor_pool_wait.py).
        del ends[key]
        for src in {e.src for e in g.into(key)}:
            if src not in in_cycle and src not in ends:
                ends[src] = _upstream(g, {src})
                g.queue_consumers.add(src)
    for key, node in g.nodes.items():
        # A process with a root-cause pattern is a culprit even when nobody visibly waits on it
        # (a lock-order deadlock inside one actor, a blocked event loop).
        if key in ends or key in in_cycle or g.out(key):
            continue
        own = catalog().get(node.pattern or "")
        if own and own.kind == "root-cause" and node.kind != "resource":
            ends[key] = _upstream(g, {key})
    return ends


def _conduit(g: WaitGraph, key: str) -> bool:
    """A ray.util.queue actor at a chain's end in a wait no rule followed (not producer-gone): it
    only holds the queue, so what stops is whoever should feed it, seen from its consumers."""
    node = g.nodes[key]
    own = catalog().get(node.pattern or "")
    return node.class_name == QUEUE_ACTOR_CLASS and not (own is not None and own.kind == "root-cause") \
        and all(g.nodes[e.src].kind != "resource" for e in g.into(key))


def _end_cause(g: WaitGraph, key: str, victims: list[str]) -> RootCause:
    """The cause a chain end stands for: its root-cause reading, or what its state says."""
    node = g.nodes[key]
    own = catalog().get(node.pattern or "")
    found = node.pattern if own is not None and own.kind == "root-cause" else _END_PATTERN.get(node.state)
    if key in g.queue_consumers:
        # What it waits for is a queue nobody was seen feeding: that wait, not its own reading of
        # the process (a blocked loop, a busy step), is the end; who should feed it is unseen.
        found = None
    pattern_id: Reading = found or ("queue-get-wait" if key in g.queue_consumers else node.pattern) or "unknown"
    confidence = settings().chain_end_confidence
    if found is None:
        confidence = settings().unrecognised_end_confidence  # the chain ends in a wait we could not follow
    evidence = [f"{g.nodes[e.src].label()} → {node.label()}: {e.evidence}" for e in g.into(key)][:6]
    evidence += node.evidence[:6]
    culprits = [node]
    if node.kind in ("resource", "placement_group"):
        # The request is the cause; the actors that cannot start because of it are named with
        # it (a rank that never started is what its peers wait for).
        culprits += [g.nodes[e.src] for e in g.into(key) if g.nodes[e.src].state == "pending"
                     and g.nodes[e.src].kind not in ("resource", "placement_group")]
        for extra in culprits[1:3]:
            evidence += [f"{g.nodes[e.src].label()} → {extra.label()}: {e.evidence}"
                         for e in g.into(extra.key)][:4] + extra.evidence[:2]
    title = catalog()[pattern_id].title if pattern_id in catalog() else pattern_id
    return RootCause(pattern=pattern_id, culprits=culprits, victims=victims, confidence=confidence,
                     evidence=evidence, summary=f"{node.label()}: {title}")


def _merge_peers(causes: list[RootCause]) -> list[RootCause]:
    """Chain ends that are peers — same pattern, same class, same victims (two DataLoader workers,
    two idle samplers) — are one finding with several culprits, not several findings."""
    merged: list[RootCause] = []
    index: dict[tuple[str, str | None, tuple[str, ...]], RootCause] = {}
    for cause in causes:
        if cause.cycle or len(cause.culprits) != 1 or cause.culprits[0].kind in ("resource", "placement_group"):
            merged.append(cause)
            continue
        key = (cause.pattern, cause.culprits[0].class_name, tuple(sorted(set(cause.victims) - {cause.culprits[0].key})))
        first = index.get(key)
        if first is None:
            index[key] = cause
            merged.append(cause)
            continue
        first.culprits.append(cause.culprits[0])
        first.victims = sorted((set(first.victims) | set(cause.victims)) - {c.key for c in first.culprits})
        first.evidence += [e for e in cause.evidence if e not in first.evidence][:4]
        first.summary = f"{first.summary} (and {len(first.culprits) - 1} more like it)" \
            if "more like it" not in first.summary else first.summary.rsplit(" (and", 1)[0] + \
            f" (and {len(first.culprits) - 1} more like it)"
    return merged


# One chain: (graph node, why it waits on the next) from the visible victim to the culprit.
Chain = list[tuple[GNode, str | None]]


def chains(g: WaitGraph, causes: list[RootCause]) -> list[Chain]:
    """For each root cause, one path from its farthest victim down to the culprit."""
    out: list[list[tuple[GNode, str | None]]] = []
    for cause in causes:
        target = {c.key for c in cause.culprits}
        starts = [v for v in cause.victims if not g.into(v)] or cause.victims or [cause.culprits[0].key]
        path = [starts[0]]
        if cause.victims and cause.cycle:
            path = _path(g, starts[0], target)  # the shortest way in; the loop is added below
        elif cause.victims:
            # The longest wait chain down to the first culprit (the cause itself) when it is
            # reachable, else to any culprit: driver → rank 0 → rank 3 (never started) → the
            # request tells more than driver → rank 3 → the request.
            for goal in ({cause.culprits[0].key}, target):
                found = [p for p in (_longest_path(g, s, goal) for s in starts) if p[-1] in goal]
                if found:
                    path = max(found, key=len)
                    break
        if cause.cycle:
            # Enter the cycle where the path reaches it, so every step keeps its wait edge.
            entry = path[-1] if path and path[-1] in cause.cycle else cause.cycle[0]
            at = cause.cycle.index(entry)
            ring = cause.cycle[at:] + cause.cycle[:at]
            path = (path[:-1] if path else []) + ring + [ring[0]]
        steps: list[tuple[GNode, str | None]] = []
        for i, key in enumerate(path):
            nxt = path[i + 1] if i + 1 < len(path) else None
            why = next((e.evidence for e in g.out(key) if e.dst == nxt), None) if nxt else None
            steps.append((g.nodes[key], why))
        out.append(steps)
    return out


def _longest_path(g: WaitGraph, start: str, targets: set[str], budget: int = 20000) -> list[str]:
    """Longest simple path from `start` to one of `targets` (bounded search; BFS beyond it)."""
    best: list[str] = []
    steps = [0]

    def dfs(path: list[str], seen: set[str]) -> None:
        nonlocal best
        steps[0] += 1
        if steps[0] > budget:
            return
        if path[-1] in targets:
            if len(path) > len(best):
                best = list(path)
            return
        for e in g.out(path[-1]):
            if e.dst not in seen:
                seen.add(e.dst)
                path.append(e.dst)
                dfs(path, seen)
                path.pop()
                seen.discard(e.dst)

    dfs([start], {start})
    return best if best and steps[0] <= budget else _path(g, start, targets)


def _path(g: WaitGraph, start: str, targets: set[str]) -> list[str]:
    """Shortest path (BFS) from `start` to any of `targets`, following wait edges."""
    prev: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        k = queue.popleft()
        if k in targets:
            path = []
            cur: str | None = k
            while cur is not None:
                path.append(cur)
                cur = prev[cur]
            return list(reversed(path))
        for e in g.out(k):
            if e.dst not in prev:
                prev[e.dst] = k
                queue.append(e.dst)
    return [start]
