"""Merged logs: one text holding several processes' lines, each line prefixed by its source
(torch's `[rank1]: `, torchrun's `[default0]:`, Ray's `(RayTrainWorker pid=123) ` or
`(pid=123, ip=10.0.0.1) `), split into one stream per source, so interleaved tracebacks and
dumps are read apart and each process keeps its rank or pid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Characters examined for a log prefix at the start of a line.
_PREFIX_SPAN = 300

STREAM_PREFIX = _STREAM_PREFIX = re.compile(
    r"\[(?P<tag>rank|default)(?P<num>\d{1,7})\]: ?"
    r"|\((?:(?P<name>[A-Za-z_][\w.:<>-]{0,200}) )?pid=(?P<pid>\d{1,10})"
    r"(?:, ip=(?P<ip>[0-9A-Fa-f.:]{1,64}))?(?:, [^()]{0,200})?\) ?"
)
_RAY_DEDUP = re.compile(r" ?\[repeated \d+x across cluster\](?: \(Ray deduplicates logs by default\.[^()]{0,300}\))?")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class Stream:
    """The lines of one source of a merged log (one rank, one Ray worker), prefixes removed."""

    key: str
    pid: int | None = None
    rank: int | None = None
    name: str | None = None
    node_ip: str | None = None
    lines: list[str] = field(default_factory=list)


def demux(text: str) -> list[Stream] | None:
    """Split a merged log by line prefix; None when no line carries a known prefix.

    Unprefixed lines form the stream with key "" (the driver's own output). Ray's log dedup
    note (`[repeated 2x across cluster]`) is removed; the lines Ray folded are not in the text.
    """
    if "pid=" not in text and "[rank" not in text and "[default" not in text:
        return None
    streams: dict[str, Stream] = {}
    found = False
    for line in text.split("\n"):
        match = None
        if line[:1] in ("[", "(", "\x1b"):
            head = line[:_PREFIX_SPAN]
            if head[:1] == "\x1b":
                clean = _ANSI.sub("", head)
                match = _STREAM_PREFIX.match(clean)
                if match is not None:
                    line = clean[match.end():] + line[_PREFIX_SPAN:]
            else:
                match = _STREAM_PREFIX.match(head)
                if match is not None:
                    line = line[match.end():]
            if match is not None and line[:1] == "[":  # torchrun --tee over torch's own: `[default0]:[rank0]: `
                inner = _STREAM_PREFIX.match(line[:_PREFIX_SPAN])
                if inner is not None and inner.group("tag") is not None:
                    line = line[inner.end():]
        if match is None:
            key, stream = "", streams.get("")
            if stream is None:
                stream = streams[""] = Stream("")
        else:
            found = True
            key = match.group(0).strip()
            stream = streams.get(key)
            if stream is None:
                stream = streams[key] = _stream(key, match)
        if "across cluster]" in line:
            line = _RAY_DEDUP.sub("", line, count=1)
        stream.lines.append(line)
    return list(streams.values()) if found else None


def _stream(key: str, match: re.Match[str]) -> Stream:
    if match.group("tag") == "rank":
        return Stream(key, rank=int(match.group("num")))
    if match.group("tag") == "default":  # torchrun --tee: the local rank of role "default"
        return Stream(key, rank=int(match.group("num")))
    return Stream(key, pid=int(match.group("pid")), name=match.group("name"),
                  node_ip=match.group("ip"))
