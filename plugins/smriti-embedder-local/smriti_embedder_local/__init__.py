"""Local sentence embeddings for Smriti: an ONNX model run with onnxruntime, no torch."""

from smriti_embedder_local.embedder import LocalEmbedder

__all__ = ["LocalEmbedder"]
