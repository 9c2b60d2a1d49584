"""LoCoMo quality with the engine's cosines put on another model's scale, for measurement.

Recall's thresholds and fusion weights were chosen on all-MiniLM-L6-v2, whose unrelated
texts score a cosine near 0.28 on LoCoMo; bge-small-en-v1.5 scores them near 0.62, so
its raw cosines pass every floor and weigh more in the fused score than MiniLM's would.
This script runs ``quality.py`` with the cosines recall fuses mapped to
``(c - b) / (1 - b)`` (``--baseline b``) and the cosine thresholds moved to match
(``b + t * (1 - b)``: recall's vector floor and cue similarity, the association,
duplicate and conflict thresholds), so a candidate model is measured on the scale the
engine was tuned on. ``--baseline 0`` is the unchanged engine. Usage::

    uv run python bench/calibrated.py --baseline 0.48 \\
        --model-dir "$(uv run python bench/fetch_model.py bge-small-int8)" \\
        --conversations conv-26,conv-41,conv-43

Every other argument is ``quality.py``'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality  # noqa: E402

from smriti.engine import fusion, recall  # noqa: E402

#: The settings holding cosine thresholds, with the engine's defaults.
THRESHOLDS = {"ASSOCIATION_THRESHOLD": 0.7, "DEDUP_THRESHOLD": 0.95, "CONFLICT_THRESHOLD": 0.8}


def calibrate(baseline: float) -> None:
    """Put the engine's cosines on the scale whose unrelated texts score ``baseline``."""
    if not 0.0 <= baseline < 1.0:
        raise SystemExit(f"--baseline must be in [0, 1): {baseline}")

    def raw(threshold: float) -> float:
        return baseline + threshold * (1.0 - baseline)

    def scaled(cosine: float) -> float:
        return (cosine - baseline) / (1.0 - baseline)

    recall.VECTOR_FLOOR = raw(recall.VECTOR_FLOOR)
    recall.CUE_SIMILARITY = raw(recall.CUE_SIMILARITY)
    similarity, provisional = fusion.Fusion.similarity, fusion.Fusion.provisional

    def scaled_similarity(self: fusion.Fusion, engram_id: str, cosine: float) -> float:
        return similarity(self, engram_id, scaled(cosine))

    def scaled_provisional(self: fusion.Fusion, found: Mapping[str, Any]) -> None:
        saved = self.vector
        self.vector = {key: scaled(value) for key, value in saved.items()}
        try:
            provisional(self, found)
        finally:
            self.vector = saved

    fusion.Fusion.similarity = scaled_similarity  # type: ignore[method-assign]
    fusion.Fusion.provisional = scaled_provisional  # type: ignore[method-assign]
    quality.SETTINGS.update({name: str(raw(value)) for name, value in THRESHOLDS.items()})


def main(argv: Sequence[str] | None = None) -> None:
    """Calibrate, then run ``quality.main`` with the remaining arguments."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--baseline", type=float, required=True)
    args, rest = p.parse_known_args(argv)
    calibrate(args.baseline)
    quality.main(rest)


if __name__ == "__main__":
    main()
