"""Secret detection (``smriti.secrets``): false positives on ordinary text, detection per kind.

1. Every turn of the LoCoMo dev conversations (``"{speaker}: {text}"`` plus the image
   caption, as ``bench/quality.py`` stores them) goes through ``smriti.secrets.redact``
   and ``strip_private``; a turn whose text changes is a false positive (target: none).
   The altered turns are listed.
2. ``--per-kind`` fake credentials of every kind (``smriti.testing.fake_secrets``:
   random, format-valid, each in a sentence such as "My card number is ...") go through
   ``redact``; a detection counts when no byte sequence of the credential is left in the
   output and the kind reported is the expected one (target: all).

    uv run python bench/secret_scan.py
    uv run python bench/secret_scan.py --per-kind 200 --seed 7

The file is not called ``secrets.py``: run as a script, its directory comes first on
``sys.path`` and the name would shadow the standard library's ``secrets`` module.

Results: tables on stdout, JSON in bench/results/secrets-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo  # noqa: E402
from common import configure_logging, machine, table, write_results  # noqa: E402

from smriti import secrets  # noqa: E402
from smriti.testing.fake_secrets import GENERATORS, example  # noqa: E402


def false_positives(path: Path) -> dict[str, Any]:
    """Turns of the LoCoMo file at ``path`` that the detector (or <private>) alters."""
    conversations = locomo.load(path)
    altered: list[dict[str, Any]] = []
    turns = 0
    started = time.perf_counter()
    for conv in conversations:
        for turn in conv.turns:
            turns += 1
            text, found = secrets.redact(turn.text)
            _, private = secrets.strip_private(turn.text)
            if found or private:
                kinds = [f.kind for f in found] + ["private"] * private
                altered.append(
                    {
                        "conversation": conv.id,
                        "turn": turn.dia_id,
                        "text": turn.text,
                        "kinds": kinds,
                    }
                )
    seconds = time.perf_counter() - started
    per_turn = round(seconds / max(turns, 1) * 1e6, 1)
    return {"conversations": len(conversations), "turns": turns, "altered": altered,
            "seconds": round(seconds, 3), "us_per_turn": per_turn}  # fmt: skip


def detection(per_kind: int, seed: int) -> dict[str, dict[str, Any]]:
    """Per kind: how many generated credentials were found and fully removed."""
    rng = random.Random(seed)
    out: dict[str, dict[str, Any]] = {}
    for kind in GENERATORS:
        found = 0
        misses: list[str] = []
        for _ in range(per_kind):
            sentence, secret = example(kind, rng)
            text, findings = secrets.redact(sentence)
            if secret not in text and kind in {f.kind for f in findings}:
                found += 1
            elif len(misses) < 3:
                misses.append(sentence)
        out[kind] = {"generated": per_kind, "detected": found, "missed_examples": misses}
    return out


def main(argv: list[str] | None = None) -> int:
    """Run both measurements, print the tables and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=locomo.DATA, help="LoCoMo JSON file")
    parser.add_argument("--per-kind", type=int, default=50, help="fake credentials per kind")
    parser.add_argument("--seed", type=int, default=36)
    args = parser.parse_args(argv)
    configure_logging()
    fp = false_positives(args.data)
    print(f"LoCoMo dev: {len(fp['altered'])} of {fp['turns']} turns altered "
          f"({fp['conversations']} conversations, {fp['us_per_turn']} us per turn)")  # fmt: skip
    for a in fp["altered"]:
        print(f"  {a['conversation']} {a['turn']} {a['kinds']}: {a['text'][:120]!r}")
    per_kind = detection(args.per_kind, args.seed)
    rows = [[k, v["generated"], v["detected"], f"{v['detected'] / v['generated']:.0%}"]
            for k, v in per_kind.items()]  # fmt: skip
    total = sum(v["detected"] for v in per_kind.values())
    generated = sum(v["generated"] for v in per_kind.values())
    rows.append(["all", generated, total, f"{total / generated:.0%}"])
    print(table(["kind", "generated", "detected", "rate"], rows))
    for kind, v in per_kind.items():
        for miss in v["missed_examples"]:
            print(f"  missed {kind}: {miss[:140]!r}")
    path = write_results(
        "secrets",
        {"machine": machine(), "args": {"per_kind": args.per_kind, "seed": args.seed,
         "data": str(args.data)}, "locomo": fp, "detection": per_kind},
    )  # fmt: skip
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
