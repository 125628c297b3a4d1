"""A real headless Chromium, driven over the DevTools protocol on a pipe (no WebSocket library,
no network): open a file, wait for it to load, collect every console message, uncaught
exception and browser log entry of level error or warning (a blocked fetch, a refused inline
script, a CSP violation), evaluate expressions in the page, take a PNG screenshot.

    python tests/browser.py PAGE.html [--png OUT.png]    # prints what it saw as JSON

Chromium comes from Debian's package (`apt-get install -y chromium`; .ci/run installs it).
Every read is bounded by a deadline; the browser runs with a fresh profile and is killed at the end.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-default-apps", "--disable-extensions", "--mute-audio",
         "--remote-debugging-pipe")


def find_chromium() -> str | None:
    for path in (os.environ.get("DEBUG_HANG_CHROMIUM"), *CANDIDATES, shutil.which("chromium")):
        if path and os.access(path, os.X_OK):
            return path
    return None


@dataclass
class PageResult:
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, log errors and warnings
    messages: list[str] = field(default_factory=list)  # every console message and log entry
    values: dict[str, Any] = field(default_factory=dict)  # the evaluated expressions
    png: bytes = b""
    requests: list[str] = field(default_factory=list)  # every URL the page asked for


class Chromium:
    """One browser process; `send` waits (bounded) for the answer, keeping the events it reads."""

    def __init__(self, exe: str, timeout_s: float = 60.0) -> None:
        self.profile = tempfile.mkdtemp(prefix="dh_chromium_")
        self.timeout_s = timeout_s
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        to_browser_r, from_browser_w = _high(to_browser_r), _high(from_browser_w)  # not 3 or 4 themselves
        # Chromium reads commands on fd 3 and answers on fd 4: bash (dash takes one-digit fds only) moves the pipe ends there
        # (two integers of ours; the executable and flags are fixed) and execs it.
        move = f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w} {to_browser_r}<&- {from_browser_w}>&-'
        self.proc = subprocess.Popen(  # noqa: S603 - a fixed executable and fixed flags
            ["/bin/bash", "-c", move, exe, *FLAGS, f"--user-data-dir={self.profile}", "--window-size=1280,900", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(to_browser_r, from_browser_w))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def close(self) -> None:
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + self.timeout_s
        while True:
            for reply in self._read(end):
                if reply.get("id") == self._next:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return dict(reply.get("result") or {})
                self.events.append(reply)

    def wait_for(self, method: str, session: str, timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while True:
            if any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
                return True
            try:
                self.events += self._read(end)
            except TimeoutError:
                return False

    def _read(self, end: float) -> list[dict[str, Any]]:
        while b"\0" not in self._buf:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buf += chunk
        *whole, self._buf = self._buf.split(b"\0")
        return [json.loads(m) for m in whole if m]


def _high(fd: int) -> int:
    """The same pipe end at a descriptor of 10 or more (the original closed)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


def open_page(path: Path, expressions: dict[str, str] | None = None, screenshot: bool = True,
              exe: str | None = None, timeout_s: float = 60.0) -> PageResult:
    """Load `path` (file://) in a fresh headless Chromium and report what happened."""
    exe = exe or find_chromium()
    if exe is None:
        raise FileNotFoundError("no Chromium: apt-get install -y chromium")
    browser = Chromium(exe, timeout_s)
    result = PageResult()
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable", session=session)
        browser.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        if not browser.wait_for("Page.loadEventFired", session, timeout_s):
            result.errors.append("the page did not finish loading in time")
        time.sleep(0.5)  # late console messages and CSP reports
        for name, expr in (expressions or {}).items():
            answer = browser.send("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=session)
            result.values[name] = (answer.get("result") or {}).get("value")
        if screenshot:
            shot = browser.send("Page.captureScreenshot", {"format": "png"}, session=session)
            result.png = base64.b64decode(shot.get("data", ""))
        browser.events += _drain(browser)
    finally:
        browser.close()
    _collect(browser.events, result)
    return result


def _drain(browser: Chromium) -> list[dict[str, Any]]:
    try:
        return browser._read(time.monotonic() + 0.2)
    except (TimeoutError, RuntimeError):
        return []


def _collect(events: list[dict[str, Any]], result: PageResult) -> None:
    for event in events:
        method, params = event.get("method"), event.get("params") or {}
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args") or [])
            result.messages.append(f"console.{params.get('type')}: {text}")
            if params.get("type") in ("error", "assert", "warning"):
                result.errors.append(f"console.{params.get('type')}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            result.errors.append(f"exception: {details.get('text')} {(details.get('exception') or {}).get('description', '')}")
        elif method == "Log.entryAdded":
            entry = params.get("entry") or {}
            result.messages.append(f"log.{entry.get('level')}: {entry.get('text')}")
            if entry.get("level") in ("error", "warning"):
                result.errors.append(f"log.{entry.get('level')} ({entry.get('source')}): {entry.get('text')}")
        elif method == "Network.requestWillBeSent":
            result.requests.append(str((params.get("request") or {}).get("url")))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("page")
    p.add_argument("--png", help="write the screenshot here")
    args = p.parse_args(argv)
    seen = open_page(Path(args.page))
    if args.png:
        Path(args.png).write_bytes(seen.png)
    print(json.dumps({"errors": seen.errors, "messages": seen.messages, "requests": seen.requests}, indent=1))
    return 1 if seen.errors else 0


if __name__ == "__main__":
    sys.exit(main())
