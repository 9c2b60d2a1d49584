"""The engine the shared tests run on, for the plugins built on this library.

The tests of ``smriti-embedded-graph`` (durability, write-behind, erase) run once per
engine, each in its own process (``kuzu`` and ``ladybug`` cannot share one): the engine
is named by ``SMRITI_TEST_ENGINE`` (``kuzu``, the default, or ``ladybug``), and child
processes the tests start inherit it.
"""

from __future__ import annotations

import importlib
import os

from smriti_embedded_graph.backend import EmbeddedGraphBackend

#: ``SMRITI_TEST_ENGINE`` value -> the backend class, as ``module:Class``.
ENGINES: dict[str, str] = {
    "kuzu": "smriti_backend_kuzu.backend:KuzuBackend",
    "ladybug": "smriti_backend_ladybug.backend:LadybugBackend",
}


def engine_under_test() -> type[EmbeddedGraphBackend]:
    """The backend class named by ``SMRITI_TEST_ENGINE`` (its driver not imported)."""
    name = os.environ.get("SMRITI_TEST_ENGINE", "kuzu").strip().lower() or "kuzu"
    if name not in ENGINES:
        raise ValueError(f"SMRITI_TEST_ENGINE={name!r}: use one of {', '.join(ENGINES)}")
    module, cls = ENGINES[name].split(":")
    return getattr(importlib.import_module(module), cls)
