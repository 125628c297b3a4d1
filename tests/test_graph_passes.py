"""Each pass of the wait-for graph build, on recorded real captures (tests/data/cases/*).

A pass is run on a Builder that every earlier pass has already seen, and each test checks that
the effect appears with that pass and not before it. Where no capture shows a mechanism, the input
is made from recorded rows (a recorded task row re-pointed), never typed from scratch.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from debug_hang.analyse import graph as G
from debug_hang.analyse.analysis import graph_inputs
from debug_hang.analyse.graph.builder import PassFn
from debug_hang.analyse.graph.collectives import edges_collectives
from debug_hang.analyse.graph.edges import UNRECOGNISED_EDGE, edge_of, follow_edges
from debug_hang.analyse.graph.events import detect_async_await, detect_event_waits
from debug_hang.analyse.graph.locks import detect_file_lock_waits, detect_lock_waits
from debug_hang.analyse.graph.processes import add_actor_nodes, add_process_nodes, index_running_tasks, note_queued_calls
from debug_hang.analyse.graph.raycalls import edges_supervisors, edges_train_barrier, follow_own_calls
from debug_hang.analyse.graph.resources import edges_pending_actors, edges_resource_holders
from debug_hang.analyse.patterns import EDGES, catalog
from debug_hang.pipeline import load_capture

pytestmark = pytest.mark.unit
CASES = Path(__file__).resolve().parent / "data" / "cases"


def builder(case: str) -> G.Builder:
    cap = load_capture(CASES / case)
    return G.Builder.start(graph_inputs(cap.job, cap.snapshot, cap.collection))


def run_before(b: G.Builder, step: PassFn) -> G.Builder:
    """Run every pass that comes before `step` (and not `step` itself)."""
    for earlier in G.PASSES[:[p.run for p in G.PASSES].index(step)]:
        earlier.run(b)
    return b


def node_named(b: G.Builder, name: str) -> G.GNode:
    return next(n for n in b.g.nodes.values() if n.class_name == name or n.name == name)


def edges(b: G.Builder) -> set[tuple[str | None, str | None]]:
    return {(b.g.nodes[e.src].class_name, b.g.nodes[e.dst].class_name) for e in b.g.edges}


def test_every_catalog_edge_has_a_handler_and_every_handler_is_used() -> None:
    used = {p.edge for p in catalog().values()}
    assert used <= set(G.HANDLERS), f"edges with no implementation: {used - set(G.HANDLERS)}"
    assert set(G.HANDLERS) == set(EDGES), "the declared handlers and the catalog's EDGES must name the same edges"
    unused = set(G.HANDLERS) - used - {UNRECOGNISED_EDGE}
    assert not unused, f"handlers no pattern reaches: {unused}"


def test_passes_are_named_functions_in_one_tuple() -> None:
    names = [p.name for p in G.PASSES]
    assert len(names) == len(set(names)) and names[0] == "add_process_nodes" and "follow_edges" in names


def test_add_process_nodes_one_node_per_dumped_process() -> None:
    b = builder("actor_call_cycle")
    add_process_nodes(b)
    assert len(b.g.nodes) == len(b.inp.verdicts) == len(b.by_pid) == len(b.verdicts)
    driver = next(n for n in b.g.nodes.values() if n.kind == "driver")
    assert driver.name.startswith("driver (")
    assert {"Learner", "ParameterServer"} <= {n.class_name for n in b.g.nodes.values()}


def test_add_actor_nodes_adds_the_dead_rank() -> None:
    b = run_before(builder("dead_rank"), add_actor_nodes)
    assert not any(n.state == "dead" for n in b.g.nodes.values())
    add_actor_nodes(b)
    dead = [n for n in b.g.nodes.values() if n.state == "dead"]
    assert len(dead) == 1 and dead[0].evidence[0].startswith("actor DEAD")
    assert dead[0].rank is not None


def test_index_running_tasks_a_call_no_thread_shows_is_not_idleness() -> None:
    # Recorded rows made to show the mechanism: an idle actor's recorded RUNNING row pointed at it.
    b = run_before(builder("producer_never_produces"), index_running_tasks)
    idle_key = next(k for k, n in b.g.nodes.items() if n.state == "idle" and n.actor_id)
    proc = b.verdicts[idle_key].process
    task = dataclasses.replace(next(t for t in b.tasks if t.state == "RUNNING" and t.worker_pid), worker_pid=proc.pid,
                               node_id=proc.node_id, actor_id=proc.actor_id, name="RolloutWorker.stream")
    b.tasks.append(task)
    index_running_tasks(b)
    node = b.g.nodes[idle_key]
    assert node.state == "unknown" and node.pattern is None
    assert any("streaming generator" in e for e in node.evidence)


def test_detect_lock_waits_two_threads_at_two_lock_lines() -> None:
    b = run_before(builder("lock_order_deadlock"), detect_lock_waits)
    assert node_named(b, "CheckpointStore").pattern == "lock-wait"
    detect_lock_waits(b)
    assert node_named(b, "CheckpointStore").pattern == "lock-order-deadlock"


def test_detect_lock_waits_a_lock_nobody_else_holds() -> None:
    b = run_before(builder("reentrant_lock_del"), detect_lock_waits)
    detect_lock_waits(b)
    node = node_named(b, "ShardCache")
    assert node.pattern == "lock-self-deadlock" and any("__del__" in e for e in node.evidence)


def test_follow_edges_closes_the_actor_call_cycle() -> None:
    b = run_before(builder("actor_call_cycle"), follow_edges)
    assert not b.g.edges
    follow_edges(b)
    assert {("Learner", "ParameterServer"), ("ParameterServer", "Learner")} <= edges(b)


def test_edge_of_dispatches_from_the_catalog() -> None:
    b = run_before(builder("pending_placement_group"), follow_edges)
    waiting = next(k for k, n in b.g.nodes.items() if n.pattern == "pg-ready-wait")
    assert edge_of(b, waiting) == catalog()["pg-ready-wait"].edge == "placement-group"
    follow_edges(b)
    assert any(b.g.nodes[e.dst].kind == "placement_group" for e in b.g.out(waiting))


def test_follow_own_calls_a_poll_over_unfinished_calls_is_a_wait() -> None:
    # The ReplayBuffer's recorded poll, given a recorded unfinished call re-pointed as its own.
    b = run_before(builder("producer_never_produces"), follow_edges)
    key = next(k for k, n in b.g.nodes.items() if n.pattern == "poll-never-satisfied")
    own = b.running[key][0]
    call = dataclasses.replace(next(t for t in b.tasks if t.actor_id and t.actor_id != own.actor_id and t.type == "ACTOR_TASK"),
                               parent_task_id=own.task_id, state="SUBMITTED_TO_WORKER", task_id="ff" * 12)
    b.tasks.append(call)
    b.index = G.TaskIndex.of(b.tasks)
    follow_own_calls(b, key)
    assert b.g.nodes[key].pattern == "ray-get-wait" and b.g.out(key)


def test_follow_own_calls_without_calls_leaves_the_poll_a_root_cause() -> None:
    b = run_before(builder("producer_never_produces"), follow_edges)
    key = next(k for k, n in b.g.nodes.items() if n.pattern == "poll-never-satisfied")
    follow_own_calls(b, key)
    assert b.g.nodes[key].pattern == "poll-never-satisfied" and not b.g.out(key)


def test_edges_collectives_point_at_the_rank_that_skipped() -> None:
    b = run_before(builder("gloo_skipped_allreduce"), edges_collectives)
    edges_collectives(b)
    skipped = [n for n in b.g.nodes.values() if n.pattern == "collective-skipped"]
    assert len(skipped) == 1
    assert len(b.g.into(skipped[0].key)) == 3


def test_edges_collectives_mismatch_names_the_odd_rank() -> None:
    b = run_before(builder("collective_mismatch"), edges_collectives)
    edges_collectives(b)
    assert [n.pattern for n in b.g.nodes.values()].count("collective-mismatch") == 1


def test_edges_pending_actors_lead_to_the_infeasible_request() -> None:
    b = run_before(builder("infeasible_resource"), edges_pending_actors)
    edges_pending_actors(b)
    res = [n for n in b.g.nodes.values() if n.kind == "resource"]
    assert res and res[0].state == "infeasible" and b.g.into(res[0].key)


def test_edges_resource_holders_lead_the_starved_request_to_the_blocked_holders() -> None:
    b = run_before(builder("starvation"), edges_resource_holders)
    before = len(b.g.edges)
    edges_resource_holders(b)
    added = b.g.edges[before:]
    assert added and all(e.why == "resource-starvation" and b.g.nodes[e.src].kind == "resource" for e in added)
    assert {b.g.nodes[e.dst].class_name for e in added} == {"ShardLoader"}


def test_edges_train_barrier_names_the_rank_that_never_reported() -> None:
    b = run_before(builder("ray_train_report_rank0"), edges_train_barrier)
    edges_train_barrier(b)
    sync = node_named(b, "SynchronizationActor")
    assert sync.pattern == "train-barrier-wait"
    assert [e.why for e in b.g.out(sync.key)] == ["train-barrier"]


def test_detect_event_waits_setter_queued_behind_the_waiter() -> None:
    b = run_before(builder("coordinator_waits_for_registrations"), detect_event_waits)
    detect_event_waits(b)
    assert node_named(b, "Coordinator").pattern == "event-setter-queued"


def test_edges_supervisors_the_controller_waits_on_its_workers() -> None:
    b = run_before(builder("ray_train_early_stop"), edges_supervisors)
    edges_supervisors(b)
    ctrl = node_named(b, "TrainController")
    assert ctrl.state == "blocked" and {e.why for e in b.g.out(ctrl.key)} == {"supervises"}


def test_detect_async_await_on_an_object_nobody_resolves() -> None:
    b = run_before(builder("async_weight_store_wrong_instance"), detect_async_await)
    assert node_named(b, "WeightStore").pattern is None
    detect_async_await(b)
    assert node_named(b, "WeightStore").pattern == "async-await-stuck"


def test_note_queued_calls_on_the_busy_actor() -> None:
    b = run_before(builder("actor_call_cycle"), note_queued_calls)
    note_queued_calls(b)
    assert any("actor-call-queued" in e for n in b.g.nodes.values() for e in n.evidence)


def test_edges_resource_holders_leads_the_pending_group_to_the_leaked_one() -> None:
    b = run_before(builder("sweep_leaked_placement_group"), edges_resource_holders)
    pending = node_named(b, "placement group trial-1")
    assert not b.g.out(pending.key)  # before the pass, the waiting group is the end of the chain
    edges_resource_holders(b)
    (edge,) = b.g.out(pending.key)
    holder = b.g.nodes[edge.dst]
    assert (edge.why, holder.name, holder.pattern) == ("held-by", "placement group trial-0", "placement-group-leaked")


def test_edges_resource_holders_leads_the_starved_request_to_the_idle_actors() -> None:
    b = run_before(builder("idle_evaluators_hold_cpus"), edges_resource_holders)
    request = next(n for n in b.g.nodes.values() if n.kind == "resource")
    assert request.state == "starved" and not b.g.out(request.key)
    edges_resource_holders(b)
    holders = [b.g.nodes[e.dst] for e in b.g.out(request.key)]
    assert sorted(h.class_name or "" for h in holders) == ["Evaluator"] * 3
    assert all(h.pattern == "idle-actor-holds-resources" for h in holders)


def test_detect_file_lock_waits_reads_the_kernel_not_the_stack() -> None:
    b = run_before(builder("run_dir_file_lock"), detect_file_lock_waits)
    writer = node_named(b, "MetricsWriter")
    assert writer.pattern is None  # the stack alone: idle at a line, no recognised wait
    detect_file_lock_waits(b)
    assert writer.pattern == "file-lock-wait" and edge_of(b, writer.key) == "lock-holder"
    follow_edges(b)
    assert ("MetricsWriter", "CheckpointManager") in edges(b)


def _pipe_child_info(b: G.Builder) -> dict[str, object]:
    return next(i for i in b.inp.info.values() if i.get("std_pipes"))


def test_follow_edges_closes_a_pipe_full_cycle_from_the_childs_kernel_wait() -> None:
    b = run_before(builder("subprocess_pipe_full"), follow_edges)
    assert not any(e.why == "pipe-write-wait" for e in b.g.edges)
    follow_edges(b)
    back = [e for e in b.g.edges if e.why == "pipe-write-wait"]
    assert len(back) == 1 and b.g.nodes[back[0].dst].class_name == "Evaluator"
    child = b.g.nodes[back[0].src]
    assert child.pattern == "pipe-write-wait" and child.state == "blocked"
    assert any("no byte written" in e for e in child.evidence)


@pytest.mark.parametrize("change", ["drained", "not-parents", "not-asleep"])
def test_a_pipe_the_child_writes_on_or_the_parent_does_not_read_closes_no_cycle(change: str) -> None:
    # The recorded capture with one of the facts the rule reads changed: the child wrote during the
    # window (someone drains the pipe), the parent does not hold the read end, the child is not
    # asleep in a pipe write. Each alone means no pipe-full deadlock: the child stays the chain's end.
    b = builder("subprocess_pipe_full")
    info = _pipe_child_info(b)
    if change == "drained":
        info["progress"]["io"]["wchar"] = 65536  # type: ignore[index]
    elif change == "not-parents":
        for pipe in info["std_pipes"].values():  # type: ignore[attr-defined]
            pipe["parent_ends"] = []
    else:
        info["wchan"] = {tid: "do_select" for tid in info["wchan"]}  # type: ignore[attr-defined]
    for step in G.PASSES[:[p.run for p in G.PASSES].index(follow_edges) + 1]:
        step.run(b)
    assert not any(e.why == "pipe-write-wait" for e in b.g.edges)
    assert any(n.pattern == "child-process-hang" for n in b.g.nodes.values())
