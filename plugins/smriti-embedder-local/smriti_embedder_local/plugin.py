"""Entry point of the ``smriti-embedder-local`` plugin (kept light: no onnxruntime import)."""

from __future__ import annotations

from smriti import Embedder, hookimpl


@hookimpl
def register_embedders() -> list[type[Embedder]]:
    """The local ONNX sentence embedder (``SMRITI_EMBEDDER=local``)."""
    from smriti_embedder_local.embedder import LocalEmbedder

    return [LocalEmbedder]
