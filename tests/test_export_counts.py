"""An export's header counts exactly the records it holds, kind by kind (issue 36: a
header once counted one co-occurrence more than the rows written).

The store is made as a user makes one: memories stored by an MCP client over stdio
through the store's owner process (whose write-behind queue may still hold some when
the export starts), some forgotten, then exported by the ``smriti`` command."""

from __future__ import annotations

import json
import random
import subprocess
from collections import Counter
from pathlib import Path

from smriti.testing.owner_load import load_env, smriti_command

PEOPLE = ["Priya", "Tomasz", "Amara", "Chen Wei", "Lucía", "Oskar", "Fatima", "Kenji"]
TOPICS = [
    "the Berlin offsite",
    "the Kubernetes migration",
    "vitamin D",
    "the quarterly budget",
    "the dentist appointment",
    "the Python 3.12 upgrade",
    "the hiking trip to Snowdon",
    "the launch of option B",
    "the new espresso machine",
    "Leiden clustering",
]
VERBS = ["decided on", "asked about", "postponed", "finished", "worries about", "likes"]
KIND_OF = {
    "engram": "engrams",
    "cue": "cues",
    "link": "links",
    "association": "associations",
    "cooccurrence": "cooccurrences",
}


def _memories(count: int) -> list[str]:
    rnd = random.Random(36)
    return [
        f"{rnd.choice(PEOPLE)} {rnd.choice(VERBS)} {rnd.choice(TOPICS)} and mentioned "
        f"{rnd.choice(TOPICS)} on day {day} of the project"
        for day in range(count)
    ]


def _stdio_session(env: dict[str, str], calls: list[tuple[str, dict]]) -> list[dict]:
    """Run tool calls over stdio on a real ``smriti``; their results in order."""
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "export-test", "version": "0"},
    }
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    for n, (tool, arguments) in enumerate(calls, start=1):
        params = {"name": tool, "arguments": arguments}
        lines.append({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params})
    proc = subprocess.run(
        [smriti_command()],
        input="".join(json.dumps(m) + "\n" for m in lines).encode(),
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    answers = {m["id"]: m for m in map(json.loads, proc.stdout.decode().splitlines())}
    results = [answers[n]["result"] for n in range(1, len(calls) + 1)]
    errors = [r["content"][0]["text"] for r in results if r.get("isError")]
    assert not errors, errors[:3]
    return [r["structuredContent"] for r in results]


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([smriti_command(), *args], env=env, capture_output=True, timeout=300)


def test_the_header_counts_every_kind_as_written(tmp_path: Path) -> None:
    env = load_env(tmp_path / "store", "exporter", SMRITI_OWNER_IDLE="60")
    try:
        texts = _memories(60)
        stored = _stdio_session(env, [("smriti_store", {"content": t}) for t in texts])
        for doomed in stored[:6]:
            forgot = _cli(env, "forget", doomed["id"])
            assert forgot.returncode == 0, forgot.stderr
        more = [("smriti_store", {"content": f"Late note {n}: {t}"}) for n, t in enumerate(texts)]
        _stdio_session(env, more[:20])  # the export follows these at once
        out = tmp_path / "memories.jsonl"
        done = _cli(env, "export", str(out))
        assert done.returncode == 0, done.stderr
    finally:
        _cli(env, "owner", "stop")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    header, trailer = records[0], records[-1]
    written = Counter(KIND_OF[r["kind"]] for r in records if r["kind"] in KIND_OF)
    assert written["engrams"] == 74 and written["cooccurrences"] > 100  # a realistic store
    assert header["counts"] == dict(written), (header["counts"], written)
    assert trailer["counts"] == dict(written)
    assert trailer["tombstones"] == sum(r["kind"] == "tombstone" for r in records) == 6
