"""Make ``wheelhouse/``, what the Dockerfile installs from: the wheels built from this
repository plus every dependency of ``smriti-server[EXTRAS]`` as wheels for the image's
platform (Linux, CPython 3.13 by default), so that ``docker build`` needs no index.

    python release/wheelhouse.py [--out wheelhouse] [--arch x86_64|aarch64]
                                 [--python-version 3.13] [--extras neo4j,falkor,s3]

Dependencies come from the package index through ``pip download`` (this Python's pip,
or ``uvx pip`` when it has none), given ``--platform`` tags, so any host can make a Linux
wheelhouse. Needs ``uv`` for the build.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: glibc baselines a Debian trixie image (glibc 2.41) can load, newest first.
MANYLINUX = ("2_39", "2_35", "2_34", "2_31", "2_28", "2_27", "2_24", "2_17")


def build(out: Path) -> None:
    """This repository's wheels, into a new ``out``."""
    shutil.rmtree(out, ignore_errors=True)
    argv = ["uv", "build", "--all-packages", "--wheel", "--out-dir", str(out)]
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)


def download(out: Path, arch: str, python_version: str, extras: str) -> None:
    """Every dependency as a binary wheel for the target; Smriti's own from ``out``."""
    platforms = [arg for tag in MANYLINUX for arg in ("--platform", f"manylinux_{tag}_{arch}")]
    pip = [sys.executable, "-m", "pip"] if importlib.util.find_spec("pip") else ["uvx", "pip"]
    argv = [
        *pip,
        "download",
        "--quiet",
        "--dest",
        str(out),
        "--find-links",
        str(out),
        "--only-binary",
        ":all:",
        "--implementation",
        "cp",
        "--python-version",
        python_version,
        *platforms,
        f"smriti-server[{extras}]",
    ]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"wheelhouse: pip download failed:\n{done.stdout}{done.stderr}")


def main(argv: list[str] | None = None) -> int:
    """Command line; prints the wheelhouse's size."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "wheelhouse")
    parser.add_argument("--arch", default="x86_64", choices=("x86_64", "aarch64"))
    parser.add_argument("--python-version", default="3.13")
    parser.add_argument("--extras", default="neo4j,falkor,s3", help="as the Dockerfile's EXTRAS")
    args = parser.parse_args(argv)
    build(args.out)
    download(args.out, args.arch, args.python_version, args.extras)
    wheels = list(args.out.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels)
    print(f"wheelhouse: {len(wheels)} wheels, {size / 1e6:.1f} MB in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
