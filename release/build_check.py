"""Build every distribution, check it, install the wheels into a clean environment and
smoke-test the installed server over MCP stdio: the release workflow's steps before
publishing, runnable here (tests/test_release_build.py runs it on every change).

    python release/build_check.py [--dist DIR] [--python 3.12] [--offline] [--report FILE]

Steps, each failing the run with the step named:

1. ``uv build --all-packages`` into ``--dist`` (emptied first): a wheel and an sdist for
   every distribution of the workspace, all with the root pyproject's version.
2. ``twine check --strict``: metadata and the long description (the README) render.
3. Metadata: every wheel's version, its ``Requires-Dist`` pins on other Smriti
   distributions (``>=VERSION,<NEXT``) and its license file; smriti-server's description
   carries the MCP Registry's ``mcp-name:`` marker of server.json.
4. A new virtual environment with only ``smriti-server`` installed from the built
   wheels (every Smriti distribution is taken from ``--dist``, never from an index;
   third-party ones from the index or, with ``--offline``, uv's cache).
5. ``smriti --version`` and release/smoke.py against the installed ``smriti``.

Needs ``uv`` and ``twine`` on PATH (``uv run`` in this workspace provides both).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from email.parser import Parser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from set_version import PIN, ROOT, pyprojects, source_version, upper_bound  # noqa: E402


class CheckFailed(Exception):
    """A release check failed; the message says which and why."""


def run(step: str, argv: list[str], **kwargs: object) -> str:
    """Run ``argv``; a non-zero exit fails ``step`` with the command's output."""
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise CheckFailed(
            f"{step}: `{' '.join(argv)}` exited {done.returncode}\n"
            f"{done.stdout[-4000:]}{done.stderr[-4000:]}"
        )
    return done.stdout + done.stderr


def build(dist: Path) -> list[Path]:
    """Step 1: a wheel and an sdist per distribution, with the source version."""
    shutil.rmtree(dist, ignore_errors=True)
    run("build", ["uv", "build", "--all-packages", "--out-dir", str(dist)], cwd=ROOT)
    names = {_normal(_project(p)["name"]) for p in pyprojects()}
    wheels = sorted(dist.glob("*.whl"))
    built = {w.name.split("-")[0] for w in wheels}
    sdists = {s.name.rsplit("-", 1)[0] for s in dist.glob("*.tar.gz")}
    if built != names or sdists != names:
        raise CheckFailed(
            f"build: expected wheels and sdists of {sorted(names)}, "
            f"got wheels {sorted(built)} and sdists {sorted(sdists)}"
        )
    return wheels


def twine_check(dist: Path) -> str:
    """Step 2: ``twine check --strict`` on every file (metadata, README rendering)."""
    files = sorted(str(p) for p in dist.iterdir() if p.suffix in (".whl", ".gz"))
    return run("twine check", ["twine", "check", "--strict", *files])


def check_metadata(wheels: list[Path], version: str) -> None:
    """Step 3: version, Smriti pins and license file of each wheel's METADATA."""
    upper = upper_bound(version)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            meta = Parser().parsestr(zf.read(meta_name).decode())
            licenses = [n for n in zf.namelist() if "/licenses/" in n]
        if meta["Version"] != version:
            raise CheckFailed(f"metadata: {wheel.name} has version {meta['Version']}")
        for requirement in meta.get_all("Requires-Dist") or []:
            for name, _extras, low, high in PIN.findall(f'"{requirement}'):
                if (low, high) != (version, upper):
                    raise CheckFailed(f"metadata: {wheel.name} requires {name}>={low},<{high}")
        if not licenses or not meta.get("License-Expression"):
            raise CheckFailed(f"metadata: {wheel.name} lacks its license file or expression")


def check_registry_marker(wheels: list[Path]) -> str:
    """The MCP Registry's ownership proof: smriti-server's PyPI description (its README)
    carries ``mcp-name: <name of server.json>``."""
    name = json.loads((ROOT / "server.json").read_text())["name"]
    wheel = next(w for w in wheels if w.name.startswith("smriti_server-"))
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        description = Parser().parsestr(zf.read(meta_name).decode()).get_payload()
    if f"mcp-name: {name} " not in description and f"mcp-name: {name}\n" not in description:
        raise CheckFailed(f"registry: {wheel.name}'s description lacks `mcp-name: {name}`")
    return name


def install(dist: Path, venv: Path, python: str, offline: bool) -> Path:
    """Step 4: ``smriti-server`` into a new venv, every Smriti distribution from ``dist``."""
    run("venv", ["uv", "venv", "--python", python, str(venv)])
    # Overrides pin every Smriti distribution to its built wheel, so a same-named
    # package on an index can never stand in for it.
    overrides = venv / "smriti-wheels.txt"
    overrides.write_text(
        "".join(
            f"{w.name.split('-')[0].replace('_', '-')} @ {w.as_uri()}\n"
            for w in sorted(dist.glob("*.whl"))
        )
    )
    python_bin = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    argv = [
        "uv",
        "pip",
        "install",
        "--python",
        str(python_bin),
        "--find-links",
        str(dist),
        "--override",
        str(overrides),
        "smriti-server",
    ]
    run("install", argv + (["--offline"] if offline else []), cwd=venv)
    return python_bin


def smoke(python_bin: Path, version: str) -> dict[str, object]:
    """Step 5: the installed command's version, then an MCP stdio session with it."""
    smriti = python_bin.parent / ("smriti.exe" if sys.platform == "win32" else "smriti")
    printed = run("version", [str(smriti), "--version"]).strip()
    if printed != f"smriti {version}":
        raise CheckFailed(f"version: `smriti --version` printed {printed!r}")
    out = run("smoke", [str(python_bin), str(ROOT / "release/smoke.py"), str(smriti)])
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Command line; prints each step and a JSON report of sizes and timings."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="output (emptied)")
    parser.add_argument("--python", default="3.12", help="Python of the clean environment")
    parser.add_argument("--offline", action="store_true", help="third-party wheels from cache")
    parser.add_argument("--report", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)
    try:
        report = check_all(args.dist.resolve(), args.python, args.offline)
    except CheckFailed as exc:
        print(f"build_check: FAILED at {exc}", file=sys.stderr)
        return 1
    text = json.dumps(report, indent=2)
    print(text)
    if args.report:
        args.report.write_text(text + "\n")
    return 0


def check_all(dist: Path, python: str, offline: bool) -> dict[str, object]:
    """Every step in order; returns the figures of the run."""
    version, started = source_version(), time.monotonic()
    wheels = build(dist)
    print(f"built {len(wheels)} wheels and sdists of version {version} into {dist}")
    print(twine_check(dist).strip())
    check_metadata(wheels, version)
    print("metadata: versions, Smriti pins and license files agree")
    print(f"registry: smriti-server's description names {check_registry_marker(wheels)}")
    with tempfile.TemporaryDirectory(prefix="smriti-release-") as tmp:
        venv = Path(tmp) / "venv"
        python_bin = install(dist, venv, python, offline)
        seen = smoke(python_bin, version)
        venv_bytes = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file())
    print(f"smoke: {seen}")
    return {
        "version": version,
        "wheels": {w.name: w.stat().st_size for w in wheels},
        "wheel_set_bytes": sum(w.stat().st_size for w in wheels),
        "sdist_set_bytes": sum(s.stat().st_size for s in dist.glob("*.tar.gz")),
        "installed_env_bytes": venv_bytes,
        "smoke": seen,
        "seconds": round(time.monotonic() - started, 1),
    }


def _project(path: Path) -> dict[str, object]:
    import tomllib

    return tomllib.loads(path.read_text())["project"]


def _normal(name: object) -> str:
    return str(name).replace("-", "_")


if __name__ == "__main__":
    raise SystemExit(main())
