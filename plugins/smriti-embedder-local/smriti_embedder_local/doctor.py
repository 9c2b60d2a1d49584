"""What ``smriti doctor`` says of the local embedder (``LocalEmbedder.doctor_check``):
the model's state from ``status(settings)``, without loading or downloading it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from smriti import DoctorCheck
from smriti_embedder_local.status import status

if TYPE_CHECKING:
    from smriti import Settings

NAME = "embedder"


def local_check(settings: Settings, *, explicit: bool) -> DoctorCheck:
    """The model's state; with ``explicit`` (``SMRITI_EMBEDDER=local``, no fallback) a
    model that cannot be had is a failure, not a warning."""
    check = from_status(status(settings))
    if explicit and check.status == "warn":
        detail = check.detail.replace(", so the lexical embedder is used", "")
        return DoctorCheck(NAME, "fail", detail, check.fix)
    return check


def from_status(data: Mapping[str, Any]) -> DoctorCheck:
    """A check from the mapping ``status(settings)`` returns."""
    model = data.get("model") or "the default model"
    problems = data.get("problems") or {}
    if data.get("source") == "directory" and problems:
        listed = ", ".join(
            why if name == "." else f"{name} {why}" for name, why in problems.items()
        )
        return DoctorCheck(
            NAME,
            "fail",
            f"local: SMRITI_LOCAL_MODEL={model}: {listed}",
            "point SMRITI_LOCAL_MODEL at a directory with model.onnx and tokenizer.json",
        )
    if data.get("fallback_reason"):
        return DoctorCheck(
            NAME,
            "warn",
            f"local: {model} is unavailable ({data['fallback_reason']}), so the lexical "
            "embedder is used",
            "run once with internet access (the model is downloaded on first use), "
            "or set SMRITI_LOCAL_MODEL to a model directory",
        )
    if data.get("cached"):
        where = f" in {data['path']}" if data.get("path") else ""
        detail = f"local: {model} ({data.get('model_id') or 'model'}), cached{where}"
        return DoctorCheck(NAME, "ok", detail)
    if data.get("source") == "hub-name":
        detail = f"local: {model} from the Hugging Face Hub (fetched on first use)"
        return DoctorCheck(NAME, "ok", detail)
    return _not_downloaded(model, data)


def _not_downloaded(model: str, data: Mapping[str, Any]) -> DoctorCheck:
    missing = data.get("missing_bytes")
    size = f"{missing / 2**20:.0f} MB " if isinstance(missing, int) else ""
    endpoint = data.get("endpoint") or "the Hugging Face Hub"
    error = f"; last attempt failed: {data['last_error']}" if data.get("last_error") else ""
    return DoctorCheck(
        NAME,
        "ok",
        f"local: {model}, not downloaded yet ({size}from {endpoint} on first use{error})",
        "doctor never downloads it; the first store or recall does",
    )
