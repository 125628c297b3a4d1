"""Ray Train (V2) jobs: the rank of each RayTrainWorker, and the calls that are not progress.

Ray Train runs the user's train function in a thread of each `RayTrainWorker` actor, started and
polled by a `TrainController` actor. A worker's rank is set inside its process (os.environ), so
neither /proc/PID/environ nor the actor's runtime_env holds it; the controller logs it once, when
the worker group starts, one line per worker:

    - (ip=10.0.0.5, pid=4242) world_rank=0, local_rank=0, node_rank=0

The controller polls every worker (`RayTrainWorker.poll_status`) about once a second, hung or
not: those completions are not the job's progress. ray.train.report is a barrier: each rank that
calls it holds one `SynchronizationActor.broadcast_from_rank_zero` call until all ranks have.
"""

from __future__ import annotations

import re
from typing import Any

from debug_hang.collect.state import DashboardClient
from debug_hang.errors import UnreachableError
from debug_hang.model import ProcessRef
from debug_hang.snapshot import CONTROLLER_CLASS, WORKER_CLASS

CONTROLLER_LOG_LINES = 2000  # the worker-group line comes early; the controller logs little after it
_WORKER_LINE = re.compile(r"\(ip=(?P<ip>[^,\s)]+), pid=(?P<pid>\d+)\) world_rank=(?P<rank>\d+)")


def parse_worker_ranks(text: str) -> dict[tuple[str, int], int]:
    """(node IP, pid) -> world rank from a TrainController log; a later group start wins."""
    ranks: dict[tuple[str, int], int] = {}
    for match in _WORKER_LINE.finditer(text):
        ranks[(match["ip"], int(match["pid"]))] = int(match["rank"])
    return ranks


def worker_ranks(client: DashboardClient, job_id: str | None, actors: list[dict[str, Any]],
                 nodes: list[dict[str, Any]]) -> tuple[dict[ProcessRef, int], list[str]]:
    """(node_id, pid) -> world rank of the job's Ray Train workers, read from its controllers'
    logs by the dashboard; ({}, []) when the job runs no Ray Train. Errors are returned, not raised."""
    controllers = [a for a in actors if a.get("job_id") == job_id and a.get("class_name") == CONTROLLER_CLASS
                   and a.get("state") == "ALIVE" and a.get("actor_id")]
    if not controllers:
        return {}, []
    workers = [a for a in actors if a.get("job_id") == job_id and a.get("class_name") == WORKER_CLASS]
    ip_of_node = {n.get("node_id"): str(n.get("node_ip")) for n in nodes}
    ranks: dict[ProcessRef, int] = {}
    errors: list[str] = []
    for actor in controllers:
        try:
            text = client.log_file([("actor_id", actor["actor_id"]), ("suffix", "err")], CONTROLLER_LOG_LINES)
        except UnreachableError as exc:
            errors.append(f"Ray Train controller {exc}")
            continue
        for (ip, pid), rank in parse_worker_ranks(text).items():
            # The worker actor with that pid (on the node with that IP when PIDs repeat).
            same_pid = [w for w in workers if int(w.get("pid") or 0) == pid]
            if len(same_pid) > 1:
                same_pid = [w for w in same_pid if ip_of_node.get(w.get("node_id")) == ip]
            if len(same_pid) == 1:
                ranks[ProcessRef(same_pid[0].get("node_id"), pid)] = rank
    return ranks, errors
