"""``smriti doctor``'s probe of the Neo4j server: a Bolt handshake, no authentication."""

from __future__ import annotations

import re
import socket
from urllib.parse import urlsplit

from smriti import DoctorCheck

#: Seconds to connect and to wait for the server's answer.
TIMEOUT = 2.0
# Magic preamble, then four version proposals: 5.0-5.8, 4.2-4.4, 4.0, 3.0.
HELLO = bytes.fromhex("6060b01700080805000204040000000400000003")


def bolt(uri: str) -> DoctorCheck:
    """A Bolt handshake with the server of ``NEO4J_URI``; never raises."""
    parts = urlsplit(uri)
    shown = re.sub(r"(?<=://)[^/@\s]+@", "***@", uri)
    try:
        host, port = parts.hostname or "localhost", parts.port or 7687
        with socket.create_connection((host, port), timeout=TIMEOUT) as sock:
            sock.settimeout(TIMEOUT)
            sock.sendall(HELLO)
            reply = sock.recv(4)
    except (OSError, ValueError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        fix = "start Neo4j or correct NEO4J_URI"
        return DoctorCheck("neo4j", "fail", f"{shown} does not answer ({reason})", fix)
    if len(reply) == 4 and reply != b"\0\0\0\0":
        return DoctorCheck("neo4j", "ok", f"{shown} answers Bolt {reply[3]}.{reply[2]}")
    return DoctorCheck(
        "neo4j",
        "fail",
        f"{shown} answers, but not as a Bolt server",
        "NEO4J_URI must name the Bolt port",
    )
