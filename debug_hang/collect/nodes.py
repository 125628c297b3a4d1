"""Run a function on chosen Ray nodes: one helper task per node, pinned, CPU-free and bounded.

Each helper is a Ray task with `num_cpus=0` (so it runs on a cluster whose CPUs are all taken),
`NodeAffinitySchedulingStrategy(node_id, soft=False)` (so it runs on that node or not at all) and
`max_retries=1`: a helper given up on is cancelled with force (its worker killed), and the next
helper sent to that node from this process can land on the dead worker's cached lease and fail
at once with WorkerCrashedError (seen in a process that diagnoses repeatedly); the one retry runs
it on a fresh worker. A node whose helper does not finish in time is reported, never waited on.
This project's package travels with the function (cloudpickle by value): nothing needs to be
installed on the nodes but Ray itself and py-spy.

The node list is read from the GCS directly (`list_nodes`), without connecting a driver: listing
nodes registers no job and works while the dashboard is down.
"""

from __future__ import annotations

import logging
import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from debug_hang.collect.address import ClusterAddress, node_info_reply
from debug_hang.errors import NotFoundError, UnreachableError, UsageError
from debug_hang.timeouts import call_with_timeout

# Connecting a driver takes 1-3 s on a healthy cluster; past 20 s the GCS is in trouble.
CONNECT_TIMEOUT_S = 20.0
# A helper needs a worker process started on its node (about 1 s, more under load) plus its work.
NODE_TIMEOUT_S = 30.0
# Reading the node table is one GCS call (under 10 ms here); 10 s covers a loaded head.
LIST_TIMEOUT_S = 10.0
# Fetching a finished helper's value: it is already computed, so this only covers a slow transfer.
FETCH_TIMEOUT_S = 5.0
# Helpers running at once, the next started as one finishes. Each runs on its own node and
# mostly waits on its sample interval, so one wave is the fast path: a diagnosis dumps at most
# MAX_TARGETS (256) processes, so no more nodes than that are ever probed, and what comes back
# here is bounded by the targets, not by the node count.
MAX_NODES_IN_FLIGHT = 256
# A helper submitted with less time left than this could not start a worker and answer anyway.
MIN_START_S = 2.0
# A helper's answer is sent this long before its node's deadline: it still has to travel back.
ANSWER_MARGIN_S = 1.0
NAMESPACE = "debug-hang"

# Why a node gave no answer: a closed vocabulary (see also pyspy.DUMP_ERROR_KINDS and the
# COMMAND_* kinds of node_probe for failures inside a node that did answer).
NODE_DEAD = "node-dead"  # the GCS lists the node as dead (before or during the run)
NODE_UNKNOWN = "node-unknown"  # the GCS does not know the node id
NOT_SCHEDULED = "not-scheduled"  # the helper never reported: no worker started in time
HELPER_CRASHED = "helper-crashed"  # the helper's worker process died (OOM, kill, node loss)
HELPER_FAILED = "helper-failed"  # the helper could not be submitted, or failed for a reason of Ray's
# The helper ran on the node and raised, or its code could not be rebuilt there (unpickled): a
# failure of debug-hang itself (or of its Ray/Python against the node's), never of the job or node.
HELPER_ERROR = "helper-error"
# Ray refused to connect a driver from here: this side's Ray or Python differs from the cluster's.
VERSION_MISMATCH = "version-mismatch"
NODE_ERROR_KINDS = frozenset({NODE_DEAD, NODE_UNKNOWN, NOT_SCHEDULED, HELPER_CRASHED, HELPER_FAILED,
                              HELPER_ERROR, VERSION_MISMATCH})

_NODE_ID = re.compile(r"^[0-9a-fA-F]{1,56}$")
# Logged by ray.init() when it runs outside the main thread (connect() bounds it with a
# thread): it concerns Ray's own SIGTERM handling and tells the user nothing here.
_SIGTERM_NOISE = "SIGTERM handler is not set"


@dataclass
class NodeInfo:
    node_id: str
    node_ip: str
    alive: bool
    is_head: bool
    resources: dict[str, float] = field(default_factory=dict)
    name: str | None = None
    death_reason: str | None = None  # for a dead node: the GCS's reason and message

    @classmethod
    def from_gcs(cls, info: Any) -> NodeInfo:
        """From a GCS `GcsNodeInfo` protobuf (what `GcsClient.get_all_node_info` returns)."""
        alive = int(info.state) == 0  # GcsNodeInfo.ALIVE
        death = None
        if not alive and info.HasField("death_info"):
            reason = type(info.death_info).Reason.Name(info.death_info.reason)
            message = info.death_info.reason_message.strip()
            death = f"{reason}: {message}" if message else reason
        return cls(
            node_id=info.node_id.hex(),
            node_ip=str(info.node_manager_address),
            alive=alive,
            is_head=bool(info.is_head_node),
            resources={str(k): float(v) for k, v in info.resources_total.items()
                       if not str(k).startswith("node:")},
            name=str(info.node_name) or None,
            death_reason=death,
        )

    def to_dict(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "node_ip": self.node_ip, "alive": self.alive,
                "is_head": self.is_head, "resources": self.resources, "name": self.name,
                "death_reason": self.death_reason}


@dataclass
class NodeRun:
    """What one node's helper returned, or why it did not (`kind` from NODE_ERROR_KINDS)."""

    node_id: str
    value: Any = None
    error: str | None = None
    seconds: float = 0.0
    kind: str | None = None


def select_nodes(nodes: list[NodeInfo], selectors: list[str]) -> list[NodeInfo]:
    """Nodes matching each selector (a node id, a unique id prefix, or an IP); all alive if none.

    An ambiguous prefix or IP is refused with the candidates listed; so is an unknown one.
    """
    if not selectors:
        return [n for n in nodes if n.alive]
    chosen: list[NodeInfo] = []
    for sel in selectors:
        sel = sel.strip()
        by_ip = [n for n in nodes if n.node_ip == sel]
        if by_ip:
            matches = by_ip
        elif _NODE_ID.match(sel):
            matches = [n for n in nodes if n.node_id.lower().startswith(sel.lower())]
        else:
            raise UsageError(f"invalid node selector {sel!r}: give a node id, id prefix or IP")
        if not matches:
            known = ", ".join(f"{n.node_id[:12]} ({n.node_ip})" for n in nodes)
            raise NotFoundError(f"no node matches {sel!r}; nodes: {known}")
        alive_matches = [n for n in matches if n.alive] or matches
        if len(alive_matches) > 1 and not by_ip:
            cands = ", ".join(n.node_id for n in alive_matches)
            raise UsageError(f"node prefix {sel!r} is ambiguous: {cands}")
        # Several nodes may share one IP (nodes on one host): an IP selects each of them.
        chosen.extend(n for n in alive_matches if n not in chosen)
    return chosen


def list_nodes(address: ClusterAddress, timeout_s: float = LIST_TIMEOUT_S) -> list[NodeInfo]:
    """Every node the GCS knows (alive and dead), head first, read without connecting a driver."""

    def read() -> list[NodeInfo]:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]  # compiled, no stub

        client = GcsClient(address=address.gcs)
        infos = list(client.get_all_node_info(timeout=timeout_s).values())
        if any(isinstance(info, dict) for info in infos):
            # Ray 2.9's client answers {name, state, labels} per node: read the whole table raw.
            from ray.core.generated import gcs_service_pb2

            reply = gcs_service_pb2.GetAllNodeInfoReply.FromString(  # type: ignore[attr-defined]  # generated
                node_info_reply(address.gcs, timeout_s))
            infos = list(reply.node_info_list)
        return [NodeInfo.from_gcs(info) for info in infos]

    try:
        nodes = call_with_timeout(read, timeout_s + 1.0, what=f"listing nodes from {address.gcs}")
    except TimeoutError as exc:
        raise UnreachableError(f"{exc}: the GCS at {address.gcs} accepts connections but does not "
                               "answer") from None
    except Exception as exc:  # noqa: BLE001 - Ray raises several unrelated types here
        raise UnreachableError(f"the GCS at {address.gcs} did not list its nodes: {exc}") from None
    return sorted(nodes, key=lambda n: (not n.is_head, not n.alive, n.node_id))


class _DropSigtermNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_SIGTERM_NOISE)


@contextmanager
def _quiet_init() -> Iterator[None]:
    """Drop only Ray's "SIGTERM handler is not set" warning while ray.init() runs in a thread."""
    logger = logging.getLogger("ray._private.worker")
    noise = _DropSigtermNoise()
    logger.addFilter(noise)
    try:
        yield
    finally:
        logger.removeFilter(noise)


# The GCS address of the connection connect() opened in this process (None: it opened none).
# Only that connection may be closed by this tool; a driver's or a notebook's never is.
_opened: str | None = None


def connect(address: ClusterAddress, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Connect this process to the cluster as a quiet driver (no-op when already connected there).

    Connected to another cluster already: if this tool opened that connection, it is closed first
    (a helper must never run on the wrong cluster); if the caller opened it (a driver, a notebook
    running `pipeline.run()`), the call is refused with UsageError: disconnecting it would break
    the caller.
    """
    import ray

    global _opened
    if ray.is_initialized():
        try:
            current = ray.get_runtime_context().gcs_address
        except Exception:  # noqa: BLE001 - unknown: keep the connection we have
            return
        if _same_gcs(current, address.gcs):
            return
        if _opened is None or not _same_gcs(current, _opened):
            raise UsageError(
                f"this process is already connected to the Ray cluster at {current}, which debug-hang did "
                f"not open; it will not disconnect it to reach {address.gcs}. Diagnose from a separate "
                f"process (scripts/diagnose_ray_hang.sh {address.gcs}), or give the address this "
                f"process is connected to")
        ray.shutdown()
        _opened = None

    def init() -> None:
        with _quiet_init():
            ray.init(
                address=address.gcs,
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level=logging.WARNING,
                configure_logging=False,
            )

    # Inside a `ray job submit` job, RAY_ADDRESS already points at the cluster; honour it.
    try:
        call_with_timeout(init, timeout_s, what=f"connecting to the cluster at {address.gcs}")
    except TimeoutError as exc:
        raise UnreachableError(str(exc)) from None
    except ConnectionError as exc:
        raise UnreachableError(f"cannot connect to {address.gcs}: {exc}") from None
    except RuntimeError as exc:
        if is_version_mismatch(exc):
            raise VersionMismatchError(version_mismatch_message(exc)) from None
        raise
    _opened = address.gcs


class VersionMismatchError(UnreachableError):
    """Ray refused a driver from here: this side's Ray or Python is not the cluster's."""

    kind = VERSION_MISMATCH


def is_version_mismatch(exc: BaseException) -> bool:
    """Ray's `check_version_info` refusal ("Version mismatch: The cluster was started with ...")."""
    return isinstance(exc, RuntimeError) and str(exc).lstrip().startswith("Version mismatch")


def version_mismatch_message(exc: BaseException) -> str:
    """Ray's multi-line refusal as one line, with the fix."""
    said = " ".join(str(exc).split())
    return (f"Ray refused to connect from here: {said[:400]}. Install the cluster's Ray (and Python) version "
            "beside debug-hang and run it with that Python (DEBUG_HANG_PYTHON=... scripts/diagnose_ray_hang.sh)")


def _same_gcs(current: str | None, wanted: str) -> bool:
    """True when two host:port GCS addresses name the same server (localhost == 127.0.0.1,
    a host name == its address)."""
    if not current:
        return True

    def norm(addr: str) -> tuple[str, str]:
        host, _, port = addr.rpartition(":")
        host = "127.0.0.1" if host in ("localhost", "") else host
        return host, port

    (h1, p1), (h2, p2) = norm(current), norm(wanted)
    if p1 != p2:
        return False
    return h1 == h2 or bool(_addresses(h1) & _addresses(h2))


def _addresses(host: str) -> set[str]:
    """The IP addresses of a host name (bounded: 2 s), {host} itself when it does not resolve."""
    try:
        infos = call_with_timeout(lambda: socket.getaddrinfo(host, None), 2.0, what=f"resolving {host}")
    except (OSError, TimeoutError):
        return {host}
    return {str(info[4][0]) for info in infos} | {host}


def _node_states() -> dict[str, tuple[bool, str | None]]:
    """{node_id: (alive, death reason)} from the connected driver's GCS view; {} on failure."""
    import ray

    try:
        rows = ray.nodes()  # type: ignore[no-untyped-call]
    except Exception:  # noqa: BLE001 - liveness is a hint for the message, not a requirement
        return {}
    states: dict[str, tuple[bool, str | None]] = {}
    for row in rows:
        message = str(row.get("DeathReasonMessage") or "").strip() or None
        states[str(row.get("NodeID"))] = (bool(row.get("Alive")), message)
    return states


def _dead_message(reason: str | None, during: bool) -> str:
    when = "died during the run" if during else "is dead"
    return f"node {when} (GCS: {reason or 'no reason recorded'}); nothing could run there"


def run_on_nodes(fn: Callable[..., Any], args_by_node: dict[str, tuple[Any, ...]],
                 timeout_s: float = NODE_TIMEOUT_S, max_in_flight: int = MAX_NODES_IN_FLIGHT,
                 node_timeout_s: float | None = None, deadline_kw: str | None = None) -> dict[str, NodeRun]:
    """Run `fn(*args)` once on each node in `args_by_node`, in parallel; needs `connect()` first.

    At most `max_in_flight` helpers run at once, the next submitted as one finishes (in the
    order of `args_by_node`): 250 nodes never mean 250 results arriving together. Every helper
    is given up on at its own absolute deadline: `node_timeout_s` after its submission (so a node
    that never answers frees its slot for the others), and never later than `timeout_s` after
    the call. With `deadline_kw`, `fn` also gets that keyword: the wall-clock time (time.time())
    by which its answer must be sent, ANSWER_MARGIN_S before its node's deadline, so that a
    helper whose turn came late still answers with what it has, in time.

    Returns one NodeRun per node: its value, or an error (with a `kind` from NODE_ERROR_KINDS)
    saying whether the node is dead or unknown, the helper failed or crashed, it did not report
    by its deadline (never scheduled: no worker could start there in time), or the call's time
    ran out before its turn came. Dead and unknown nodes are reported at once, without
    submitting anything. The other nodes' results are kept whatever one node does.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ship_by_value(fn)
    remote_fn = ray.remote(num_cpus=0, max_retries=1)(fn)
    start = time.monotonic()
    end = start + timeout_s
    per_node = timeout_s if node_timeout_s is None else min(node_timeout_s, timeout_s)
    min_start = min(MIN_START_S, timeout_s / 2)
    slots = max(1, max_in_flight)
    runs: dict[str, NodeRun] = {}
    queue = _live_only(args_by_node, runs)
    queue.reverse()  # popped from the end: submitted in the caller's order
    # In flight: ref -> (node id, its submission time, its absolute deadline).
    flight: dict[Any, tuple[str, float, float]] = {}
    expired: list[tuple[str, float, float]] = []
    while queue or flight:
        now = time.monotonic()
        while queue and len(flight) < slots and end - now >= min_start:
            node_id, args = queue.pop()
            strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            node_end = min(now + per_node, end)
            kwargs = {deadline_kw: time.time() + node_end - now - ANSWER_MARGIN_S} if deadline_kw else {}
            try:
                ref = remote_fn.options(scheduling_strategy=strategy,
                                        name=f"debug-hang:{fn.__name__}").remote(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - submission itself can fail on a dead node
                runs[node_id] = NodeRun(node_id, kind=HELPER_FAILED,
                                        error=f"could not submit helper task: {exc}")
                continue
            flight[ref] = (node_id, now, node_end)
        if not flight:
            break  # nothing running and no time left to start the rest
        first_deadline = min(d for _, _, d in flight.values())
        ready, _ = ray.wait(list(flight), num_returns=1, timeout=max(first_deadline - time.monotonic(), 0.0))
        for ref in ready:
            node_id, submitted, _ = flight.pop(ref)
            runs[node_id] = _fetch(ref, node_id, submitted)
        now = time.monotonic()
        for ref, (node_id, submitted, deadline) in list(flight.items()):
            if now >= deadline:
                del flight[ref]
                expired.append((node_id, submitted, deadline))
                _cancel(ref)  # frees the node's worker too
    for node_id, _ in queue:
        runs[node_id] = NodeRun(node_id, kind=NOT_SCHEDULED, error=(
            f"not probed: the {timeout_s:.0f}s timeout ran out before its turn (at most {slots} "
            "nodes at once; slow or silent nodes held the slots)"))
    runs.update(_silent_runs(expired))
    return runs


def ship_by_value(fn: Callable[..., Any]) -> None:
    """Make `fn` travel by value: Ray's cloudpickle then sends this package's code with it, so
    nothing but Ray and py-spy need be installed on the nodes. Only the declared helpers
    (node_probe.SHIPPED, checked by tests/test_shipped.py on every supported Ray) may go."""
    import ray.cloudpickle

    import debug_hang
    from debug_hang.probe.node_probe import SHIPPED

    if fn not in SHIPPED:
        raise ValueError(f"{getattr(fn, '__name__', fn)!r} is not one of the helpers shipped to nodes (node_probe.SHIPPED)")
    ray.cloudpickle.register_pickle_by_value(debug_hang)  # type: ignore[no-untyped-call]


def _live_only(args_by_node: dict[str, tuple[Any, ...]],
               runs: dict[str, NodeRun]) -> list[tuple[str, tuple[Any, ...]]]:
    """The nodes worth a helper; dead and unknown ones get their error row in `runs` at once."""
    states = _node_states()
    live: list[tuple[str, tuple[Any, ...]]] = []
    for node_id, args in args_by_node.items():
        if states and node_id not in states:
            runs[node_id] = NodeRun(node_id, kind=NODE_UNKNOWN,
                                    error="node unknown to the GCS (wrong id, or removed)")
        elif states and not states[node_id][0]:
            runs[node_id] = NodeRun(node_id, kind=NODE_DEAD,
                                    error=_dead_message(states[node_id][1], during=False))
        else:
            live.append((node_id, args))
    return live


def _fetch(ref: Any, node_id: str, submitted: float) -> NodeRun:
    """A finished helper's value, or why it has none."""
    import ray

    try:
        value = ray.get(ref, timeout=FETCH_TIMEOUT_S)
        return NodeRun(node_id, value=value, seconds=time.monotonic() - submitted)
    except Exception as exc:  # noqa: BLE001 - any failure of the helper is data
        kind, error = _classify(exc)
        return NodeRun(node_id, error=error, kind=kind, seconds=time.monotonic() - submitted)


def _silent_runs(expired: list[tuple[str, float, float]]) -> dict[str, NodeRun]:
    """Error rows for helpers given up on at their deadline: the node died, or never ran them."""
    if not expired:
        return {}
    states = _node_states()
    runs: dict[str, NodeRun] = {}
    for node_id, submitted, deadline in expired:
        alive, reason = states.get(node_id, (True, None))
        if not alive:
            kind, error = NODE_DEAD, _dead_message(reason, during=True)
        else:
            kind, error = NOT_SCHEDULED, (
                f"helper task did not report within {deadline - submitted:.0f}s: it was never scheduled or "
                "never started there (no worker process could start, node overloaded or "
                "unresponsive); the node is still listed alive")
        runs[node_id] = NodeRun(node_id, error=error, kind=kind, seconds=time.monotonic() - submitted)
    return runs


def _cancel(ref: Any) -> None:
    import ray

    try:
        ray.cancel(ref, force=True)  # our own helper only; never the job's tasks
    except Exception:  # noqa: BLE001,S110 - best effort
        pass


def _classify(exc: BaseException) -> tuple[str, str]:
    """(kind, message) for an exception raised by ray.get on a helper's result."""
    import ray.exceptions as rex

    short = _short_error(exc)
    if isinstance(exc, rex.NodeDiedError):
        return NODE_DEAD, f"node died while the helper ran: {short}"
    if isinstance(exc, rex.TaskUnschedulableError):
        return NODE_DEAD, f"helper could not be scheduled there (node gone): {short}"
    if isinstance(exc, (rex.WorkerCrashedError, rex.LocalRayletDiedError)):
        return HELPER_CRASHED, f"helper's worker process died (node lost, OOM or killed): {short}"
    if isinstance(exc, rex.TaskCancelledError):
        return NOT_SCHEDULED, f"helper was cancelled: {short}"
    if isinstance(exc, rex.RayTaskError):
        # The helper's own code raised, or the node could not rebuild it (a function shipped by
        # value fails to unpickle there): the tool's failure, not the node's or the job's.
        return HELPER_ERROR, f"helper error: {short}"
    return HELPER_FAILED, f"helper failed: {short}"


def _short_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    tail = next((line for line in reversed(text) if line.strip()), type(exc).__name__)
    return f"{type(exc).__name__}: {tail[:300]}"

