"""The settings the local embedder reads (``LocalEmbedder.declared_settings``)."""

from __future__ import annotations

from smriti import ConfigError, Setting


def threads(name: str, raw: str) -> int:
    """onnxruntime intra-op threads, 1 to 256."""
    value = raw.strip()
    if not value.isdigit() or not 1 <= int(value) <= 256:
        raise ConfigError(f"{name}={raw!r} is invalid (allowed: 1..256)")
    return int(value)


def load_seconds(name: str, raw: str) -> float:
    """Seconds a call waits for the model, above 0 and at most a day."""
    try:
        value = float(raw.strip())
    except ValueError:
        value = -1.0
    if not 0 < value <= 86_400:
        raise ConfigError(f"{name}={raw!r} is invalid (allowed: seconds, 0 < s <= 86400)")
    return value


LOCAL_MODEL = Setting.text(
    "SMRITI_LOCAL_MODEL",
    "",
    help="Local embedder's model: a directory with `model.onnx` and `tokenizer.json`, or a "
    "Hugging Face repository id.",
)
LOCAL_THREADS: Setting[int | None] = Setting(
    "SMRITI_LOCAL_THREADS",
    None,
    threads,
    help="onnxruntime threads of the local embedder.",
    default_text="CPU count (capped)",
)
LOAD_TIMEOUT = Setting(
    "SMRITI_LOCAL_LOAD_TIMEOUT",
    300.0,
    load_seconds,
    help="Seconds a call to the local embedder waits for its model.",
)
MODEL_SPEC = Setting.text(
    "SMRITI_MODEL_SPEC", "", help="JSON file pinning another model for the local embedder."
)
SETTINGS = (LOCAL_MODEL, LOCAL_THREADS, LOAD_TIMEOUT, MODEL_SPEC)
