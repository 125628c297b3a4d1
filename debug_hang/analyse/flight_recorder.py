"""Which rank never entered which collective: Flight Recorder dumps merged per process group.

For each process group, each rank's progress comes from its dump's `pg_status`
(`last_enqueued_collective`, `last_completed_collective`) — gloo entries stay `scheduled`
forever, so entry states alone cannot say what finished — and, where a dump has no status, from
its entries. The first collective not completed by every member is the *pending* one; a member
whose last enqueued collective is older never entered it (its own last collective and the stack
that issued it are kept); members whose entries at that sequence number differ in op or sizes
are desynced (the minority is named); members with no dump are reported as such. Pure: no torch,
no I/O (`torch_crosscheck` is the optional exception, and runs torch's analyzer only on data
this module has already validated).
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from debug_hang.flightrec import FRDump, FREntry, FRFrame

DEFAULT_PG_DESC = "default_pg"
# Outcome of one group, a closed vocabulary.
NEVER_ENTERED = "never-entered"  # some member never issued the pending collective
DESYNC = "desync"  # members issued different ops (or sizes) at the same sequence number
NO_DUMP = "no-dump"  # every dumped member waits; the members without a dump are the suspects
ALL_WAITING = "all-waiting"  # every member entered it and none completed it (network, a kernel, a dead peer)
IDLE = "idle"  # nothing pending in this group
KINDS = (NEVER_ENTERED, DESYNC, NO_DUMP, ALL_WAITING, IDLE)
_LIBRARY_MARKERS = ("/site-packages/", "/dist-packages/", "/torch/", "/lib/python")


@dataclass
class RankInGroup:
    rank: int
    dumped: bool
    last_enqueued: int | None = None
    last_completed: int | None = None
    at_pending: FREntry | None = None  # its entry at the pending sequence number
    last: FREntry | None = None  # the last collective it issued in this group (in its buffer)


@dataclass
class GroupFinding:
    pg_name: str
    desc: str
    members: list[int]
    members_from: str  # 'pg_config', 'world' or 'dumps' (inferred from which dumps name the group)
    ranks: dict[int, RankInGroup]
    kind: str = IDLE
    pending_seq: int | None = None
    entered: list[int] = field(default_factory=list)
    not_entered: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    desync_seq: int | None = None
    desync_ops: dict[int, str] = field(default_factory=dict)  # rank -> "op sizes" at desync_seq
    odd_ranks: list[int] = field(default_factory=list)
    culprits: list[int] = field(default_factory=list)
    blocked_elsewhere: dict[int, str] = field(default_factory=dict)  # culprit rank -> the collective it waits in

    @property
    def label(self) -> str:
        return f"process group {self.pg_name} ({self.desc})" if self.desc else f"process group {self.pg_name}"

    def pending_op(self) -> str:
        ops = Counter(signature(r.at_pending) for r in self.ranks.values() if r.at_pending)
        return ops.most_common(1)[0][0] if ops else "?"

    def summary(self) -> str:
        """One sentence: what is pending, who is in it, who is not and what they last did."""
        if self.kind == IDLE:
            return f"{self.label}: nothing pending"
        head = f"{self.label}: collective #{self.pending_seq} ({self.pending_op()})"
        parts = [head]
        if self.entered:
            parts.append(f"entered by rank(s) {ranks_text(self.entered)}")
        if self.kind == NEVER_ENTERED:
            lasts = "; ".join(f"rank {r} last issued {describe(self.ranks[r].last, self.ranks[r].last_enqueued)}"
                              + (f", and waits in {self.blocked_elsewhere[r]} instead" if r in self.blocked_elsewhere else "")
                              for r in self.not_entered)
            parts.append(f"never entered by rank(s) {ranks_text(self.not_entered)} ({lasts})")
        if self.kind == DESYNC:
            ops = "; ".join(f"rank {r}: {op}" for r, op in sorted(self.desync_ops.items()))
            parts.append(f"desync at #{self.desync_seq} ({ops}); odd one(s) out: rank(s) {ranks_text(self.odd_ranks)}")
        if self.missing:
            parts.append(f"no dump from rank(s) {ranks_text(self.missing)}")
        if self.kind == ALL_WAITING:
            parts.append("every member entered it and none completed it")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "process_group": self.pg_name, "desc": self.desc, "members": self.members, "members_from": self.members_from,
            "kind": self.kind, "pending_seq": self.pending_seq, "pending_op": None if self.kind == IDLE else self.pending_op(),
            "entered": self.entered, "not_entered": self.not_entered, "missing_dumps": self.missing,
            "desync_seq": self.desync_seq, "desync_ops": {str(k): v for k, v in sorted(self.desync_ops.items())},
            "culprits": self.culprits, "summary": self.summary(),
            "blocked_elsewhere": {str(k): v for k, v in sorted(self.blocked_elsewhere.items())},
            "ranks": [{"rank": r.rank, "dumped": r.dumped, "last_enqueued": r.last_enqueued,
                       "last_completed": r.last_completed,
                       "last_op": signature(r.last) if r.last else None,
                       "last_frame": frame_text(user_frame(r.last)) if r.last else None}
                      for r in sorted(self.ranks.values(), key=lambda x: x.rank)],
        }


@dataclass
class FRAnalysis:
    groups: list[GroupFinding]
    ranks_dumped: list[int]
    errors: list[str] = field(default_factory=list)
    torch_check: str | None = None

    def hung_groups(self) -> list[GroupFinding]:
        return [g for g in self.groups if g.kind != IDLE]

    def culprits(self) -> list[int]:
        """Ranks to blame, from the first group with a named culprit (never-entered, desync, no dump)."""
        for g in self.hung_groups():
            if g.culprits:
                return g.culprits
        return []

    def to_json(self) -> dict[str, Any]:
        return {"ranks_dumped": self.ranks_dumped, "culprit_ranks": self.culprits(),
                "groups": [g.to_json() for g in self.groups], "errors": self.errors, "torch_check": self.torch_check}


def ranks_text(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def signature(entry: FREntry | None) -> str:
    if entry is None:
        return "?"
    return f"{entry.op} {entry.input_sizes}" if entry.input_sizes else entry.op


def user_frame(entry: FREntry | None) -> FRFrame | None:
    """The job's innermost frame of the stack that issued `entry` (the call site of the collective)."""
    if entry is None or not entry.frames:
        return None
    for frame in entry.frames:
        if not any(m in frame.file for m in _LIBRARY_MARKERS):
            return frame
    return entry.frames[0]


def frame_text(frame: FRFrame | None) -> str | None:
    if frame is None:
        return None
    return f"{frame.name} ({frame.file.rsplit('/', 1)[-1]}:{frame.line})"


def describe(entry: FREntry | None, seq: int | None) -> str:
    if entry is None:
        return f"#{seq}" if seq is not None else "no collective in this group"
    where = frame_text(user_frame(entry))
    return f"#{entry.seq} {signature(entry)}" + (f" at {where}" if where else "")


def _group_keys(dumps: list[FRDump]) -> dict[str, str]:
    keys: dict[str, str] = {}
    for d in dumps:
        for e in d.entries:
            if e.pg_desc or e.pg_name not in keys:
                keys[e.pg_name] = e.pg_desc or keys.get(e.pg_name, "")
        for name in d.pg_status:
            keys.setdefault(name, "")
    return keys


def _members(name: str, desc: str, dumps: list[FRDump], world_size: int | None) -> tuple[list[int], str]:
    configured: set[int] = set()
    for d in dumps:
        cfg = d.pg_config.get(name)
        if cfg and cfg["ranks"]:
            configured.update(cfg["ranks"])
    if configured:
        return sorted(configured), "pg_config"
    if desc == DEFAULT_PG_DESC or name == "0":
        size = world_size
        if size is None:
            seen = {r for d in dumps for c in d.pg_config.values() for r in c["ranks"]} | {d.rank for d in dumps}
            size = max(seen) + 1 if seen else 0
        return list(range(size)), "world"
    named = {d.rank for d in dumps if name in d.pg_status or any(e.pg_name == name for e in d.entries)}
    return sorted(named), "dumps"


def analyse_group(name: str, desc: str, dumps: list[FRDump], world_size: int | None = None) -> GroupFinding:
    members, source = _members(name, desc, dumps, world_size)
    by_rank = {d.rank: d for d in dumps}
    ranks: dict[int, RankInGroup] = {}
    for r in members:
        d = by_rank.get(r)
        if d is None:
            ranks[r] = RankInGroup(rank=r, dumped=False)
            continue
        mine = [e for e in d.entries if e.pg_name == name and not e.is_p2p]
        status = d.pg_status.get(name)
        enq = status.last_enqueued if status and status.last_enqueued is not None else max((e.seq for e in mine), default=0)
        done = status.last_completed if status and status.last_completed is not None and status.last_completed >= 0 else None
        if done is None:
            completed = [e.seq for e in mine if e.state == "completed"]
            done = max(completed) if completed else (None if mine else 0)
        ranks[r] = RankInGroup(rank=r, dumped=True, last_enqueued=enq, last_completed=done,
                               last=max(mine, key=lambda e: e.seq) if mine else None)
    finding = GroupFinding(pg_name=name, desc=desc, members=members, members_from=source, ranks=ranks)
    finding.missing = [r for r in members if not ranks[r].dumped]
    dumped = [x for x in ranks.values() if x.dumped]
    if not dumped:
        return finding
    if any(x.last_completed is None for x in dumped):
        # No completion record (an old dump without pg_status): the first sequence number some rank did not finish.
        pending = min((e.seq for x in dumped for e in by_rank[x.rank].entries
                       if e.pg_name == name and not e.is_p2p and e.state != "completed"), default=None)
    else:
        pending = min(x.last_completed or 0 for x in dumped) + 1
    if pending is None or not any((x.last_enqueued or 0) >= pending for x in dumped):
        return finding
    finding.pending_seq = pending
    for x in dumped:
        x.at_pending = next((e for e in by_rank[x.rank].entries if e.pg_name == name and e.seq == pending and not e.is_p2p), None)
    finding.entered = sorted(x.rank for x in dumped if (x.last_enqueued or 0) >= pending)
    finding.not_entered = sorted(x.rank for x in dumped if (x.last_enqueued or 0) < pending)
    _find_desync(finding, by_rank)
    if finding.not_entered:
        finding.kind, finding.culprits = NEVER_ENTERED, list(finding.not_entered)
    elif finding.desync_seq is not None:
        finding.kind, finding.culprits = DESYNC, list(finding.odd_ranks)
    elif finding.missing:
        finding.kind, finding.culprits = NO_DUMP, list(finding.missing)
    else:
        finding.kind = ALL_WAITING
    return finding


def _find_desync(finding: GroupFinding, by_rank: dict[int, FRDump]) -> None:
    """The first sequence number (up to the pending one) whose entries differ across ranks."""
    seqs: dict[int, dict[int, FREntry]] = {}
    for r in finding.entered:
        for e in by_rank[r].entries:
            if e.pg_name == finding.pg_name and not e.is_p2p and e.seq <= (finding.pending_seq or 0):
                seqs.setdefault(e.seq, {})[r] = e
    for seq in sorted(seqs):
        sigs = {r: signature(e) for r, e in seqs[seq].items()}
        if len(set(sigs.values())) > 1:
            counts = Counter(sigs.values())
            least = min(counts.values())
            finding.desync_seq, finding.desync_ops = seq, sigs
            if least < max(counts.values()):
                finding.odd_ranks = sorted(r for r, s in sigs.items() if counts[s] == least)
            else:
                finding.odd_ranks = sorted(sigs)
            return


def analyse(dumps: list[FRDump], world_size: int | None = None, errors: list[str] | None = None) -> FRAnalysis:
    """Merge the dumps of one job (one per rank) and analyse each process group."""
    unique: dict[int, FRDump] = {}
    for d in dumps:
        unique.setdefault(d.rank, d)
    kept = list(unique.values())
    groups = [analyse_group(name, desc, kept, world_size) for name, desc in sorted(_group_keys(kept).items())]
    order = {k: i for i, k in enumerate((NEVER_ENTERED, DESYNC, NO_DUMP, ALL_WAITING, IDLE))}
    # Within a kind, the collective enqueued first comes first: in a deadlock across groups (ranks
    # wait in group A for a rank that waits in group B), the earlier one is where it started.
    groups.sort(key=lambda g: (order[g.kind], _pending_time(g)))
    hung = [g for g in groups if g.kind != IDLE]
    for g in hung:
        for r in g.not_entered:
            other = next((h for h in hung if h is not g and r in h.entered), None)
            if other is not None:
                g.blocked_elsewhere[r] = f"collective #{other.pending_seq} ({other.pending_op()}) of {other.label}"
    groups = _resolve_cross_group(groups, unique)
    return FRAnalysis(groups=groups, ranks_dumped=sorted(unique), errors=list(errors or []))


def _resolve_cross_group(groups: list[GroupFinding], dumps: dict[int, FRDump]) -> list[GroupFinding]:
    """Ranks waiting in group A for a rank that waits in group B for them: a deadlock across groups.

    Every rank is inside a collective, so "who never entered" names both sides. The recorder's
    buffer is per process and in call order across groups: the ranks whose order of collectives
    departs first from the others' are where it started. Their group comes first and keeps its
    culprits; in the other group the ranks that never entered are victims (they wait elsewhere).
    """
    cyc = [g for g in groups if g.kind == NEVER_ENTERED and g.blocked_elsewhere]
    if len(cyc) < 2:
        return groups
    names = {g.pg_name for g in cyc}
    ranks = sorted(set.intersection(*(set(g.members) for g in cyc)) & set(dumps))
    if len(ranks) < 2:
        return groups
    calls = {r: [e for e in sorted(dumps[r].entries, key=lambda e: e.record_id) if e.pg_name in names and not e.is_p2p]
             for r in ranks}
    start = {n: max(min((e.seq for e in calls[r] if e.pg_name == n), default=0) for r in ranks) for n in names}
    seqs = {r: [(e.pg_name, e.seq) for e in calls[r] if e.seq >= start[e.pg_name]] for r in ranks}
    for i in range(max(len(s) for s in seqs.values())):
        at = {r: s[i] if i < len(s) else None for r, s in seqs.items()}
        counts = Counter(at.values())
        if len(counts) < 2:
            continue
        top = counts.most_common(1)[0][1]
        odd = sorted(r for r, v in at.items() if counts[v] < top)
        if not odd or len(odd) * 2 >= len(ranks):
            return groups  # no clear majority: keep the enqueue-time order
        first = next((g for g in cyc if set(odd) <= set(g.not_entered)), None)
        if first is None:
            return groups
        for g in cyc:
            if g is not first:
                g.culprits = [r for r in g.culprits if r not in g.blocked_elsewhere]
        first.culprits = odd
        return [first] + [g for g in groups if g is not first]
    return groups


def _pending_time(g: GroupFinding) -> int:
    times = [r.at_pending.time_created_ns for r in g.ranks.values() if r.at_pending and r.at_pending.time_created_ns]
    return min(times) if times else 2**63


def torch_crosscheck(dumps: list[FRDump], groups: list[GroupFinding] | None = None) -> str:
    """Run torch's own Flight Recorder analyzer on the validated dumps; one line saying what it found.

    torch's loader calls plain `pickle.load` and its builder `eval`s pg_config ranks given as text,
    so it is never pointed at the files: it gets this module's normalised data (ranks re-written
    from validated integer lists). Failures are reported, not raised (torch 2.13 raises KeyError
    on gloo dumps, whose pg_config is empty: with `groups`, the memberships this module inferred
    are filled in, and the answer says so).
    """
    import argparse

    sink = io.StringIO()
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            from torch.distributed.flight_recorder.components.builder import build_db
    except Exception as exc:  # noqa: BLE001 - torch is optional
        logging.disable(logging.NOTSET)
        return f"torch's analyzer not available ({type(exc).__name__})"
    filled = False
    details: dict[str, dict[str, Any]] = {}
    for d in dumps:
        config = {k: {"name": v["name"], "desc": v["desc"], "ranks": str(list(v["ranks"]))}
                  for k, v in d.pg_config.items() if v["ranks"]}
        for g in groups or []:
            if g.pg_name not in config and d.rank in g.members:
                config[g.pg_name] = {"name": g.pg_name, "desc": g.desc, "ranks": str(list(g.members))}
                filled = True
        details[f"rank{d.rank}"] = {
            "host_name": f"host_rank{d.rank}", "rank": d.rank, "version": d.version or "2.10",
            "pg_config": config, "entries": [_torch_entry(e) for e in d.entries],
        }
    note = " (pg_config filled with the memberships inferred here)" if filled else ""
    args = argparse.Namespace(verbose=False, just_print_entries=False, allow_incomplete_ranks=True, mismatch_cap=10,
                              selected_ranks=None, pg_filters=None, print_stack_trace=False)
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            version = dumps[0].version if dumps else "2.10"
            db = build_db(details, args, version)
    except Exception as exc:  # noqa: BLE001 - torch's analyzer failing is a finding, not a crash
        return f"torch's analyzer{note} failed: {type(exc).__name__}: {str(exc)[:160]}"
    finally:
        logging.disable(logging.NOTSET)
    bad = [c for c in db.collectives if not c.pass_check]
    if not bad:
        return f"torch's analyzer{note}: {len(db.collectives)} collective(s) matched, no mismatch"
    c = bad[0]
    missing = sorted(c.missing_ranks or [])
    kind = getattr(getattr(c, "type_of_mismatch", None), "state", None)
    return (f"torch's analyzer{note}: first unmatched collective #{c.collective_seq_id} {c.collective_name} in {c.pg_desc}"
            + (f", missing rank(s) {ranks_text(missing)}" if missing else "") + (f" ({kind.name})" if kind is not None else ""))


def _torch_entry(e: FREntry) -> dict[str, Any]:
    return {"record_id": e.record_id, "pg_id": 0, "process_group": (e.pg_name, e.pg_desc), "collective_seq_id": e.seq,
            "p2p_seq_id": e.p2p_seq, "op_id": e.seq, "profiling_name": e.op, "time_created_ns": e.time_created_ns or 0,
            "input_sizes": e.input_sizes, "output_sizes": e.output_sizes, "input_dtypes": [], "output_dtypes": [],
            "state": e.state, "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
            "retired": e.retired, "frames": [{"name": f.name, "filename": f.file, "line": f.line} for f in e.frames],
            "is_p2p": e.is_p2p}
