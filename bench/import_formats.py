"""Import rate from other memory tools: ``smriti import --from FORMAT`` on 10,000 records.

For each format (claude-code, basic-memory, mem0, mcp-memory-service, mcp-memory,
markdown), a file (or, for basic-memory and markdown, a folder) of ``--records`` records
is written in that tool's own format from the synthetic corpus (``corpus.py``), then
imported by the real console script into a fresh store, twice: **first s** /
**records/s** is the first import (read, store through the normal store path, link),
**re-run s** the second, which must add nothing.
The embedder is the built-in lexical one (no model is downloaded; ``HF_HUB_OFFLINE``),
so the figures measure the importer and the store, not a neural embedder.

    uv run python bench/import_formats.py
    uv run python bench/import_formats.py --records 1000 --formats mem0,claude-code

Results: a table on stdout, JSON in bench/results/import_formats-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402
from common import configure_logging, machine, table, write_results  # noqa: E402

START = datetime(2025, 1, 1, tzinfo=UTC)


def _when(i: int) -> datetime:
    return START + timedelta(minutes=7 * i)


def claude_code(items: list[corpus.Memory], where: Path) -> Path:
    """One transcript: each memory a user turn, each answered by an assistant turn."""
    path = where / "session.jsonl"
    session = "5f0c1d2e-8a4b-4c6d-9e1f-2a3b4c5d6e7f"
    with path.open("w", encoding="utf-8") as out:
        parent = None
        for i, item in enumerate(items):
            for kind, text in (("user", item.text), ("assistant", "Noted.")):
                uuid = f"{kind[0]}{i}"
                message: dict[str, Any] = {"role": kind, "content": text}
                if kind == "assistant":
                    message["content"] = [{"type": "text", "text": text}]
                entry = {
                    "parentUuid": parent, "isSidechain": False, "userType": "external",
                    "sessionId": session, "version": "2.1.12", "type": kind,
                    "message": message, "uuid": uuid,
                    "timestamp": _when(i).isoformat().replace("+00:00", "Z"),
                }  # fmt: skip
                out.write(json.dumps(entry) + "\n")
                parent = uuid
    return path


def basic_memory(items: list[corpus.Memory], where: Path) -> Path:
    """One note per person, each memory an observation of it, related to the next note."""
    folder = where / "project"
    folder.mkdir()
    people: dict[str, list[corpus.Memory]] = {}
    for item in items:
        people.setdefault(item.person, []).append(item)
    names = sorted(people)
    for n, name in enumerate(names):
        lines = [
            "---", f"title: {name}", "type: person", f"created: {_when(n).isoformat()}", "---",
            "", f"# {name}", "", "## Observations",
            *(f"- [{m.topic}] {m.text} #{m.topic}" for m in people[name]),
            "", "## Relations", f"- knows [[{names[(n + 1) % len(names)]}]]", "",
        ]  # fmt: skip
        (folder / f"{name.replace(' ', '-').lower()}.md").write_text("\n".join(lines))
    return folder


def mem0(items: list[corpus.Memory], where: Path) -> Path:
    """``Memory.get_all()`` output."""
    rows = [
        {
            "id": f"00000000-0000-4000-8000-{i:012d}",
            "memory": m.text,
            "hash": f"{i:032x}",
            "metadata": {"category": m.topic},
            "created_at": _when(i).isoformat(),
            "updated_at": None,
            "user_id": "alex",
        }  # fmt: skip
        for i, m in enumerate(items)
    ]
    path = where / "mem0.json"
    path.write_text(json.dumps({"results": rows}))
    return path


def mcp_memory_service(items: list[corpus.Memory], where: Path) -> Path:
    """Its sync exporter's JSON."""
    rows = [
        {
            "content": m.text,
            "content_hash": f"{i:064x}",
            "tags": [m.topic],
            "memory_type": "note",
            "metadata": {},
            "created_at": _when(i).timestamp(),
            "created_at_iso": _when(i).isoformat(),
        }  # fmt: skip
        for i, m in enumerate(items)
    ]
    meta = {"source_machine": "bench", "total_memories": len(rows), "exporter_version": "4.5.0"}
    path = where / "mms.json"
    path.write_text(json.dumps({"export_metadata": meta, "memories": rows}))
    return path


def mcp_memory(items: list[corpus.Memory], where: Path) -> Path:
    """The reference memory server's memory.jsonl: one entity per person with their
    memories as observations, each person related to the next."""
    people: dict[str, list[str]] = {}
    for item in items:
        people.setdefault(item.person.replace(" ", "_"), []).append(item.text)
    names = sorted(people)
    path = where / "memory.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for name in names:
            entity = {"type": "entity", "name": name, "entityType": "person",
                      "observations": people[name]}  # fmt: skip
            out.write(json.dumps(entity) + "\n")
        for n, name in enumerate(names):
            relation = {"type": "relation", "from": name, "to": names[(n + 1) % len(names)],
                        "relationType": "knows"}  # fmt: skip
            out.write(json.dumps(relation) + "\n")
    return path


def markdown(items: list[corpus.Memory], where: Path) -> Path:
    """A folder of notes, one file per topic, each memory a paragraph under a heading."""
    folder = where / "notes"
    folder.mkdir()
    topics: dict[str, list[str]] = {}
    for item in items:
        topics.setdefault(item.topic, []).append(item.text)
    for topic, texts in topics.items():
        body = "\n\n".join(texts)
        (folder / f"{topic}.md").write_text(f"# {topic}\n\n{body}\n", encoding="utf-8")
    return folder


WRITERS: dict[str, Callable[[list[corpus.Memory], Path], Path]] = {
    "claude-code": claude_code,
    "basic-memory": basic_memory,
    "mem0": mem0,
    "mcp-memory-service": mcp_memory_service,
    "mcp-memory": mcp_memory,
    "markdown": markdown,
}


def _run(env: dict[str, str], fmt: str, path: Path) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "smriti", "import", "--from", fmt, str(path), "--json"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"smriti import --from {fmt} failed:\n{done.stderr}")
    return json.loads(done.stdout), seconds


def measure(fmt: str, items: list[corpus.Memory]) -> dict[str, Any]:
    """Write ``items`` in ``fmt``, import them twice into a fresh store, time both."""
    with tempfile.TemporaryDirectory(prefix=f"smriti-import-{fmt}-") as tmp:
        where = Path(tmp)
        path = WRITERS[fmt](items, where)
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(
            STORAGE_LOCATION=str(where / "store"), ACCESSING_USER="bench",
            HOME=str(where / "home"), BACKUP_TYPE="none", HF_HUB_OFFLINE="1",
        )  # fmt: skip
        first, first_s = _run(env, fmt, path)
        again, again_s = _run(env, fmt, path)
        # The owner process outlives the commands (and writes its working-set snapshot
        # when it stops): stop it before its directory is removed.
        stop = [sys.executable, "-m", "smriti", "owner", "stop"]
        subprocess.run(stop, env=env, capture_output=True, check=False)
    return {
        "format": fmt, "records": first["records"], "stored": first["stored"],
        "merged": first["merged"], "rejected": first["rejected_count"],
        "associations": first["associations"], "first_s": first_s,
        "records_per_s": first["records"] / first_s, "rerun_s": again_s,
        "rerun_stored": again["stored"],
    }  # fmt: skip


def main() -> None:
    """Parse the options, run every format, print the table and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--formats", default=",".join(WRITERS))
    args = parser.parse_args()
    configure_logging()
    items = corpus.memories(args.records)
    rows = [measure(fmt, items) for fmt in args.formats.split(",")]
    print(
        table(
            [
                "format",
                "records",
                "stored",
                "merged",
                "links",
                "first s",
                "records/s",
                "re-run s",
                "re-run stored",
            ],
            [
                [
                    r["format"],
                    r["records"],
                    r["stored"],
                    r["merged"],
                    r["associations"],
                    f"{r['first_s']:.1f}",
                    f"{r['records_per_s']:.0f}",
                    f"{r['rerun_s']:.1f}",
                    r["rerun_stored"],
                ]
                for r in rows
            ],
        )  # fmt: skip
    )
    out = write_results("import_formats", {"machine": machine(), "rows": rows})
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
