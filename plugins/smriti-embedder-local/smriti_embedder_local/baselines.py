"""The similarity baselines of known model weights (``Embedder.similarity_baseline``).

Keyed by the first 12 hex digits of the ONNX file's sha256 (``ModelFiles.fingerprint``),
since the baseline belongs to the exact weights. Each value is ``(m - r) / (1 - r)``,
where ``m`` is the mean cosine the model gives 400 random pairs of conversation turns
and ``r`` the same for all-MiniLM-L6-v2, the scale the engine's thresholds are on
(``bench/similarity_baseline.py``: ``r`` = 0.291, bge-small-en-v1.5 ``m`` = 0.632).
Weights not listed keep their cosines as they are (baseline 0), as does a spec or a
model directory that states its own (``similarity_baseline`` in ``SMRITI_MODEL_SPEC``).
"""

from __future__ import annotations

KNOWN_BASELINES: dict[str, float] = {
    # BAAI/bge-small-en-v1.5, int8 (Xenova/bge-small-en-v1.5 onnx/model_quantized.onnx)
    "6c9c6101a956": 0.48,
    # BAAI/bge-small-en-v1.5, fp32 (onnx/model.onnx)
    "828e1496d7fa": 0.48,
}


def baseline_of(fingerprint: str, stated: float | None = None) -> float:
    """``stated`` when a spec or model directory gives one, else the baseline of the
    weights with this fingerprint, else 0."""
    return stated if stated is not None else KNOWN_BASELINES.get(fingerprint, 0.0)
