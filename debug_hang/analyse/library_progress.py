"""What Ray's libraries did in the window, for the verdict: their own progress (a dataset's
operators output more blocks, a Serve replica finished requests) and the calls their machinery
makes, which are not the job's progress. Pure: reruns on captures.

Ray Data's streaming executor calls its helper actors on a timer (stats, actor locations,
autoscaling requests) and runs its upstream operators until back-pressure stops them, whether or
not the consumer gets a block: those calls finish while the pipeline is stuck. Where a running
dataset's operator counters were read, a finished call is the job's progress only when it is the
work of the stage the consumer reads from, or was not made by Ray's machinery; what Ray's machinery
is, is read by module path: a process whose running method lives in one of Ray's library packages
(SplitCoordinator.get in ray/data/...), or the thread running Ray Data's executor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from debug_hang.analyse.graph.libraries import EXECUTOR_FRAME, finished_requests
from debug_hang.analyse.graph.model import GraphInputs
from debug_hang.analyse.patterns import is_library
from debug_hang.libraries import ACCESS_LINE, LIBRARY_FILE, Dataset, Operator
from debug_hang.model import Process, ProcessRef
from debug_hang.rows import ActorRow, TaskRow

# Ray's own frames between its worker loop and the method it runs (the method is the first other one).
_RAY_CORE = ("ray/_private/", "ray/util/tracing/", "ray/_raylet", "ray/actor.py", "ray/remote_function.py")


def library_method(proc: Process) -> str | None:
    """The file of the method a Ray worker runs when it lives in one of Ray's library packages
    (the frame Ray's executor calls, in any thread), else None: the module path that says the
    actor's class is Ray's."""
    for thread in proc.threads:
        outer = [f for f in reversed(thread.frames) if not f.native and not f.file.endswith("threading.py")]
        if not outer or not _ray_core(outer[0].file):
            continue  # not a thread Ray runs calls on
        method = next((f for f in outer if not _ray_core(f.file)), None)
        if method is not None and LIBRARY_FILE.search(method.file):
            return method.short_file
    return None


def _ray_core(path: str) -> bool:
    return any(c in path for c in _RAY_CORE) or path.endswith("default_worker.py")


def machinery(proc: Process) -> bool:
    """The process runs only Ray's machinery: the method it runs lives in a Ray library and no
    thread runs the job's code (a SplitCoordinator; not a MapWorker running a UDF), or a thread
    runs Ray Data's streaming executor (its calls: operator work, stats, actor locations)."""
    if hosts_executor(proc):
        return True
    return library_method(proc) is not None and not any(
        not is_library(f) for t in proc.threads for f in t.frames if not f.native)


def hosts_executor(proc: Process) -> bool:
    """A thread of the process runs Ray Data's streaming executor."""
    return any(EXECUTOR_FRAME.search(f.file) for t in proc.threads for f in t.frames)


@dataclass
class LibraryWork:
    """The job's running datasets and who runs Ray's machinery, from one capture."""

    datasets: list[Dataset] = field(default_factory=list)
    machinery: set[str] = field(default_factory=set)  # task ids of calls running in Ray's machinery
    output_ops: dict[str, Operator] = field(default_factory=dict)  # dataset -> the stage its consumer reads
    actors: dict[str, ActorRow] = field(default_factory=dict)

    def operator_of(self, task: TaskRow) -> tuple[Dataset, Operator] | None:
        for ds in self.datasets:
            for op in ds.operators:
                actor = self.actors.get(task.actor_id or "")
                if (not task.actor_id and task.name == op.name) or (actor is not None and (actor.class_name or "").endswith(f"({op.name})")):
                    return ds, op
        return None

    def not_progress(self, task: TaskRow) -> bool:
        """A finished call that is Ray's machinery, not the job's progress."""
        if not self.datasets:
            return False
        found = self.operator_of(task)
        if found is not None:
            ds, op = found
            out = self.output_ops.get(ds.dataset)
            return out is not None and op.operator != out.operator  # upstream of the stage the consumer reads
        return task.parent_task_id in self.machinery


def library_work(inputs: GraphInputs) -> LibraryWork:
    """Who runs Ray's machinery, where the job's dataset state was read (else nothing is excluded)."""
    job_id = inputs.job.job_id
    datasets = [ds for ds in inputs.libraries.datasets if ds.state == "RUNNING" and ds.job_id in (None, job_id)]
    work = LibraryWork(datasets=datasets, actors={a.actor_id: a for a in inputs.actors})
    if not datasets:
        return work
    machinery_refs = {v.process.ref for v in inputs.verdicts if machinery(v.process)}
    by_actor: dict[str, list[TaskRow]] = {}
    for task in inputs.tasks:
        if task.actor_id:
            by_actor.setdefault(task.actor_id, []).append(task)
    for v in inputs.verdicts:
        if v.process.ref not in machinery_refs:
            continue
        own = by_actor.get(v.process.actor_id or "", []) if v.process.actor_id else []
        own += [t for t in inputs.tasks if t.worker is not None and t.worker == v.process.ref and t.state == "RUNNING"]
        if v.process.role == "driver":
            work.machinery.add(inputs.job.driver_task_id)
        work.machinery |= {t.task_id for t in own}
    for ds in datasets:
        for op in reversed(ds.operators):
            if any(work.operator_of(t) == (ds, op) for t in inputs.tasks):
                work.output_ops[ds.dataset] = op
                break
    return work


def library_progress(inputs: GraphInputs, work: LibraryWork, window_refs: dict[ProcessRef, str]) -> list[str]:
    """Progress the libraries' own readings show: a running dataset delivered more blocks (the
    dataset's, or the stage its consumer reads from, output advanced between the two readings;
    an upstream stage filling a queue behind a stuck one is not progress); a Serve replica's
    request log gained finished requests in the window. `window_refs` names the processes read."""
    state = inputs.libraries
    out: list[str] = []
    after = {ds.dataset: ds for ds in state.datasets_after or []}
    for ds in state.datasets:
        later = after.get(ds.dataset)
        if later is None or ds.job_id not in (None, inputs.job.job_id):
            continue
        window = f"over {state.data_window_s or 0:.1f}s (Ray Data endpoint)"
        stage = work.output_ops.get(ds.dataset)
        before = next((o for o in ds.operators if stage is not None and o.operator == stage.operator), None)
        now = next((o for o in later.operators if stage is not None and o.operator == stage.operator), None)
        if ds.progress is not None and later.progress is not None and later.progress > ds.progress:
            out.append(f"dataset {ds.dataset} delivered {later.progress - ds.progress} more block(s) {window}")
        elif before is not None and now is not None and (now.progress or 0) > (before.progress or 0):
            out.append(f"dataset {ds.dataset}: operator {now.name} (the stage its consumer reads) output "
                       f"{(now.progress or 0) - (before.progress or 0)} more block(s) {window}")
    names = {r.log_file_path.rsplit("/", 1)[-1]: r for r in state.replicas if r.log_file_path}
    for ref, label in window_refs.items():
        for log in ((inputs.info.get(ref) or {}).get("progress") or {}).get("logs") or []:
            replica = names.get(str(log.get("name") or ""))
            done = finished_requests(log) if replica is not None else 0
            if replica is not None and done:
                example = next((str(x) for x in log.get("new") or [] if ACCESS_LINE.search(str(x))), "")
                out.append(f"{label} finished {done} Serve request(s) of {replica.app}/{replica.deployment} in the window "
                           f"(its request log: {example[-120:]})")
    return out
