"""How far apart a model places unrelated texts: the similarity baseline of its weights.

The engine's thresholds and fusion weights are on one common scale, that of
all-MiniLM-L6-v2 (``Embedder.similarity_baseline``). For a model whose unrelated texts
score a mean cosine ``m`` where MiniLM's score ``r``, the baseline ``b`` that maps
``m`` onto ``r`` with ``(c - b) / (1 - b)`` is ``(m - r) / (1 - r)``. Here "unrelated
texts" are random pairs of LoCoMo turns (their mean off-diagonal cosine; almost every
pair of turns is unrelated), taken from the tuning conversations only. Usage::

    uv run python bench/similarity_baseline.py --model-dirs DIR[,DIR...]

The first directory is the reference (default: the int8 MiniLM of ``fetch_model.py``,
listed first when not given). Prints one line per model and writes ``--out`` JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo  # noqa: E402
from common import model_dir  # noqa: E402

from smriti.config import Settings  # noqa: E402

TUNING = ("conv-26", "conv-41", "conv-43")


def sample(n: int, seed: int) -> list[str]:
    """``n`` random turns of the tuning conversations."""
    turns = [t.text for c in locomo.load() if c.id in TUNING for t in c.turns]
    return random.Random(seed).sample(turns, n)


def mean_unrelated(directory: Path, texts: Sequence[str]) -> tuple[str, float]:
    """The model's id and the mean cosine over all pairs of distinct ``texts``."""
    from smriti_embedder_local import LocalEmbedder

    settings = Settings.from_env({"SMRITI_LOCAL_MODEL": str(directory)})
    embedder = LocalEmbedder.from_settings(settings, explicit=True)
    assert embedder is not None
    vectors = embedder.embed(list(texts))
    sims = vectors @ vectors.T
    n = len(texts)
    return embedder.model_id, float((sims.sum() - np.trace(sims)) / (n * (n - 1)))


def main(argv: Sequence[str] | None = None) -> None:
    """Measure each model and print its baseline against the first."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dirs", default="", help="comma-separated model directories")
    p.add_argument("--turns", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench/results/similarity-baseline.json")
    args = p.parse_args(argv)
    dirs = [Path(d) for d in args.model_dirs.split(",") if d.strip()]
    if not dirs:
        dirs = [model_dir()]
    texts = sample(args.turns, args.seed)
    rows = []
    reference = None
    for directory in dirs:
        model_id, mean = mean_unrelated(directory, texts)
        reference = mean if reference is None else reference
        baseline = (mean - reference) / (1.0 - reference)
        rows.append({"model": model_id, "dir": str(directory), "mean": mean, "baseline": baseline})
        print(f"{model_id:60s} mean unrelated cosine {mean:.3f}  baseline {baseline:.3f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"turns": args.turns, "seed": args.seed, "models": rows}, indent=2))


if __name__ == "__main__":
    main()
