"""Built-in plugin: the OpenAI-compatible embedder and LLM cue extractor.

Both are configured by the ``LLM_*`` / ``EMBEDDING_*`` settings and work with any
OpenAI-compatible server. The ``openai`` package is imported only when a request is made.
"""

from __future__ import annotations

from smriti import CueExtractor, Embedder, hookimpl
from smriti.default_plugins.openai_embedder import OpenAIEmbedder
from smriti.default_plugins.openai_extractor import OpenAICueExtractor

__all__ = ["OpenAICueExtractor", "OpenAIEmbedder"]


@hookimpl
def register_embedders() -> list[type[Embedder]]:
    """The OpenAI-compatible embedder (``SMRITI_EMBEDDER=openai``)."""
    return [OpenAIEmbedder]


@hookimpl
def register_cue_extractors() -> list[type[CueExtractor]]:
    """The OpenAI-compatible LLM cue extractor (``SMRITI_CUE_EXTRACTOR=openai``)."""
    return [OpenAICueExtractor]
