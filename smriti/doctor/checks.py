"""One line of the doctor's report: a named check with ``ok``, ``warn`` or ``fail``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True, slots=True)
class Check:
    """The outcome of one check.

    ``detail`` says what was found; ``fix`` (empty when there is nothing to do) says what
    a person should change. ``fail`` makes ``smriti doctor`` exit with 1; ``warn`` does not.
    """

    name: str
    status: Status
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        """The check as a JSON-ready mapping."""
        return asdict(self)


def ok(name: str, detail: str, fix: str = "") -> Check:
    """A passing check (``fix`` may carry a tip)."""
    return Check(name, "ok", detail, fix)


def warn(name: str, detail: str, fix: str = "") -> Check:
    """Something works but deserves attention."""
    return Check(name, "warn", detail, fix)


def fail(name: str, detail: str, fix: str = "") -> Check:
    """Something is broken: the doctor exits with 1."""
    return Check(name, "fail", detail, fix)


def guarded(name: str, run: Callable[[], list[Check]]) -> list[Check]:
    """``run()``, or one ``fail`` line when it raises: a broken setup never crashes doctor."""
    try:
        return run()
    except Exception as exc:  # any error is a finding, never a traceback
        return [fail(name, one_line(exc), "see the message; `smriti plugins` lists load failures")]


def one_line(exc: BaseException) -> str:
    """An exception as one line: its message, or its type when it has none."""
    return " ".join(str(exc).split()) or type(exc).__name__
