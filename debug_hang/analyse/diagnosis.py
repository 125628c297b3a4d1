"""The result of one diagnosis: what was read, what was concluded, and why.

Every renderer (report.md, diagnosis.json, the stdout summary) reads this one object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from debug_hang.analyse.busy import BusyWork
from debug_hang.analyse.flight_recorder import FRAnalysis
from debug_hang.analyse.graph import WaitGraph
from debug_hang.analyse.patterns import ProcessVerdict
from debug_hang.analyse.progress import ProcessProgress
from debug_hang.analyse.rootcause import Chain, RootCause, chains
from debug_hang.model import Collection, CollectionError, Evidence
from debug_hang.rows import Rows
from debug_hang.snapshot import Snapshot

if TYPE_CHECKING:
    from debug_hang.analyse.proof import Proof

# What a diagnosis concludes.
Verdict = Literal["hang", "no-hang", "inconclusive"]


@dataclass
class Diagnosis:
    """The one data model both report.md and diagnosis.json are rendered from.

    `chains` (victim → culprit, one per root cause) is computed once, when the diagnosis is made.
    """

    address: str
    job_id: str | None
    job_choice: str
    other_jobs: list[dict[str, Any]]
    verdict: Verdict
    summary: str
    snapshot: Snapshot | None
    collection: Collection
    verdicts: list[ProcessVerdict]
    graph: WaitGraph
    causes: list[RootCause]
    progress: list[str] = field(default_factory=list)
    errors: list[CollectionError] = field(default_factory=list)
    seconds: float = 0.0
    evidence: Evidence | None = None
    chains: list[Chain] = field(default_factory=list)
    # Processes in unfinished calls whose stack could not be read, and why (see verdict.uninspected):
    # when not empty and the verdict is inconclusive, the exit code says so (EXIT_INCONCLUSIVE).
    uninspected: list[dict[str, Any]] = field(default_factory=list)
    rows: Rows = field(default_factory=Rows)  # the snapshot's State API rows, typed (rows.py)
    signals: list[ProcessProgress] = field(default_factory=list)  # what each process did in the window
    # PyTorch Flight Recorder dumps of the job's ranks, when any were found (analyse/flight_recorder.py),
    # and what they add: agreement with the stacks, files refused, pipes that can trigger a dump.
    flight_recorder: FRAnalysis | None = None
    fr_notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase of the run, in order
    # State API lists that came back incomplete: {list: {returned, total[, matched][, events_dropped]}}.
    truncated: dict[str, dict[str, int]] = field(default_factory=dict)
    tasks_compared: bool = False  # the job's task table was read a second time, after the samples
    # What each root cause rests on, for the report to show (analyse/proof.py; set by the pipeline
    # once the evidence is in).
    proofs: list[Proof] = field(default_factory=list)
    # Busy processes' deciding threads across their samples: a spin or work (analyse/busy.py).
    busy: list[BusyWork] = field(default_factory=list)
    # How the stacks were sampled: {"samples", "span_s", "rounds", "why": [...]} (pipeline.py).
    sampling: dict[str, Any] = field(default_factory=dict)
    # The verdict is "still starting": a demand not placed yet with its resources free, or a
    # culprit seen starting up; a later reading decides (pipeline.py reads the job again).
    starting: bool = False

    def __post_init__(self) -> None:
        if not self.chains:
            self.chains = chains(self.graph, self.causes)

    def chain_keys(self) -> list[str]:
        """Graph keys of every node on a reported chain, culprits first."""
        keys: list[str] = [c.key for cause in self.causes for c in cause.culprits]
        for chain in self.chains:
            keys += [node.key for node, _ in chain]
        return list(dict.fromkeys(keys))
