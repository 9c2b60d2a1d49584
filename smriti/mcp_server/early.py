"""Answering the MCP ``initialize`` request before the MCP SDK has been imported.

An MCP client starts a stdio server and gives up on it when ``initialize`` is not
answered within seconds; importing the MCP SDK alone takes about two seconds on a small
machine, and more when it is busy. So ``smriti`` answers ``initialize`` from this
module, which imports nothing heavy, on a thread that reads stdin while the SDK is
imported and the store is reached. The SDK is then given everything read so far,
including that request, so its session state is exactly as if it had read it itself;
its own answer to the request is dropped (``EarlyInitialize.answered``).

The answer is the one the SDK gives for this server (``tests/test_early_initialize.py``
compares them for every protocol version): the SDK's handshake versions, the server's
capabilities, name, title, version and instructions. A first line that is anything
else (another method, a malformed message) is left to the SDK, unanswered here.
"""

from __future__ import annotations

import json
import os
import select
import sys
import threading
from typing import Any

#: The protocol versions the MCP SDK negotiates with ``initialize``, oldest first (its
#: ``HANDSHAKE_PROTOCOL_VERSIONS``); a client asking for another gets the newest.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: What this server offers (the SDK's ``create_initialization_options().capabilities``).
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}
#: How often the reading thread checks whether it should stop.
_POLL_SECONDS = 0.05


def initialize_result(params: object) -> dict[str, Any] | None:
    """The result of an ``initialize`` request with ``params``; None when they are not
    what the request needs (the SDK then answers with the error)."""
    from smriti import __version__
    from smriti.mcp_server.texts import SERVER_INSTRUCTIONS

    if not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    client = params.get("clientInfo")
    if not isinstance(requested, str) or not isinstance(params.get("capabilities"), dict):
        return None
    if not isinstance(client, dict) or not all(
        isinstance(client.get(field), str) for field in ("name", "version")
    ):
        return None
    negotiated = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {
        "capabilities": CAPABILITIES,
        "instructions": SERVER_INSTRUCTIONS,
        "protocolVersion": negotiated,
        "serverInfo": {"name": "smriti", "title": "Smriti memory", "version": __version__},
    }


class EarlyInitialize:
    """Reads stdin until its first line, answering it when it is ``initialize``.

    ``start`` begins; ``finish`` stops the reading (waiting for a line being answered)
    and returns what was read, for the SDK to read before the rest of stdin.
    """

    def __init__(self, fd_in: int = 0, fd_out: int = 1) -> None:
        self.fd_in = fd_in
        self.fd_out = fd_out
        #: Bytes read from stdin, not yet given to the SDK.
        self.read = b""
        #: Whether stdin ended.
        self.eof = False
        #: The id of the request answered here, if one was.
        self.answered: int | str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> EarlyInitialize:
        """Start reading on a thread of its own (not on Windows, whose pipes cannot be
        polled); returns self."""
        if sys.platform != "win32":
            self._thread = threading.Thread(target=self._run, name="smriti-early-init")
            self._thread.daemon = True
            self._thread.start()
        return self

    def finish(self) -> EarlyInitialize:
        """Stop reading; afterwards ``read``, ``eof`` and ``answered`` are final."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and b"\n" not in self.read:
                ready, _, _ = select.select([self.fd_in], [], [], _POLL_SECONDS)
                if not ready:
                    continue
                chunk = os.read(self.fd_in, 65536)
                if not chunk:
                    self.eof = True
                    return
                self.read += chunk
            if b"\n" in self.read:
                self._answer(self.read.partition(b"\n")[0])
        except (OSError, ValueError):
            return  # an unpollable or closed stdin: the SDK reads it as it is

    def _answer(self, line: bytes) -> None:
        try:
            message = json.loads(line)
            # a lone surrogate is JSON but no text: the SDK rejects the line, so must this
            json.dumps(message, ensure_ascii=False).encode("utf-8")
        except (ValueError, RecursionError):  # deep nesting overflows the decoder's stack
            return
        if not isinstance(message, dict) or message.get("method") != "initialize":
            return
        key = message.get("id")
        if message.get("jsonrpc") != "2.0" or not isinstance(key, int | str):
            return
        if isinstance(key, bool):
            return
        result = initialize_result(message.get("params"))
        if result is None:
            return
        reply = json.dumps({"jsonrpc": "2.0", "id": key, "result": result}, ensure_ascii=False)
        data = (reply + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.fd_out, data) :]
        self.answered = key
