"""Headless Chromium driven over the DevTools protocol, for tests of web pages.

Chromium's ``--remote-debugging-pipe`` reads protocol commands from file descriptor 3
and writes answers and events to descriptor 4, each message a JSON object ended by a
NUL byte: no websocket library and no Playwright are needed, only the browser
(Debian's ``chromium``). ``Browser`` opens one page, navigates, runs script in it,
clicks and waits for the next page to load, and takes screenshots; every script
error and console message of the page is collected (``problems``), so a test can
check that a page ran without a Content-Security-Policy violation.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: Where Debian installs Chromium.
CHROMIUM = Path("/usr/bin/chromium")


class BrowserError(RuntimeError):
    """The browser answered a command with an error, or did not answer in time."""


class Browser:
    """One headless Chromium with one page (a fresh profile: no cookies to start)."""

    def __init__(
        self, chromium: Path = CHROMIUM, width: int = 1280, height: int = 860, timeout: float = 30
    ) -> None:
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="smriti-chromium-")
        self._ids = 0
        self._answers: dict[int, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        #: Console messages, script errors and log entries of the page, as text.
        self.problems: list[str] = []
        commands_read, self._commands = _high_pipe()
        self._answers_read, answers_write = _high_pipe()

        def wire() -> None:  # in the child: the pipes at the descriptors Chromium reads
            os.dup2(commands_read, 3)
            os.dup2(answers_write, 4)

        args = [str(chromium), "--headless", "--no-sandbox", "--disable-gpu"]
        args += ["--remote-debugging-pipe", f"--user-data-dir={self.profile}"]
        args += [f"--window-size={width},{height}", "--hide-scrollbars", "about:blank"]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,  # the dup2'ed 3 and 4 must survive; the rest is close-on-exec
            preexec_fn=wire,
        )
        os.close(commands_read)
        os.close(answers_write)
        threading.Thread(target=self._read, name="chromium-reader", daemon=True).start()
        self.session = self._attach(width, height)

    # -- the protocol ----------------------------------------------------------------------
    def send(self, method: str, session: bool = True, **params: Any) -> dict[str, Any]:
        """Run one protocol command (on the page unless ``session`` is False)."""
        with self._cond:
            self._ids += 1
            key = self._ids
        message: dict[str, Any] = {"id": key, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        with self._cond:
            while key not in self._answers:
                if not self._cond.wait(max(0.0, deadline - time.monotonic())):
                    raise BrowserError(f"no answer to {method} within {self.timeout} s")
            answer = self._answers.pop(key)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return dict(answer.get("result", {}))

    def _read(self) -> None:
        buffer = b""
        while chunk := os.read(self._answers_read, 1 << 16):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                self._dispatch(json.loads(raw))
        with self._cond:
            self._cond.notify_all()

    def _dispatch(self, message: dict[str, Any]) -> None:
        with self._cond:
            if "id" in message:
                self._answers[message["id"]] = message
            else:
                self._events.append(message)
                self._note(message)
            self._cond.notify_all()

    def _note(self, event: dict[str, Any]) -> None:
        params = event.get("params", {})
        if event.get("method") == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.problems.append(f"exception: {details.get('text')} {details.get('exception')}")
        elif event.get("method") == "Runtime.consoleAPICalled":
            args = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            self.problems.append(f"console.{params.get('type')}: {args}")
        elif event.get("method") == "Log.entryAdded":
            entry = params.get("entry", {})
            self.problems.append(f"log {entry.get('level')}: {entry.get('text')}")

    def _attach(self, width: int, height: int) -> str:
        targets = self.send("Target.getTargets", session=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        attached = self.send(
            "Target.attachToTarget", session=False, targetId=page["targetId"], flatten=True
        )
        self.session = str(attached["sessionId"])
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        return self.session

    # -- what a test does ------------------------------------------------------------------
    def goto(self, url: str) -> str:
        """Open ``url`` and wait until the page (after any redirects) has loaded;
        returns the page's address."""
        mark = self._mark()
        self.send("Page.navigate", url=url)
        self._wait_load(mark)
        return str(self.evaluate("location.href"))

    def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` run in the page (promises awaited)."""
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def click(self, selector: str) -> str:
        """Click the element ``selector`` (a link or a submit button) and wait for the
        page it leads to; returns its address."""
        mark = self._mark()
        found = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return false; e.click(); return true; })()"
        )
        if not found:
            raise BrowserError(f"no element {selector!r} on {self.evaluate('location.href')}")
        self._wait_load(mark)
        return str(self.evaluate("location.href"))

    def fill(self, selector: str, value: str) -> None:
        """Set the value of the form field ``selector``."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).value = {json.dumps(value)}")

    def text(self, selector: str = "body") -> str:
        """The visible text of the first element ``selector`` ("" when there is none)."""
        value = self.evaluate(
            f"(document.querySelector({json.dumps(selector)}) || {{innerText: ''}}).innerText"
        )
        return str(value)

    def screenshot(self, path: Path) -> Path:
        """Save the page as it looks as a PNG file."""
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def _mark(self) -> int:
        with self._cond:
            return len(self._events)

    def _wait_load(self, mark: int) -> None:
        deadline = time.monotonic() + self.timeout
        with self._cond:
            while not any(e.get("method") == "Page.loadEventFired" for e in self._events[mark:]):
                if not self._cond.wait(max(0.0, deadline - time.monotonic())):
                    raise BrowserError(f"the page did not load within {self.timeout} s")

    def close(self) -> None:
        """Quit the browser and remove its profile."""
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close", session=False)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._commands)
        os.close(self._answers_read)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _high_pipe() -> tuple[int, int]:
    """A pipe whose two ends are above descriptor 4, so that putting them at 3 and 4
    in the child cannot overwrite one with the other."""
    read, write = os.pipe()
    ends = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (read, write))
    os.close(read)
    os.close(write)
    return ends[0], ends[1]
