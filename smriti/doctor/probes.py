"""Network probes of the core's servers (the OpenAI-compatible APIs): short timeouts,
run in parallel with the probes plugins add (``doctor_probes``) for their own servers.

Each probe returns one Check and never raises. URLs are shown without their userinfo
(``https://user:token@host`` becomes ``https://***@host``).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from smriti.doctor.checks import Check, fail, ok, one_line, warn

TIMEOUT = 2.0
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
