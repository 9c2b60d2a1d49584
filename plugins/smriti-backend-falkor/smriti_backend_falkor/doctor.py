"""``smriti doctor``'s probe of the FalkorDB server: ``AUTH`` (with a password) and ``PING``."""

from __future__ import annotations

import socket

from smriti import DoctorCheck

#: Seconds to connect and to wait for the server's answer.
TIMEOUT = 2.0


def redis_ping(addr: str, password: str) -> DoctorCheck:
    """Ping the server at ``addr`` (``FALKOR_ADDR``); never raises."""
    host, port = addr.rsplit(":", 1)
    hello = _resp("AUTH", password) if password else b""
    hello += _resp("PING")
    try:
        with socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock:
            sock.settimeout(TIMEOUT)
            sock.sendall(hello)
            text = sock.recv(256).decode(errors="replace")
    except (OSError, ValueError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        fix = "start FalkorDB or correct FALKOR_ADDR"
        return DoctorCheck("falkordb", "fail", f"{addr} does not answer ({reason})", fix)
    if "+PONG" in text:
        return DoctorCheck("falkordb", "ok", f"{addr} answers PING")
    if "NOAUTH" in text or "WRONGPASS" in text or "invalid password" in text:
        return DoctorCheck(
            "falkordb", "fail", f"{addr} refused the credentials", "check FALKOR_PASSWORD"
        )
    return DoctorCheck(
        "falkordb", "fail", f"{addr} answers, but not as Redis/FalkorDB", "check FALKOR_ADDR"
    )


def _resp(*words: str) -> bytes:
    out = [f"*{len(words)}\r\n".encode()]
    for word in words:
        data = word.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)
