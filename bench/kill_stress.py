"""Kill a storing process at random moments; check the store opens with every memory.

Each round starts a child process that opens a Kùzu store through the engine and
stores memories in a loop (printing each id once ``store`` has returned), with a recall
every 25 stores and a consolidation every 40 unless told otherwise, and kills it with
SIGKILL after a random 1-6 s. A second process then opens the store and lists its
engram ids: every id the child reported must be there. Prints one line per round and
writes JSON; exits 1 when a check fails.

    uv run python bench/kill_stress.py --rounds 6
    uv run python bench/kill_stress.py --rounds 6 --no-consolidation --no-recall

Before commit ``b31f89d`` this failed within a few kills: Kùzu 0.11.3 could not
replay its write-ahead log ("Found duplicated primary key value ...", or a segfault);
see the Kùzu plugin's README, "Known defects".
"""

from __future__ import annotations

import argparse
import json
import random
import selectors
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from common import write_results

CHILD = """
import sys
sys.path.insert(0, {bench!r})
from common import plugin_manager
from smriti.config import Settings
from smriti.engine.core import Engine
env = {{"ACCESSING_USER": "ks", "STORAGE_LOCATION": {root!r}, "DB_TYPE": "kuzu",
       "SMRITI_EMBEDDER": "lexical", "SMRITI_CUE_EXTRACTOR": "heuristic",
       "CONSOLIDATION_INTERVAL": "0", "BACKUP_TYPE": "none"}}
engine = Engine.from_settings(Settings.from_env(env), plugin_manager()).open()
print("open", engine.backend.count_engrams(), flush=True)
for i in range(100_000):
    text = f"round {round} memory {{i}} about apples pears topic{{i % 7}} item{{i % 13}}"
    print("stored", engine.store(text, tags=["r{round}"]).engram.id, flush=True)
    if {recall} and i % 25 == 24:
        engine.recall(f"apples topic{{i % 7}}", limit=5)
    if {consolidate} and i % 40 == 39:
        engine.consolidate()
"""

CHECK = """
import json
from smriti_backend_kuzu.backend import KuzuBackend
backend = KuzuBackend("ks", {path!r})
backend.open()
print(json.dumps(sorted(r[0] for r in backend.journal.query("MATCH (e:Engram) RETURN e.id"))))
backend.close()
"""


def run_child(code: str, seconds: float) -> list[str]:
    """Run ``code``, kill it after ``seconds``; its stdout lines."""
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert child.stdout is not None
    lines: list[str] = []
    with selectors.DefaultSelector() as sel:
        sel.register(child.stdout, selectors.EVENT_READ)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if sel.select(timeout=0.05):
                line = child.stdout.readline()
                if not line:
                    break
                lines.append(line)
    child.send_signal(signal.SIGKILL)
    lines += child.stdout.read().splitlines(keepends=True)
    child.wait()
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--no-recall", action="store_true")
    p.add_argument("--no-consolidation", action="store_true")
    args = p.parse_args()
    rng = random.Random(args.seed)
    bench = str(Path(__file__).resolve().parent)
    rounds: list[dict[str, object]] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="smriti-kill-") as root:
        path = str(Path(root) / "ks" / "memory.kuzu")
        reported: set[str] = set()
        for r in range(args.rounds):
            seconds = rng.uniform(1.0, 6.0)
            code = CHILD.format(
                bench=bench,
                root=root,
                round=r,
                recall=not args.no_recall,
                consolidate=not args.no_consolidation,
            )
            lines = run_child(textwrap.dedent(code), seconds)
            ids = [line.split()[1] for line in lines if line.startswith("stored ")]
            reported.update(ids)
            check = subprocess.run(
                [sys.executable, "-c", CHECK.format(path=path)], capture_output=True, text=True
            )
            row: dict[str, object] = {"round": r, "killed_after_s": round(seconds, 1)}
            row["stored"] = len(ids)
            if check.returncode != 0:
                tail = (check.stderr.strip().splitlines() or [""])[-1]
                row["open_failed"] = f"exit {check.returncode}: {tail}"
                failed = True
            else:
                have = set(json.loads(check.stdout.strip().splitlines()[-1]))
                row["in_store"] = len(have)
                row["missing"] = len(reported - have)
                failed |= bool(reported - have)
            rounds.append(row)
            print(json.dumps(row), flush=True)
            if "open_failed" in row:
                break
    out = write_results("kill_stress", {"args": vars(args), "rounds": rounds, "failed": failed})
    print(f"results: {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
