"""Local sentence embeddings for Smriti: an ONNX model run with onnxruntime, no torch.

``status(settings)`` reports the model's state (cached? where? which revision? why a
fallback?) without loading or downloading it.
"""

from smriti_embedder_local.embedder import LocalEmbedder
from smriti_embedder_local.status import status

__all__ = ["LocalEmbedder", "status"]
