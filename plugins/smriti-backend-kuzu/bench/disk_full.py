"""Fill a small disk through the real ``smriti`` server; count acknowledged memories lost.

Each run mounts a fresh tmpfs (root only), starts ``smriti`` over stdio (no API keys),
stores memories until a store fails, optionally fills what is left with another file
(``--filler``), checks that recall still answers, stops the server, opens the store
once more while the disk is still full (``smriti stats``), then gives the space back
(the filler goes, the tmpfs is remounted at 64 MB) and exports the store: every
acknowledged memory must be in the export. Prints one JSON line per run.

    sudo python plugins/smriti-backend-kuzu/bench/disk_full.py --runs 3 [--size-mb 20] [--filler]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

SMRITI = shutil.which("smriti", path=str(Path(sys.executable).parent)) or "smriti"
SIGNALLED = range(129, 160)


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        STORAGE_LOCATION=str(root / "store"),
        ACCESSING_USER="bench",
        HOME=str(root.parent / "home"),
        CONSOLIDATION_INTERVAL="0",
        BACKUP_SYNC_INTERVAL="0",
        BACKUP_TYPE="none",
        HF_HUB_OFFLINE="1",  # no model download: it would fill the small disk
    )
    return env


def _fill(root: Path) -> None:
    with (root / "filler").open("ab", buffering=0) as out:
        for size in (2**16, 2**12, 1):  # down to the last byte
            try:
                while out.write(b"\0" * size):
                    pass
            except OSError:
                pass


async def _serve(root: Path, filler: bool, log: Path) -> dict[str, Any]:
    rc_file = root.parent / "server.rc"
    script = f"{shlex.quote(SMRITI)}; echo $? > {shlex.quote(str(rc_file))}"
    params = StdioServerParameters(command="/bin/sh", args=["-c", script], env=_env(root))
    acknowledged: list[str] = []
    refusal, recall_ok = "", False
    with log.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            for i in range(100_000):
                content = f"memory {i}: probe at depth {i * 7} m read {i * 13 % 97} units. " * 20
                got = await client.call_tool("smriti_store", {"content": content})
                if got.is_error:
                    refusal = " ".join(getattr(c, "text", "") for c in got.content)
                    break
                acknowledged.append(got.structured_content["id"])
            if filler:
                _fill(root)
            recalled = await client.call_tool("smriti_recall", {"query": "probe depth"})
            recall_ok = not recalled.is_error and bool(recalled.structured_content["results"])
    for _ in range(300):
        if rc_file.exists() and rc_file.read_text().strip():
            break
        await asyncio.sleep(0.1)
    return {
        "acknowledged": acknowledged,
        "refusal": refusal[:160],
        "recall_ok": recall_ok,
        "server_rc": int(rc_file.read_text()),
    }


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SMRITI, *args], env=_env(root), capture_output=True, text=True, timeout=300
    )


def run(size_mb: int, filler: bool) -> dict[str, Any]:
    """One run on a fresh tmpfs of ``size_mb``; returns what was seen."""
    with tempfile.TemporaryDirectory(prefix="smriti-disk-full-") as tmp:
        root = Path(tmp) / "disk"
        root.mkdir()
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(root)], check=True
        )
        try:
            seen = asyncio.run(_serve(root, filler, Path(tmp) / "server.log"))
            while_full = _cli(root, "stats")
            (root / "filler").unlink(missing_ok=True)
            subprocess.run(["mount", "-o", "remount,size=64m", str(root)], check=True)
            export = Path(tmp) / "export.jsonl"
            done = _cli(root, "export", str(export))
            lines = export.read_text().splitlines() if done.returncode == 0 else []
            ids = {r["id"] for r in map(json.loads, lines) if r.get("kind") == "engram"}
            stored = _cli(root, "store", "after the disk was freed")
            log = (Path(tmp) / "server.log").read_text()
        finally:
            subprocess.run(["umount", "-l", str(root)], check=False)
    acknowledged = seen.pop("acknowledged")
    return {
        **seen,
        "stored": len(acknowledged),
        "lost": len(set(acknowledged) - ids),
        "aborted": seen["server_rc"] in SIGNALLED
        or while_full.returncode in SIGNALLED
        or "terminate called" in log + while_full.stderr,
        "while_full_rc": while_full.returncode,
        "while_full": (while_full.stderr.strip().splitlines() or [""])[-1][:160],
        "export_rc": done.returncode,
        "store_after_rc": stored.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size-mb", type=int, default=20)
    parser.add_argument("--filler", action="store_true", help="then fill the rest")
    args = parser.parse_args()
    for _ in range(args.runs):
        print(json.dumps(run(args.size_mb, args.filler)), flush=True)


if __name__ == "__main__":
    main()
