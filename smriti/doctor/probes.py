"""Network probes: does each configured server answer? Short timeouts, run in parallel.

Each probe returns one Check and never raises. URLs are shown without their userinfo
(``https://user:token@host`` becomes ``https://***@host``).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from smriti.doctor.checks import Check, fail, ok, one_line, warn

TIMEOUT = 2.0
#: ``git ls-remote`` includes a TLS or SSH handshake and authentication.
GIT_TIMEOUT = 5.0
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")

Probe = Callable[[], Check]


def run_parallel(probes: Sequence[Probe]) -> list[Check]:
    """Run every probe in its own thread; results in the order given."""
    if not probes:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(probes))) as pool:
        return list(pool.map(lambda probe: probe(), probes))


def redact_url(url: str) -> str:
    """``url`` without credentials in its userinfo part."""
    return _USERINFO.sub("***@", url)


def openai_models(
    name: str,
    base_url: str,
    variables: tuple[str, str],
    api_key: str,
    wanted: Sequence[tuple[str, str]],
) -> Check:
    """GET ``{base_url}/models``.

    ``variables`` are the (base URL, API key) variables to name in a fix; ``wanted`` the
    (variable, model) pairs expected in the list the server returns.
    """
    url_var, key_var = variables
    shown = redact_url(base_url)
    request = urllib.request.Request(
        base_url.rstrip("/") + "/models", headers={"Accept": "application/json"}
    )
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310
            body = response.read(2_000_000)
    except urllib.error.HTTPError as exc:
        return _http_error(name, shown, exc.code, url_var, key_var)
    except (OSError, ValueError) as exc:
        return _unreachable(name, shown, exc, url_var)
    return _models_check(name, shown, body, wanted)


def _http_error(name: str, shown: str, code: int, url_var: str, key_var: str) -> Check:
    if code in (401, 403):
        return fail(name, f"{shown} rejected the API key (HTTP {code})", f"check {key_var}")
    if code == 404:
        return warn(
            name,
            f"{shown} answers but has no /models (HTTP 404)",
            f"check that {url_var} ends with the API prefix (often /v1)",
        )
    return warn(name, f"{shown} answers with HTTP {code}", "retry later or check the server")


def _unreachable(name: str, shown: str, exc: BaseException, variable: str) -> Check:
    reason = getattr(exc, "reason", exc)
    text = one_line(reason) if isinstance(reason, BaseException) else str(reason)
    return fail(
        name, f"{shown} does not answer ({text})", f"start the server or correct {variable}"
    )


def _models_check(name: str, shown: str, body: bytes, wanted: Sequence[tuple[str, str]]) -> Check:
    try:
        listed = {str(m.get("id")) for m in json.loads(body).get("data", [])}
    except (ValueError, AttributeError, TypeError):
        return warn(name, f"{shown} answers, but /models is not OpenAI-style JSON")
    missing = [(var, model) for var, model in wanted if model not in listed]
    if listed and missing:
        names = ", ".join(f"{var}={model!r}" for var, model in missing)
        return warn(
            name,
            f"{shown} answers, but does not list {names}",
            f"set {missing[0][0]} to one of: {', '.join(sorted(listed)[:8])}",
        )
    return ok(name, f"{shown} answers ({len(listed)} models)")


def tcp_service(name: str, host: str, port: int, hello: bytes, read: int = 64) -> bytes | str:
    """Connect, send ``hello``, return the reply bytes; an error message (str) on failure."""
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT) as sock:
            sock.settimeout(TIMEOUT)
            sock.sendall(hello)
            return sock.recv(read)
    except OSError as exc:
        return one_line(exc)


def bolt(uri: str) -> Check:
    """A Bolt handshake with the Neo4j server of ``NEO4J_URI`` (authentication not tried)."""
    parts = urlsplit(uri)
    host, port = parts.hostname or "localhost", parts.port or 7687
    # Magic preamble, then four version proposals: 5.0-5.8, 4.2-4.4, 4.0, 3.0.
    hello = bytes.fromhex("6060b01700080805000204040000000400000003")
    reply = tcp_service("neo4j", host, port, hello, 4)
    shown = redact_url(uri)
    if isinstance(reply, str):
        return fail(
            "neo4j", f"{shown} does not answer ({reply})", "start Neo4j or correct NEO4J_URI"
        )
    if len(reply) == 4 and reply != b"\0\0\0\0":
        return ok("neo4j", f"{shown} answers Bolt {reply[3]}.{reply[2]}")
    return fail(
        "neo4j", f"{shown} answers, but not as a Bolt server", "NEO4J_URI must name the Bolt port"
    )


def redis_ping(addr: str, password: str) -> Check:
    """``AUTH`` (when a password is set) and ``PING`` to the FalkorDB server at ``addr``."""
    host, port = addr.rsplit(":", 1)
    hello = b""
    if password:
        hello += _resp("AUTH", password)
    hello += _resp("PING")
    reply = tcp_service("falkordb", host, int(port), hello, 256)
    if isinstance(reply, str):
        return fail(
            "falkordb", f"{addr} does not answer ({reply})", "start FalkorDB or correct FALKOR_ADDR"
        )
    text = reply.decode(errors="replace")
    if "+PONG" in text:
        return ok("falkordb", f"{addr} answers PING")
    if "NOAUTH" in text or "WRONGPASS" in text or "invalid password" in text:
        return fail("falkordb", f"{addr} refused the credentials", "check FALKOR_PASSWORD")
    return fail("falkordb", f"{addr} answers, but not as Redis/FalkorDB", "check FALKOR_ADDR")


def _resp(*words: str) -> bytes:
    out = [f"*{len(words)}\r\n".encode()]
    for word in words:
        data = word.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def http_endpoint(name: str, url: str, variable: str) -> Check:
    """Any HTTP answer from ``url`` counts (S3 answers 403 to anonymous requests)."""
    shown = redact_url(url)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:  # noqa: S310
            code = response.status
    except urllib.error.HTTPError as exc:
        code = exc.code
    except (OSError, ValueError) as exc:
        return _unreachable(name, shown, exc, variable)
    return ok(name, f"{shown} answers (HTTP {code})")


def git_remote(remote: str) -> Check:
    """``git ls-remote`` on the backup remote, without prompts."""
    shown = redact_url(remote)
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes -o ConnectTimeout=3")
    try:
        result = subprocess.run(
            ["git", "ls-remote", "--symref", remote, "HEAD"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        return fail("git remote", "git is not installed", "install git (the backup uses it)")
    except subprocess.TimeoutExpired:
        return fail("git remote", f"{shown} did not answer in {GIT_TIMEOUT:g} s", _GIT_FIX)
    if result.returncode != 0:
        lines = [ln.strip() for ln in result.stderr.splitlines() if ln.strip()]
        first = next((ln for ln in lines if ln.startswith(("fatal:", "error:"))), "")
        reason = redact_url(first or (lines[0] if lines else f"exit {result.returncode}"))
        return fail("git remote", f"{shown}: {reason}", _GIT_FIX)
    branch = _default_branch(result.stdout)
    return ok("git remote", f"{shown} answers ({branch})")


_GIT_FIX = "check GIT_BASE_URL and git's credentials (credential helper, SSH agent)"


def _default_branch(out: str) -> str:
    for line in out.splitlines():
        if line.startswith("ref: "):
            return "default branch " + line.split()[1].removeprefix("refs/heads/")
    return "empty repository" if not out.strip() else "no default branch"
