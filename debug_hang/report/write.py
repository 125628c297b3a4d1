"""Write a diagnosis to its output folder: phase outputs, stacks.json, report.md, diagnosis.json,
graph.svg (the wait-for graph) and report.html (all of it as one self-contained page).

The folder is private: created 0700 (by default with `tempfile.mkdtemp`), each file 0600, opened
relative to the folder's own descriptor with O_EXCL | O_NOFOLLOW, under a name from a fixed list
or built from validated ids (never from a class name). Every byte written passes through
`redact` here, once (`OutputFolder.text` / `.json`). A folder that already holds files is refused
unless `force`, and then the outputs of the earlier run are removed first, so that a re-analysis
never mixes two runs.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.errors import UsageError
from debug_hang.model import stacks_to_dict
from debug_hang.perf import paused_gc
from debug_hang.redact import redact_obj, safe_text
from debug_hang.report.html import render_html
from debug_hang.report.json_out import to_json
from debug_hang.report.markdown import render_markdown, render_stacks_text
from debug_hang.report.svg import render_svg
from debug_hang.snapshot import public_rows

# Every file a diagnosis writes at the top of its folder (and `logs/`): what --force removes.
OUTPUT_FILES = ("01_cluster.txt", "02_jobs.json", "03_tasks.json", "04_actors.json", "05_stacks.txt",
                "stacks.json", "snapshot.json", "tasks_after.json", "evidence.json", "report.md",
                "diagnosis.json", "graph.svg", "report.html")
LOG_DIR = "logs"
FR_DIR = "flight_recorder"
SUBDIRS = (LOG_DIR, FR_DIR)  # folders of files a diagnosis writes (removed by --force)
DEFAULT_PREFIX = "ray_hang_diag_"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,120}$")
_HEX = re.compile(r"^[0-9a-f]{1,64}$")
_KINDS = frozenset({"driver", "actor", "task", "rank", "process", "worker", "child"})


def _make_parents(parent: Path) -> None:
    """Create the missing folders above an output folder, each 0700, after checking the nearest
    existing one: it must not be another user's (a folder planted in /tmp under the name we use,
    or a symlink of theirs, would let them swap what we write) nor writable by all without the
    sticky bit. Root's and your own folders pass, as does /tmp itself (sticky)."""
    missing: list[Path] = []
    here = parent
    while not os.path.lexists(here):
        missing.append(here)
        here = here.parent
    link, st = os.lstat(here), os.stat(here)
    for owner in {link.st_uid, st.st_uid} - {0, os.getuid()}:
        raise UsageError(f"{here} (above the output folder) belongs to uid {owner}, not to you or root: "
                         "give an output folder under one of your own")
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        raise UsageError(f"{here} (above the output folder) is writable by everyone: give an output folder "
                         "under one of your own")
    for folder in reversed(missing):
        os.mkdir(folder, 0o700)


class FolderNotEmptyError(UsageError):
    """An output folder that already holds files; the command that met it says what to run instead."""

    def __init__(self, path: Path, entries: int) -> None:
        self.path = path
        self.entries = entries
        self.reason = f"output folder {path} is not empty ({entries} {'entry' if entries == 1 else 'entries'})"
        super().__init__(f"{self.reason}: give a new or empty folder, or --force to replace the outputs of an "
                         "earlier diagnosis there")


def diagnoses_folder(path: Path | None, prefix: str = "ray_hang_watch_") -> Path:
    """A folder to hold many diagnoses, one new subfolder each: a fresh private `mkdtemp` one when
    `path` is None; else `path`, checked as output folders' parents are and made 0700 if missing
    (it may hold earlier diagnoses: each new one gets a folder of its own)."""
    if path is None:
        return Path(tempfile.mkdtemp(prefix=prefix))
    if path.is_symlink():
        raise UsageError(f"folder {path} is a symbolic link: give the real folder, or a new one")
    _make_parents(path)  # checks an existing folder too: yours or root's, not writable by all
    if not path.is_dir():
        raise UsageError(f"{path} exists and is not a folder: give a folder for the diagnoses")
    return path


def prepare_output_dir(path: Path | None, force: bool = False) -> Path:
    """The output folder, private and empty: a fresh `mkdtemp` one when `path` is None.

    An existing folder must be a real directory of this user (not a symlink); one that holds
    anything is refused unless `force`, which removes the outputs of the earlier run (only them).
    """
    if path is None:
        return Path(tempfile.mkdtemp(prefix=DEFAULT_PREFIX))
    if path.is_symlink():
        raise UsageError(f"output folder {path} is a symbolic link: give the real folder, or a new one")
    if not path.exists():
        _make_parents(path.parent)
        os.mkdir(path, 0o700)
        return path
    if not path.is_dir():
        raise UsageError(f"output folder {path} exists and is not a folder: give a new or empty folder")
    st = path.stat()
    if st.st_uid != os.getuid():
        raise UsageError(f"output folder {path} belongs to uid {st.st_uid}, not to you: give a folder of your own")
    entries = os.listdir(path)
    if entries and not force:
        raise FolderNotEmptyError(path, len(entries))
    if entries:
        _remove_outputs(path)
    os.chmod(path, 0o700)
    return path


def _remove_outputs(path: Path) -> None:
    """Remove what an earlier diagnosis wrote (the fixed names and logs/), never following links."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name in OUTPUT_FILES:
            _unlink(name, fd)
        for sub in SUBDIRS:
            try:
                sub_fd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                continue
            except OSError:  # a symlink or a file of that name: remove the entry itself
                _unlink(sub, fd)
                continue
            try:
                for name in os.listdir(sub_fd):
                    _unlink(name, sub_fd)
            finally:
                os.close(sub_fd)
            os.rmdir(sub, dir_fd=fd)
    finally:
        os.close(fd)


def _unlink(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        raise UsageError(f"cannot replace {name}: it is a folder; give a new output folder") from None


class OutputFolder:
    """Writes files into one private folder; every text passes through `safe_text`/`redact_obj`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._real = root.resolve()
        self._fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self._subdirs: dict[str, int] = {}
        self.written: list[str] = []

    def close(self) -> None:
        for fd in [*self._subdirs.values(), self._fd]:
            os.close(fd)
        self._subdirs.clear()

    def __enter__(self) -> OutputFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def text(self, rel: str, text: str) -> None:
        """A text file: control characters (but newline and tab) removed, secrets redacted."""
        self._write(rel, safe_text(text))

    def json(self, rel: str, obj: Any, indent: int | None = None) -> None:
        """A JSON file: every string redacted (and secret-named keys' values) before encoding."""
        self._write(rel, json.dumps(redact_obj(obj, share=True), indent=indent, default=str))

    def bytes(self, rel: str, data: builtins.bytes) -> None:
        """A binary file written as it is (a Flight Recorder dump): only its name is checked."""
        self._write(rel, data)

    def _write(self, rel: str, text: str | builtins.bytes) -> None:
        parts = rel.split("/")
        if len(parts) > 2 or not all(_SAFE_NAME.match(p) for p in parts):
            raise ValueError(f"unsafe output name {rel!r}")
        target = (self._real / rel).resolve()
        if not target.is_relative_to(self._real):
            raise ValueError(f"output {rel!r} would land outside {self.root}")
        dir_fd = self._fd if len(parts) == 1 else self._subdir(parts[0])
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(parts[-1], flags, 0o600, dir_fd=dir_fd)
        if isinstance(text, builtins.bytes):
            with os.fdopen(fd, "wb") as raw:
                raw.write(text)
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        self.written.append(rel)

    def _subdir(self, name: str) -> int:
        if name not in self._subdirs:
            try:
                os.mkdir(name, 0o700, dir_fd=self._fd)
            except FileExistsError:
                pass
            self._subdirs[name] = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                          dir_fd=self._fd)
        return self._subdirs[name]


def log_name(kind: str | None, pid: int | None, node_id: str | None, suffix: str, used: set[str]) -> str:
    """`logs/<kind>-<pid>.<suffix>` from the graph's closed vocabulary of kinds and integer ids
    (a node id prefix when two processes share a pid); never from a class or actor name."""
    safe_kind = kind if kind in _KINDS else "process"
    safe_pid = str(pid) if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else "unknown"
    safe_suffix = suffix if suffix in ("out", "err") else "log"
    name = f"{safe_kind}-{safe_pid}.{safe_suffix}"
    if name in used and node_id and _HEX.match(node_id[:8].lower()):
        name = f"{safe_kind}-{safe_pid}-{node_id[:8].lower()}.{safe_suffix}"
    n = 2
    base = name
    while name in used:
        name = base.replace(f".{safe_suffix}", f"-{n}.{safe_suffix}")
        n += 1
    used.add(name)
    return f"{LOG_DIR}/{name}"


def write_outputs(diag: Diagnosis, out: Path, tasks_after: list[dict[str, Any]] | None = None,
                  force: bool = False, include_runtime_env: bool = False) -> None:
    """The phase outputs (as the seed's script left them), stacks.json, report.md, diagnosis.json."""
    prepare_output_dir(out, force=force)
    with OutputFolder(out) as folder, paused_gc():
        _write_all(folder, diag, tasks_after, include_runtime_env)


def _write_all(folder: OutputFolder, diag: Diagnosis, tasks_after: list[dict[str, Any]] | None,
               include_runtime_env: bool) -> None:
    snap = diag.snapshot
    if snap is not None:
        named = frozenset(n.actor_id for n in diag.graph.nodes.values() if n.actor_id)
        public = public_rows(snap, diag.job_id, include_runtime_env, named)
        folder.text("01_cluster.txt", (snap.cluster_status_text or "(cluster status unavailable)") + "\n")
        folder.json("02_jobs.json", public.jobs, indent=1)
        folder.json("03_tasks.json", [t for t in public.tasks if t.get("job_id") == diag.job_id], indent=1)
        folder.json("04_actors.json", [a for a in public.actors if a.get("job_id") == diag.job_id], indent=1)
        folder.json("snapshot.json", public.to_dict())
    folder.text("05_stacks.txt", render_stacks_text(diag.collection.processes))
    meta = {"job_id": diag.job_id, "info": diag.collection.info_to_json(),
            "errors": [e.to_dict() for e in diag.collection.errors], "nodes": diag.collection.nodes,
            "targets": diag.collection.targets, "seconds": diag.collection.seconds,
            "paths": diag.collection.paths, "probe_seconds": diag.collection.probe_seconds,
            "job_choice": diag.job_choice, "address": diag.address,
            "diagnosis_seconds": diag.seconds, "sampling": diag.sampling,
            "library_metrics": diag.collection.library_metrics}
    folder.json("stacks.json", stacks_to_dict(diag.collection.processes, meta))
    if tasks_after is not None:
        dropped = () if include_runtime_env else ("runtime_env_info",)
        folder.json("tasks_after.json", [{k: v for k, v in t.items() if k not in dropped} for t in tasks_after])
    if diag.evidence is not None:
        used: set[str] = set()
        files: dict[str, dict[str, str]] = {}
        for key, node_ev in diag.evidence.per_node.items():
            node = diag.graph.nodes.get(key)
            if node is None:
                continue  # evidence of a node an older analysis drew (a folder re-analysed by other code)
            for suffix, text in node_ev.logs.items():
                name = log_name(node.kind, node.pid, node.node_id, suffix, used)
                folder.text(name, text)
                files.setdefault(key, {})[suffix] = name
        if diag.evidence.driver_log:
            folder.text(f"{LOG_DIR}/driver.log", diag.evidence.driver_log)
        folder.json("evidence.json", {
            "per_node": {k: {"highlights": v.highlights, "history": v.history, "errors": v.errors,
                             "logs": files.get(k, {})}
                         for k, v in diag.evidence.per_node.items()},
            "driver_highlights": diag.evidence.driver_highlights, "errors": diag.evidence.errors}, indent=1)
    if diag.collection.flight_recorder:
        write_flight_recorder(diag.collection.flight_recorder, folder)
    folder.text("report.md", render_markdown(diag))
    folder.json("diagnosis.json", to_json(diag), indent=2)
    svg = render_svg(diag)
    folder.text("graph.svg", svg)
    folder.text("report.html", render_html(diag, svg))


def write_flight_recorder(nodes: list[dict[str, Any]], folder: OutputFolder) -> None:
    """The Flight Recorder dumps as files (`flight_recorder/rank_<N>`, `rank_<N>.json`: `debug-hang
    fr` reads the folder) plus `index.json` (where each came from, what was skipped). Dump bytes
    are written as read (0600, like every file); names come from the integer rank only."""
    index: list[dict[str, Any]] = []
    kept_names: set[str] = set()
    for node in nodes:
        kept: list[dict[str, Any]] = []
        skipped = list(node.get("skipped") or [])
        for item in node.get("dumps") or []:
            rank = item.get("rank")
            name = f"rank_{rank}" + (".json" if item.get("format") == "json" else "")
            if not isinstance(rank, int) or isinstance(rank, bool) or name in kept_names:
                skipped.append({"path": item.get("path"), "reason": "a dump of the same rank was already kept"})
                continue
            try:
                data = base64.b64decode(str(item.get("data_b64", "")), validate=True)
            except (binascii.Error, ValueError):
                skipped.append({"path": item.get("path"), "reason": "damaged in transfer"})
                continue
            folder.bytes(f"{FR_DIR}/{name}", data)
            kept_names.add(name)
            kept.append({k: v for k, v in item.items() if k != "data_b64"} | {"file": name})
        index.append({"node_id": node.get("node_id"), "prefixes": node.get("prefixes") or [],
                      "pipes": node.get("pipes") or [], "skipped": skipped, "dumps": kept})
    folder.json(f"{FR_DIR}/index.json", index, indent=1)
