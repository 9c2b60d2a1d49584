"""structlog configuration: stderr only (stdout is the MCP wire), console or JSON lines."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import structlog

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
    renderer: Any = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    relaying: list[Any] = [_relay_processor(relay)] if relay is not None else []
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *relaying,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


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
