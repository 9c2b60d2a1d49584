"""Pack and validate the Claude Desktop extension (MCPB bundle) from ``mcpb/``.

    python release/pack_mcpb.py [--out smriti.mcpb] [--smoke-with DIST]

Uses the official CLI from npm, pinned (``npx -y @anthropic-ai/mcpb@VERSION``): it
validates ``manifest.json`` against the MCPB schema and packs the folder. With
``--smoke-with DIST`` (a folder of built wheels, release/build_check.py's output) it then
unpacks the bundle and starts it the way its manifest says, ``uv run --directory
BUNDLE server/main.py``, with smriti-server taken from DIST, and runs release/smoke.py
against it over MCP stdio. Needs Node (npx) and, for the smoke test, uv.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MCPB_CLI = "@anthropic-ai/mcpb@2.1.2"


def npx(*args: str, cwd: Path) -> str:
    """Run the pinned mcpb CLI; a failure exits with its output."""
    npx_bin = shutil.which("npx")
    if not npx_bin:
        raise SystemExit("pack_mcpb: npx (Node.js) is needed for the mcpb CLI")
    done = subprocess.run(
        [npx_bin, "-y", MCPB_CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise SystemExit(f"pack_mcpb: `mcpb {' '.join(args)}` failed:\n{done.stdout}{done.stderr}")
    return done.stdout + done.stderr


def pack(out: Path, work: Path) -> str:
    """Validate and pack a copy of mcpb/ (the CLI writes nothing into the repository)."""
    source = work / "bundle"
    shutil.copytree(
        ROOT / "mcpb", source, ignore=shutil.ignore_patterns("README.md", "__pycache__", ".venv")
    )
    log = npx("validate", "manifest.json", cwd=source)
    return log + npx("pack", str(source), str(out.resolve()), cwd=source)


def smoke(bundle: Path, dist: Path, work: Path) -> dict[str, object]:
    """Start the unpacked bundle as its manifest says and smoke-test it over stdio."""
    unpacked = work / "unpacked"
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(unpacked)
    config = json.loads((unpacked / "manifest.json").read_text())["server"]["mcp_config"]
    args = [a.replace("${__dirname}", str(unpacked)) for a in config["args"]]
    # The bundle's pyproject asks for smriti-server; until it is on PyPI, the built wheels.
    env = {**os.environ, "UV_FIND_LINKS": str(dist.resolve())}
    done = subprocess.run(
        [sys.executable, str(ROOT / "release/smoke.py"), config["command"], *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"pack_mcpb: the bundle's smoke test failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Command line; prints the CLI's output, the bundle's size and the smoke result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "smriti.mcpb")
    parser.add_argument("--smoke-with", type=Path, metavar="DIST", help="built wheels")
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="smriti-mcpb-") as tmp:
        print(pack(args.out, Path(tmp)).strip())
        print(f"bundle: {args.out} ({args.out.stat().st_size} bytes)")
        if args.smoke_with:
            print(f"smoke: {json.dumps(smoke(args.out, args.smoke_with, Path(tmp)))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
