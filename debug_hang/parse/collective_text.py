"""Collective facts written in text, not stacks: what a message says each rank was doing.

- PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL "Detected mismatch between collectives on ranks"
  message, as one fact per rank (op, sequence number, shapes, dtypes), wherever it sits: on its
  own line, as the exception line of a RuntimeError traceback, behind a log prefix, or wrapped
  over several lines;
- ProcessGroupNCCL's watchdog (format strings of torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp):
  `[Rank R] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=S, OpType=OP, ...)
  ran for N milliseconds before timing out.`, `... failure detected by watchdog at work sequence
  id: S PG status: last enqueued work: E, last completed work: C`, `Exception ... detected by
  watchdog at work: S, last enqueued NCCL work: E, last completed NCCL work: C.`, the heartbeat
  monitor's `Received a dump signal due to a collective timeout from rank R ... Last enqueued NCCL
  work: E, last completed NCCL work: C.` and `ProcessGroupNCCL's watchdog got stuck for N seconds`;
- the desync report (TraceUtils.h): `[R] Timeout at collective: OP, #S`, `ranks [..] are the
  lagging ranks that caused this timeout`, `[..] joined but didn't finish collective #S`,
  `[..] finished collective #S, but didn't join collective #S+1`;
- gloo's monitored_barrier: `Rank(s) R[, ...] failed to pass monitoredBarrier in N ms`.

Each fact lands in `Process.collective` of the process of that rank when the input has one, else
on a process with only the rank (no stack is invented). Facts about one rank from several lines
are merged (the first value of a key wins).
"""

from __future__ import annotations

import re
from typing import Any

from debug_hang.model import Process
from debug_hang.parse.state import ReaderState

_MISMATCH = "Detected mismatch between collectives on ranks"
_MISMATCH_SOURCE = "TORCH_DISTRIBUTED_DEBUG=DETAIL collective mismatch message"
_RANK_RUNNING = re.compile(r"Rank (?P<rank>\d{1,7}) is running (?:inconsistent )?collective: ")
_FP_FIELDS = {
    "sequence": re.compile(r"SequenceNumber=(\d{1,20})"),
    "op": re.compile(r"OpType=(\w{1,40})"),
    "shapes": re.compile(r"TensorShape=\[([^\]]{0,400})\]"),
    "dtypes": re.compile(r"TensorDtypes=(\w{1,40})"),
}


def collective_facts(line: str, lineno: int) -> list[dict[str, Any]]:
    """One fact per rank named in a TORCH_DISTRIBUTED_DEBUG=DETAIL mismatch message:
    {"rank", "op", "sequence", "shapes", "dtypes", "reported_by", "line", "source"}."""
    at = line.find(_MISMATCH)
    if at < 0:
        return []
    starts = list(_RANK_RUNNING.finditer(line, at))
    facts: list[dict[str, Any]] = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(line)
        differ = line.find("Collectives differ", match.end(), end)
        end = differ if differ >= 0 else end
        chunk = line[match.end():end]
        fact: dict[str, Any] = {"rank": int(match.group("rank"))}
        for key, regex in _FP_FIELDS.items():
            found = regex.search(chunk)
            if found is not None:
                fact[key] = int(found.group(1)) if key == "sequence" else found.group(1)
        fact["reported_by"] = int(starts[0].group("rank"))
        fact["line"] = lineno
        fact["source"] = _MISMATCH_SOURCE
        facts.append(fact)
    return facts


def attach_collectives(processes: list[Process], facts: list[dict[str, Any]],
                       warnings: list[str]) -> None:
    """Give each rank named by a collective message its facts: on the input's process of that
    rank (first one), else on a new process with only the rank known (no thread)."""
    by_rank: dict[int, dict[str, Any]] = {}
    for fact in facts:
        if fact.get("rank") is None:
            continue
        merged = by_rank.setdefault(int(fact["rank"]), {})
        for key, value in fact.items():
            merged.setdefault(key, value)
    added = []
    of_rank: dict[int, Process] = {}
    for p in processes:
        if p.rank is not None:
            of_rank.setdefault(p.rank, p)
    for rank, fact in sorted(by_rank.items()):
        proc = of_rank.get(rank)
        if proc is None:
            proc = Process(rank=rank, source="torch-mismatch" if fact.get("source") == _MISMATCH_SOURCE
                           else "collective-facts")
            processes.append(proc)
            added.append(rank)
        proc.collective = {k: v for k, v in fact.items() if k != "rank"}
    said = ", ".join(f"rank {r} {f.get('op', '?')}" for r, f in sorted(by_rank.items()))
    seqs = sorted({str(f.get("sequence")) for f in by_rank.values()})
    kinds = sorted({str(f.get("source")) for f in by_rank.values()})
    what = ("a TORCH_DISTRIBUTED_DEBUG collective mismatch" if kinds == [_MISMATCH_SOURCE]
            else f"collective facts of {', '.join(kinds)}")
    warnings.append(f"read {what} ({said}; sequence number "
                    f"{'/'.join(seqs)}) as per-rank facts (Process.collective)"
                    + (f"; rank(s) {', '.join(map(str, added))} have no stack in the input: "
                       "processes with only the rank and the fact" if added else ""))


# -- ProcessGroupNCCL's watchdog and heartbeat monitor, the desync report, monitored_barrier ----
# Words one of these lines holds: a single search decides whether the patterns below are tried.
MARKERS = _MARKERS = re.compile("atchdog|enqueued|monitoredBarrier|at collective|lagging|join|dump signal")
_RANK_TAG = re.compile(r"(?:\[|\s)Rank (?P<rank>\d{1,7})\]")
_WATCHDOG_TIMEOUT = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d{1,20}), OpType=(?P<op>\w{1,40})"
    r"(?P<rest>[^)]{0,400})\)(?: ran for (?P<ran>\d{1,20}) milliseconds)?")
_TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(\d{1,20})")
_FAILED_AT = re.compile(r"detected by watchdog at work(?: sequence id)?: (?P<seq>\d{1,20})")
_PROGRESS = re.compile(r"last enqueued (?:NCCL )?work: (?P<enq>-?\d{1,20}), last completed (?:NCCL )?work: (?P<done>-?\d{1,20})",
                       re.IGNORECASE)
_DUMP_FROM = re.compile(r"dump signal due to a collective timeout from\s+(?:rank (?P<rank>-?\d{1,7})|this local rank)")
_STUCK = re.compile(r"watchdog got stuck for (?P<s>\d{1,10}) seconds")
_DESYNC_TIMEOUT = re.compile(r"\[(?P<rank>\d{1,7})\] Timeout at collective: (?P<op>\w{1,40}), #(?P<seq>\d{1,20})")
_DESYNC_MISSING = re.compile(r"ranks \[(?P<ranks>[\d, ]{1,4000})\] are the lagging ranks that caused this timeout")
_DESYNC_JOINED = re.compile(r"\[(?P<ranks>[\d, ]{1,4000})\] joined but didn't finish collective #(?P<seq>\d{1,20})")
_DESYNC_FINISHED = re.compile(r"\[(?P<ranks>[\d, ]{1,4000})\] finished collective #(?P<seq>\d{1,20}), "
                              r"but didn't join collective #(?P<next>\d{1,20})")
_MONITORED = re.compile(r"Ranks? (?P<ranks>\d{1,7}(?:, ?\d{1,7}){0,4000}) failed to pass monitoredBarrier in (?P<ms>\d{1,12}) ms")
_WATCHDOG_SOURCE = "ProcessGroupNCCL watchdog"
_DESYNC_SOURCE = "TORCH_NCCL_DESYNC_DEBUG report"
_MONITORED_SOURCE = "monitored_barrier"


def _ranks(text: str) -> list[int]:
    return [int(r) for r in re.findall(r"\d{1,7}", text)[:4096]]


def progress_facts(line: str, lineno: int) -> list[dict[str, Any]]:
    """Per-rank facts of one NCCL watchdog, desync-report or monitored_barrier line (the rank is
    the line's `[Rank R]`, or None: the log prefix's rank is given later)."""
    if _MARKERS.search(line) is None:
        return []
    tag = _RANK_TAG.search(line)
    rank = int(tag.group("rank")) if tag is not None else None
    facts = _desync_facts(line, lineno) + _monitored_facts(line, lineno, rank)
    own: dict[str, Any] = {}
    timeout = _WATCHDOG_TIMEOUT.search(line)
    if timeout is not None:
        own.update(sequence=int(timeout.group("seq")), op=timeout.group("op"), state="timed out")
        ms = _TIMEOUT_MS.search(timeout.group("rest"))
        if ms is not None:
            own["timeout_ms"] = int(ms.group(1))
    failed = _FAILED_AT.search(line)
    if failed is not None:
        own.setdefault("sequence", int(failed.group("seq")))
        own.setdefault("state", "failed")
    progress = _PROGRESS.search(line)
    if progress is not None:
        own.update(last_enqueued=int(progress.group("enq")), last_completed=int(progress.group("done")))
    dump = _DUMP_FROM.search(line)
    if dump is not None and dump.group("rank") is not None:
        own["timeout_reported_by"] = int(dump.group("rank"))
    stuck = _STUCK.search(line)
    if stuck is not None:
        own["watchdog_stuck_s"] = int(stuck.group("s"))
    if own:
        facts.append({"rank": rank, **own, "line": lineno, "source": _WATCHDOG_SOURCE})
    return facts


def _desync_facts(line: str, lineno: int) -> list[dict[str, Any]]:
    facts: list[dict[str, Any]] = []
    timeout = _DESYNC_TIMEOUT.search(line)
    if timeout is not None:
        facts.append({"rank": int(timeout.group("rank")), "sequence": int(timeout.group("seq")),
                      "op": timeout.group("op"), "state": "timed out", "line": lineno, "source": _DESYNC_SOURCE})
    missing = _DESYNC_MISSING.search(line)
    if missing is not None:
        facts.extend({"rank": r, "lagging": "never joined any collective", "line": lineno,
                      "source": _DESYNC_SOURCE} for r in _ranks(missing.group("ranks")))
    joined = _DESYNC_JOINED.search(line)
    if joined is not None:
        seq = int(joined.group("seq"))
        facts.extend({"rank": r, "lagging": f"joined but did not finish collective #{seq}", "sequence": seq,
                      "line": lineno, "source": _DESYNC_SOURCE} for r in _ranks(joined.group("ranks")))
    finished = _DESYNC_FINISHED.search(line)
    if finished is not None:
        seq = int(finished.group("next"))
        facts.extend({"rank": r, "lagging": f"finished collective #{seq - 1} but never joined #{seq}",
                      "last_completed": seq - 1, "line": lineno, "source": _DESYNC_SOURCE}
                     for r in _ranks(finished.group("ranks")))
    return facts


def _monitored_facts(line: str, lineno: int, reporter: int | None) -> list[dict[str, Any]]:
    match = _MONITORED.search(line)
    if match is None:
        return []
    facts: list[dict[str, Any]] = [
        {"rank": r, "lagging": f"did not reach monitored_barrier within {match.group('ms')} ms",
         "reported_by": reporter, "line": lineno, "source": _MONITORED_SOURCE}
        for r in _ranks(match.group("ranks"))]
    if reporter is not None:
        facts.append({"rank": reporter, "op": "BARRIER", "state": "timed out", "line": lineno,
                      "source": _MONITORED_SOURCE})
    return facts


def mismatch_in_text(text: str, streams_prefix: re.Pattern[str]) -> list[dict[str, Any]]:
    """Mismatch messages wrapped over lines that lost their log prefix (a wrapped paste of a
    prefixed log): each message joined with the lines after it, prefixes removed, until it names
    two ranks. One pass over the lines; each line joins at most one message."""
    facts: list[dict[str, Any]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if _MISMATCH not in lines[i]:
            i += 1
            continue
        parts = [lines[i][lines[i].find(_MISMATCH):]]
        j = i + 1
        while j < len(lines) and j - i < _WRAP_LINES and len(_RANK_RUNNING.findall(" ".join(parts))) < 2:
            body = streams_prefix.sub("", lines[j], count=1).strip()
            if not body:
                break
            parts.append(body)
            j += 1
        facts.extend(collective_facts(" ".join(parts)[:_WRAP_CHARS], i + 1))
        i = max(j, i + 1)
    return facts


# Lines a wrapped mismatch message may take, and the characters kept of it.
_WRAP_LINES = 40
_WRAP_CHARS = 65536


class CollectiveMessages(ReaderState):
    """Collective facts in the lines of any input, beside (or inside) the stacks."""

    def mismatch_starts(self, line: str, lineno: int) -> bool:
        """A mismatch message: read at once when it names two ranks on its line, else gathered
        over the lines that follow (a wrapped paste) until it does."""
        if len(_RANK_RUNNING.findall(line)) >= 2 or "Collectives differ" in line:
            self.collectives.extend(collective_facts(line, lineno))
            return True
        self.mismatch_lines = [line]
        self.mismatch_lineno = lineno
        return True

    def mismatch_continues(self, line: str, lineno: int) -> bool:
        """A line of a wrapped mismatch message; the message ends at a frame, header or blank."""
        assert self.mismatch_lines is not None
        body = line.strip()
        stop = (not body or body.startswith(("File ", "Traceback", "Thread ", "Process ", "[rank", "```"))
                or len(self.mismatch_lines) >= _WRAP_LINES)
        if not stop:
            self.mismatch_lines.append(body)
            joined = " ".join(self.mismatch_lines)
            if len(_RANK_RUNNING.findall(joined)) < 2 and "Collectives differ" not in body \
                    and len(joined) < _WRAP_CHARS:
                return True
        self.end_mismatch()
        if not stop:
            self.count("wrapped-mismatch")
        return not stop

    def end_mismatch(self) -> None:
        lines, self.mismatch_lines = self.mismatch_lines, None
        if lines:
            self.collectives.extend(collective_facts(" ".join(lines)[:_WRAP_CHARS], self.mismatch_lineno))

    def progress_line(self, line: str, lineno: int) -> bool:
        """An NCCL watchdog / desync / monitored_barrier line: its facts; True when read."""
        facts = progress_facts(line, lineno)
        self.collectives.extend(facts)
        return bool(facts)
