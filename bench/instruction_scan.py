"""Instruction flags (``smriti.instructions``): false positives on ordinary text, and
detection on instruction-like memories.

1. Every turn of the LoCoMo dev conversations (``"{speaker}: {text}"`` plus the image
   caption, as ``bench/quality.py`` stores them) goes through ``instruction_flags``; a
   flagged turn is a false positive (target: almost none). The flagged turns are listed.
2. The examples of ``smriti.testing.injections``: every instruction-like memory must be
   flagged with the expected reason, and no ordinary memory may be.

    uv run python bench/instruction_scan.py

Results: a summary on stdout, JSON in bench/results/instructions-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo  # noqa: E402
from common import configure_logging, machine, table, write_results  # noqa: E402

from smriti.instructions import instruction_flags  # noqa: E402
from smriti.testing.injections import INSTRUCTIONS, ORDINARY  # noqa: E402


def false_positives(path: Path) -> dict[str, Any]:
    """Turns of the LoCoMo file at ``path`` that get a flag."""
    conversations = locomo.load(path)
    flagged: list[dict[str, Any]] = []
    turns = 0
    started = time.perf_counter()
    for conv in conversations:
        for turn in conv.turns:
            turns += 1
            if flags := instruction_flags(turn.text):
                flagged.append({"conversation": conv.id, "turn": turn.dia_id,
                                "text": turn.text, "flags": flags})  # fmt: skip
    seconds = time.perf_counter() - started
    return {"conversations": len(conversations), "turns": turns, "flagged": flagged,
            "seconds": round(seconds, 3),
            "us_per_turn": round(seconds / max(turns, 1) * 1e6, 1)}  # fmt: skip


def examples() -> dict[str, Any]:
    """The injection examples caught (with the expected reason) and ordinary ones left."""
    missed = [
        text
        for text, reason in INSTRUCTIONS
        if not any(f["reason"].startswith(reason) for f in instruction_flags(text))
    ]
    wrongly = [text for text in ORDINARY if instruction_flags(text)]
    return {"instructions": len(INSTRUCTIONS), "caught": len(INSTRUCTIONS) - len(missed),
            "missed": missed, "ordinary": len(ORDINARY), "flagged_ordinary": wrongly}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run both measurements, print them and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=locomo.DATA, help="LoCoMo JSON file")
    args = parser.parse_args(argv)
    configure_logging()
    fp = false_positives(args.data)
    ex = examples()
    rows = [
        ["LoCoMo dev turns flagged", f"{len(fp['flagged'])} of {fp['turns']}"],
        ["instruction examples flagged", f"{ex['caught']} of {ex['instructions']}"],
        ["ordinary examples flagged", f"{len(ex['flagged_ordinary'])} of {ex['ordinary']}"],
        ["microseconds per LoCoMo turn", fp["us_per_turn"]],
    ]
    print(table(["measure", "result"], rows))
    for f in fp["flagged"]:
        print(f"  {f['conversation']} {f['turn']}: {f['text'][:120]!r} {f['flags']}")
    for text in ex["missed"] + ex["flagged_ordinary"]:
        print(f"  wrong: {text!r}")
    path = write_results("instructions", {"machine": machine(), "data": str(args.data),
                                          "locomo": fp, "examples": ex})  # fmt: skip
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
