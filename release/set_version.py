"""Set (or check) the one version of every Smriti distribution.

The root ``pyproject.toml`` (``smriti-core``) is the source. Every other distribution in
the workspace carries the same version, and so do ``server.json`` (the MCP Registry
entry) and ``mcpb/manifest.json`` (the Claude Desktop extension). Every pin of one
Smriti distribution on another is the compatible range ``>=VERSION,<NEXT`` (the next
minor while the major is 0, the next major afterwards): they are released together.

    python release/set_version.py 0.2.0     # rewrite every version line and pin
    python release/set_version.py --check   # exit 1 naming each line out of step

Only the standard library is used, so a maintainer can run it with any Python 3.12+.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION_LINE = re.compile(r'^version = "([^"]+)"$', re.MULTILINE)
#: A dependency string on another Smriti distribution: name, extras, lower, upper bound.
PIN = re.compile(r'"(smriti-[a-z0-9-]+)(\[[^\]]*\])?>=([^,"\s]+),<([^;"\s]+)')
RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
#: JSON artefacts that name the release: the MCP Registry entry and the MCPB manifest.
JSON_FILES = ("server.json", "mcpb/manifest.json")
JSON_VERSION = re.compile(r'"version": "([^"]+)"')


def pyprojects() -> list[Path]:
    """Every distribution's pyproject.toml: the root and each workspace member."""
    members = ["packages", "plugins", "examples"]
    found = [p for d in members for p in sorted((ROOT / d).glob("*/pyproject.toml"))]
    return [ROOT / "pyproject.toml", *found]


def release_tomls() -> list[Path]:
    """The distributions' pyproject.toml files and the extension's (mcpb/pyproject.toml,
    not a workspace member: Claude Desktop installs it)."""
    extension = ROOT / "mcpb/pyproject.toml"
    return [*pyprojects(), *([extension] if extension.exists() else [])]


def source_version() -> str:
    """The version of ``smriti-core`` in the root pyproject.toml: the one to follow."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def upper_bound(version: str) -> str:
    """The first version a release of ``version`` is not compatible with."""
    major, minor, _ = _parts(version)
    return f"{major + 1}" if major else f"0.{minor + 1}"


def problems(version: str) -> list[str]:
    """Each version line or Smriti pin that disagrees with ``version``, as a sentence."""
    found: list[str] = []
    upper = upper_bound(version)
    for path in release_tomls():
        text = path.read_text()
        rel = path.relative_to(ROOT)
        declared = tomllib.loads(text)["project"]["version"]
        if declared != version:
            found.append(f"{rel}: version {declared}, expected {version}")
        for name, _extras, low, high in PIN.findall(text):
            if (low, high) != (version, upper):
                found.append(f"{rel}: {name}>={low},<{high}, expected >={version},<{upper}")
    for path in _json_files():
        for declared in JSON_VERSION.findall(path.read_text()):
            if declared != version:
                found.append(f"{path.relative_to(ROOT)}: version {declared}, expected {version}")
    return found


def set_version(version: str) -> list[Path]:
    """Write ``version`` into every pyproject.toml and its Smriti pins; returns the changed."""
    _parts(version)
    upper = upper_bound(version)
    changed = []
    for path in release_tomls():
        text = path.read_text()
        new = VERSION_LINE.sub(f'version = "{version}"', text, count=1)
        new = PIN.sub(lambda m: f'"{m[1]}{m[2] or ""}>={version},<{upper}', new)
        if new != text:
            path.write_text(new)
            changed.append(path)
    for path in _json_files():
        text = path.read_text()
        new = JSON_VERSION.sub(f'"version": "{version}"', text)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def _json_files() -> list[Path]:
    return [ROOT / name for name in JSON_FILES if (ROOT / name).exists()]


def _parts(version: str) -> tuple[int, int, int]:
    match = RELEASE.match(version)
    if not match:
        raise SystemExit(f"set_version: {version!r} is not a release version like 1.2.3")
    return int(match[1]), int(match[2]), int(match[3])


def main(argv: list[str] | None = None) -> int:
    """Command line: a new version to set, or ``--check``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", nargs="?", help="the new version, e.g. 0.2.0")
    parser.add_argument("--check", action="store_true", help="only report lines out of step")
    args = parser.parse_args(argv)
    if args.check == bool(args.version):
        parser.error("give either a VERSION or --check")
    if args.version:
        for path in set_version(args.version):
            print(f"updated {path.relative_to(ROOT)}")
        print("now run `uv lock` and add a CHANGELOG.md section for this version")
    wrong = problems(args.version or source_version())
    for line in wrong:
        print(line, file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
