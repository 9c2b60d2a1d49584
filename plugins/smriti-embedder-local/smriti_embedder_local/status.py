"""What the local embedder would use, without loading or downloading anything."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti_embedder_local.model_files import find_onnx, repo_id
from smriti_embedder_local.pinned import (
    SPEC_VARIABLE,
    cache_problems,
    cache_root,
    endpoint,
    is_offline,
    last_error,
    spec_from_env,
)
from smriti_embedder_local.settings import LOCAL_MODEL

if TYPE_CHECKING:
    from smriti import Settings


def status(settings: Settings, *, verify: bool = False) -> dict[str, Any]:
    """The local model's state, for ``smriti doctor``; no network, no model load.

    Keys:

    - ``source``: ``"directory"`` (``SMRITI_LOCAL_MODEL`` is a folder), ``"hub-name"``
      (``SMRITI_LOCAL_MODEL`` is a repository id, unpinned) or ``"pinned"`` (the default).
    - ``model``: the repository id, or the configured directory.
    - ``model_id``: the id its vectors are stored under (pinned: known in advance;
      otherwise None).
    - ``revision``: the pinned commit sha (None unless ``source`` is ``"pinned"``).
    - ``spec``: ``"built-in"`` or the ``SMRITI_MODEL_SPEC`` file in use.
    - ``path``: the directory the model is loaded from (for ``pinned``, its cache
      directory under ``$XDG_CACHE_HOME/smriti/models`` or ``~/.cache/smriti/models``).
    - ``cached``: whether every file is there with its pinned size (and, with
      ``verify=True``, its sha256); for ``directory``, whether the folder holds an ONNX
      file and ``tokenizer.json``.
    - ``problems``: ``{file: problem}`` for files that are missing or do not match.
    - ``download_bytes``: the size of the pinned files; ``missing_bytes``: what a first
      use still has to download.
    - ``offline``: ``HF_HUB_OFFLINE`` is set. ``endpoint``: the Hub used for downloads.
    - ``last_error``: why the last attempt to get the pinned model failed, if it did.
    - ``fallback_reason``: why the embedder would fall back to the lexical one right
      now, as far as can be told without the network (None: the model is cached or will
      be downloaded on first use).

    Raises ConfigError when ``SMRITI_MODEL_SPEC`` names a file that is not a spec.
    """
    env = settings.env or dict(os.environ)
    configured = LOCAL_MODEL.read(env)
    if configured:
        return _configured(configured)
    spec = spec_from_env(env)
    root = cache_root(env)
    problems = cache_problems(spec, root, full=verify)
    missing = sum(f.size for f in spec.files if f.path in problems)
    offline = is_offline(env)
    error = last_error(root, spec)
    reason = None
    if problems and offline:
        reason = f"the model is not cached in {spec.directory(root)} and HF_HUB_OFFLINE is set"
    elif problems and error:
        reason = error
    return {
        "source": "pinned",
        "model": spec.repo,
        "model_id": spec.model_id,
        "revision": spec.revision,
        "spec": env.get(SPEC_VARIABLE, "").strip() or "built-in",
        "path": str(spec.directory(root)),
        "cached": not problems,
        "problems": problems,
        "download_bytes": spec.download_bytes,
        "missing_bytes": missing,
        "offline": offline,
        "endpoint": endpoint(env),
        "last_error": error,
        "fallback_reason": reason,
    }


def _configured(value: str) -> dict[str, Any]:
    path = Path(value).expanduser()
    is_dir = path.is_dir()
    source = "directory" if is_dir or repo_id(value) is None else "hub-name"
    problems: dict[str, str] = {}
    if source == "directory":
        if not is_dir:
            problems["."] = "not a directory"
        else:
            if find_onnx(path) is None:
                problems["model.onnx"] = "missing"
            if not (path / "tokenizer.json").is_file():
                problems["tokenizer.json"] = "missing"
    return {
        "source": source,
        "model": value,
        "model_id": None,
        "revision": None,
        "spec": None,
        "path": str(path) if source == "directory" else None,
        "cached": source == "directory" and not problems,
        "problems": problems,
        "download_bytes": None,
        "missing_bytes": None,
        "offline": None,
        "endpoint": None,
        "last_error": None,
        "fallback_reason": None,
    }
