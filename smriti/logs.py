"""structlog configuration: stderr only (stdout is the MCP wire), console or JSON lines."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import structlog

from smriti import secrets

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


def configure_logging(
    level: str = "info",
    json: bool | None = None,
    relay: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Send structlog output to stderr, human-readable on a terminal, JSON otherwise.

    ``relay`` also receives every warning and error as a dict (the owner process hands
    them to the processes it serves, whose users would otherwise never see them).
    """
    if json is None:
        json = not sys.stderr.isatty()
    # Tracebacks are rendered to text before ``_scrub_processor`` reads them (a secret in
    # an exception message must not reach the line), so the console prints them plainly.
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
    )
    relaying: list[Any] = [_relay_processor(relay)] if relay is not None else []
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _scrub_processor,
            *relaying,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def _scrub_processor(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Redact credentials from every value of ``event`` (``smriti.secrets.scrub``), so
    that no secret reaches a log line, whatever some code passes to a logger."""
    return {key: _scrubbed(value) for key, value in event.items()}


def _scrubbed(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return secrets.scrub(value)
    if depth > 3 or isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, dict):
        return {k: _scrubbed(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_scrubbed(v, depth + 1) for v in value]
    # Anything else is rendered as text by the renderer: scrub that text.
    return secrets.scrub(str(value))


def _relay_processor(relay: Callable[[dict[str, Any]], None]) -> Any:
    def processor(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        if _LEVELS.get(str(event.get("level")), 0) >= _LEVELS["warning"]:
            relay(dict(event))
        return event

    return processor


def get_logger(name: str) -> Any:
    """A structlog logger named after the module (stderr even if unconfigured)."""
    ensure_stderr()
    return structlog.get_logger(name)


def ensure_stderr() -> None:
    """Route structlog to stderr if nobody configured it (its default is stdout)."""
    if not structlog.is_configured():
        configure_logging()
