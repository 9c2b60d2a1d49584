"""Does a store drop a fact as a "duplicate"? Distinct-fact pairs and true repeats.

Each case is two texts stored one after the other into one store (every case into the
same store, as a user's memories accumulate): a **distinct** pair says two different
things that differ in one short detail (a letter, a number, a name, an ordinary word, a
negation, word order), a **repeat** pair says the same thing in another case, spacing,
punctuation or Unicode form. A store that answers the second text with
``deduplicated: true`` has merged it: for a distinct pair that loses what the user said,
for a repeat it is what a client retry needs. ``near_duplicates`` reports are counted
too (a distinct pair reported there is kept, and shown to the agent).

Run with the built-in lexical embedder and the local MiniLM model (``--embedders``);
to compare code versions side by side, run the same script with another checkout first
on ``PYTHONPATH`` (the SQLite reference backend keeps plugins out of the comparison)::

    uv run python bench/dedup_pairs.py
    PYTHONPATH=/tmp/old uv run python bench/dedup_pairs.py --label old

Results: a table on stdout, JSON in bench/results/dedup_pairs-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    configure_logging,
    machine,
    model_dir,
    plugin_manager,
    table,
    write_results,
)

#: (kind, first, second): two facts that differ in one detail.
DISTINCT = [
    ("letter", "We chose option A for the launch", "We chose option B for the launch"),
    ("letter", "take vitamin D daily", "take vitamin C daily"),
    ("letter", "the meeting moved to building A", "the meeting moved to building B"),
    ("letter", "Maya got an A in chemistry", "Maya got a B in chemistry"),
    ("letter", "Our seats are in row F", "Our seats are in row G"),
    ("number", "The standup is at 9 am", "The standup is at 10 am"),
    ("number", "The project deadline is March 5", "The project deadline is March 12"),
    ("number", "My hotel room is 412", "My hotel room is 421"),
    ("number", "The price is 3.5 euros", "The price is 35 euros"),
    ("number", "The freezer is set to -18 degrees", "The freezer is set to 18 degrees"),
    ("number", "Dana's flight leaves from gate 14", "Dana's flight leaves from gate 41"),
    ("number", "We need 2 GB of memory for the job", "We need 20 GB of memory for the job"),
    ("name", "Alice paid Bob 20 euros", "Bob paid Alice 20 euros"),
    ("name", "Priya's favourite editor is Vim", "Priya's favourite editor is Emacs"),
    ("name", "The backend is written in Python", "The backend is written in Rust"),
    ("name", "Tom moved to Paris last year", "Tom moved to Berlin last year"),
    ("name", "The launch party is on Monday", "The launch party is on Tuesday"),
    ("name", "Sara's birthday is in March", "Sara's birthday is in May"),
    ("name", "Carlos reports to Helen", "Carlos reports to Maria"),
    ("name", "We deploy with Kubernetes", "We deploy with Nomad"),
    ("word", "The cabin faces north", "The cabin faces south"),
    ("word", "The backup runs at midnight", "The backup runs at noon"),
    ("word", "Turn left after the bakery", "Turn right after the bakery"),
    ("word", "The office is open on Saturdays", "The office is closed on Saturdays"),
    ("word", "Sales increased in the third quarter", "Sales decreased in the third quarter"),
    ("word", "Jamie prefers hot tea", "Jamie prefers cold tea"),
    ("word", "The train arrived early", "The train arrived late"),
    ("word", "Call the plumber before lunch", "Call the plumber after lunch"),
    ("word", "The car is red", "The car is blue"),
    ("word", "Leo is allergic to peanuts", "Leo is allergic to shellfish"),
    ("word", "The cat sleeps upstairs", "The cat sleeps downstairs"),
    ("word", "Use the small box for the gift", "Use the large box for the gift"),
    ("word", "The dog eats twice a day", "The dog eats three times a day"),
    ("word", "I usually cycle to work", "I usually drive to work"),
    ("word", "The plant needs full sun", "The plant needs full shade"),
    ("negation", "I like strong coffee", "I don't like strong coffee"),
    ("negation", "Ravi eats meat", "Ravi never eats meat"),
    ("negation", "The invoice was paid", "The invoice was not paid"),
    ("negation", "The tests pass on Windows", "The tests do not pass on Windows"),
    ("unit", "The parcel weighs 5 kg", "The parcel weighs 5 lb"),
    ("unit", "The run was 10 km", "The run was 10 miles"),
    ("order", "The cat chased the dog", "The dog chased the cat"),
    ("order", "Ana called Ben after the meeting", "Ben called Ana after the meeting"),
    ("symbol", "The fee is $40", "The fee is €40"),
    ("symbol", "Set the flag to true", "Set the flag to false"),
]

#: (kind, first, second): the same text again in another form.
REPEATS = [
    ("case", "We moved the retro to Thursday", "we moved the retro to thursday"),
    ("case", "Dana likes jazz", "DANA LIKES JAZZ"),
    (
        "space",
        "The wifi password hint is the dog's name",
        "The  wifi password hint is the dog's name ",
    ),
    ("space", "Pick up the dry cleaning on Friday", "Pick up the dry cleaning\non Friday"),
    ("space", "\tBring the charger to the offsite", "Bring the charger to the offsite"),
    ("punctuation", "The garden needs watering", "The garden needs watering."),
    ("punctuation", "Remember to renew the passport", "Remember to renew the passport!"),
    ("punctuation", "Call mum, she is waiting", "Call mum she is waiting"),
    ("punctuation", "Book the venue; confirm the caterer", "Book the venue, confirm the caterer"),
    ("punctuation", "Send the e-mail to Omar", "Send the e mail to Omar"),
    ("punctuation", "Order (two) new chairs", "Order two new chairs"),
    ("punctuation", '"Ship it" is the team motto', "Ship it is the team motto"),
    ("unicode", "The cafe opens at 8", "The cafe opens at 8"),
    ("unicode", "Kim's favourite fruit is mango", "Kim\u2019s favourite fruit is mango"),
    ("unicode", "Meet at the station at 6", "Meet at the station\u00a0at 6"),
    ("unicode", "Return the library books", "Return the \uff4cibrary books"),
    ("unicode", "Water the ferns weekly", "Water the\u200b ferns weekly"),
    ("mixed", "Ask Lena about the budget", "  ask lena about the BUDGET!! "),
    ("mixed", "The spare key is under the mat", "the spare key is under the mat..."),
    ("mixed", "Lunch with Rosa on Friday", "LUNCH with Rosa, on Friday."),
]


def run(embedder: str, model: Path | None) -> dict[str, Any]:
    """Store every case into one fresh store; what happened to each second text."""
    from smriti.config import Settings
    from smriti.engine import Engine

    env = {
        "ACCESSING_USER": "bench",
        "STORAGE_LOCATION": tempfile.mkdtemp(prefix="smriti-dedup-"),
        "DB_TYPE": "sqlite",
        "SMRITI_EMBEDDER": embedder,
        "SMRITI_CUE_EXTRACTOR": "heuristic",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_TYPE": "none",
        "SMRITI_OWNER": "off",
    }
    if model is not None:
        env["SMRITI_LOCAL_MODEL"] = str(model)
    cases: list[dict[str, Any]] = []
    with Engine.from_settings(Settings.from_env(env), pm=plugin_manager()) as engine:
        if embedder == "local":
            engine.embed(["warm up"])  # the model loads in the background
        for group, rows in (("distinct", DISTINCT), ("repeat", REPEATS)):
            for kind, first, second in rows:
                one = engine.store(first)
                two = engine.store(second)
                near = [e.id for e, _ in getattr(two, "near_duplicates", [])]
                cases.append(
                    {
                        "group": group,
                        "kind": kind,
                        "first": first,
                        "second": second,
                        "merged": bool(two.deduplicated and two.engram.id == one.engram.id),
                        "reported_near": one.engram.id in near,
                    }
                )
        used = engine.embedder.model_id
    return {"embedder": used, "cases": cases}


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """Counts per group."""
    cases = result["cases"]
    distinct = [c for c in cases if c["group"] == "distinct"]
    repeats = [c for c in cases if c["group"] == "repeat"]
    return {
        "embedder": result["embedder"],
        "distinct_pairs": len(distinct),
        "distinct_merged": sum(c["merged"] for c in distinct),
        "distinct_reported_near": sum(c["reported_near"] for c in distinct),
        "repeats": len(repeats),
        "repeats_merged": sum(c["merged"] for c in repeats),
        "merged_distinct": [f"{c['first']} / {c['second']}" for c in distinct if c["merged"]],
        "missed_repeats": [f"{c['first']} / {c['second']}" for c in repeats if not c["merged"]],
    }


def main() -> None:
    """Run every embedder asked for; print a table and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedders", default="lexical,local", help="comma-separated")
    parser.add_argument("--model-dir", default=None, help="the local MiniLM directory")
    parser.add_argument("--label", default="", help="a name for this code version")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    configure_logging("warning")
    rows, summaries = [], []
    for embedder in [e.strip() for e in args.embedders.split(",") if e.strip()]:
        model = model_dir(args.model_dir) if embedder == "local" else None
        s = summary(run(embedder, model))
        summaries.append(s)
        rows.append(
            (
                args.label or "this",
                s["embedder"],
                f"{s['distinct_merged']}/{s['distinct_pairs']}",
                f"{s['distinct_reported_near']}/{s['distinct_pairs']}",
                f"{s['repeats_merged']}/{s['repeats']}",
            )
        )
    print(
        table(("code", "embedder", "distinct merged", "distinct reported", "repeats merged"), rows)
    )
    for s in summaries:
        for text in s["merged_distinct"]:
            print(f"{s['embedder']}: merged distinct pair: {text}")
        for text in s["missed_repeats"]:
            print(f"{s['embedder']}: repeat stored twice: {text}")
    payload = {"machine": machine(), "label": args.label, "summaries": summaries}
    print(f"results: {write_results('dedup_pairs', payload, args.out)}")


if __name__ == "__main__":
    main()
