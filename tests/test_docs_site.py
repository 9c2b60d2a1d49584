"""The documents: the docs site builds strictly (a broken link or anchor fails), the
numbers the pages name are the code's, and the README keeps its promises.

The site is built by the real ``mkdocs build --strict`` in a child process, from the
repository itself and from copies of it with one link broken.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: A number followed by the marker naming where it comes from: `0.7 <!-- setting: X -->`
#: (a setting's default, as the generated settings reference states it) or
#: `50 <!-- code: smriti.engine.recall.CUE_FANOUT -->` (a module-level constant).
MARKER = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)\s*<!--\s*(code|setting):\s*([\w.]+)\s*-->")
#: The pages that explain tuning constants, and how many numbers each must tie to the code.
MARKED_PAGES = {"recall.md": 25, "team.md": 8}


def build_site(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """Run ``mkdocs build --strict`` on ``config`` into ``site``."""
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config)]
    return subprocess.run(
        [*command, "--site-dir", str(site)], capture_output=True, text=True, timeout=300
    )


def copy_sources(dest: Path) -> Path:
    """Copy what the site is built from (config, docs/, the READMEs) to ``dest``."""
    shutil.copy2(ROOT / "mkdocs.yml", dest / "mkdocs.yml")
    shutil.copytree(DOCS, dest / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    markdown = [ROOT / "README.md", ROOT / "bench" / "README.md"]
    markdown += sorted((ROOT / "plugins").glob("*/*.md"))
    markdown += sorted((ROOT / "examples").glob("*/*.md"))
    for source in markdown:
        target = dest / source.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return dest / "mkdocs.yml"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    result = build_site(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-4000:]}"
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "uv run --all-packages --all-extras pytest" in home, "the README is the home page"
    assert 'href="settings.html"' in home, "README links to docs/ are rewritten for the site"
    for plugin in sorted((ROOT / "plugins").glob("*/README.md")):
        page = tmp_path / "site" / "plugins" / f"{plugin.parent.name}.html"
        assert page.is_file(), f"{plugin.relative_to(ROOT)} is not a page of the site"


def test_an_intact_copy_builds(tmp_path: Path) -> None:
    """The copy the next test breaks is complete: unbroken, it builds."""
    config = copy_sources(tmp_path)
    result = build_site(config, tmp_path / "site")
    assert result.returncode == 0, result.stderr[-4000:]


@pytest.mark.parametrize(
    ("page", "link"),
    [
        ("docs/tools.md", "[gone](no-such-page.md)"),
        ("docs/tools.md", "[gone](recall.md#no-such-section)"),
        ("README.md", "[gone](docs/no-such-page.md)"),
        ("plugins/smriti-backend-kuzu/README.md", "[gone](../no-such-plugin/README.md)"),
    ],
)
def test_a_broken_link_fails_the_build(tmp_path: Path, page: str, link: str) -> None:
    config = copy_sources(tmp_path)
    with (tmp_path / page).open("a", encoding="utf-8") as out:
        out.write(f"\n\nSee {link}.\n")
    result = build_site(config, tmp_path / "site")
    assert result.returncode != 0, f"a broken link in {page} did not fail the build"
    target = re.search(r"\]\(([^)#]*)(#[^)]*)?\)", link)
    assert target is not None
    named = target.group(2) or Path(target.group(1)).name
    assert named.lstrip("#") in result.stderr, result.stderr[-2000:]


def setting_defaults() -> dict[str, str]:
    """Each setting's default as the generated reference (docs/settings.md) states it."""
    defaults = {}
    for line in (DOCS / "settings.md").read_text(encoding="utf-8").splitlines():
        row = re.match(r"\|\s*`([A-Z][A-Z0-9_]*)`[^|]*\|\s*([^|]*?)\s*\|", line)
        if row:
            defaults[row.group(1)] = row.group(2).strip("`")
    return defaults


def code_value(dotted: str) -> object:
    """The value of a module-level constant named ``package.module.NAME``."""
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def marker_mismatches(text: str, defaults: dict[str, str]) -> list[str]:
    """The markers in ``text`` whose number is not the code's, each described."""
    wrong = []
    for match in MARKER.finditer(text):
        number, kind, name = match.groups()
        truth = code_value(name) if kind == "code" else defaults.get(name, "missing")
        try:
            same = float(number.replace(",", "")) == float(str(truth).replace(",", ""))
        except ValueError:
            same = False
        if not same:
            wrong.append(f"{number} is marked as {kind} {name}, which is {truth!r}")
    return wrong


def test_the_numbers_the_pages_name_are_the_codes() -> None:
    defaults = setting_defaults()
    assert "ASSOCIATION_THRESHOLD" in defaults, "docs/settings.md has no settings table"
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted(ROOT.glob("plugins/*/*.md"))]
    wrong = {
        str(p.relative_to(ROOT)): marker_mismatches(p.read_text(encoding="utf-8"), defaults)
        for p in pages
    }
    assert not {page: w for page, w in wrong.items() if w}, wrong
    for page, least in MARKED_PAGES.items():
        found = len(MARKER.findall((DOCS / page).read_text(encoding="utf-8")))
        assert found >= least, f"docs/{page} ties only {found} numbers to the code"


def test_a_number_that_drifted_from_the_code_is_caught() -> None:
    defaults = {"ASSOCIATION_THRESHOLD": "0.7"}
    assert marker_mismatches("above 0.7 <!-- setting: ASSOCIATION_THRESHOLD -->", defaults) == []
    assert marker_mismatches("above 0.6 <!-- setting: ASSOCIATION_THRESHOLD -->", defaults)
    assert marker_mismatches("at most 3 <!-- setting: NO_SUCH_SETTING -->", defaults)
    weight = code_value("smriti.engine.fusion.VECTOR_WEIGHT")
    drifted = f"{float(weight) + 1} <!-- code: smriti.engine.fusion.VECTOR_WEIGHT -->"
    assert marker_mismatches(drifted, defaults)


def test_the_readme_is_short_and_keeps_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300, "the README is at most 300 lines; move a section"
    assert "\nuv run --no-dev --package smriti-server smriti\n" in readme
    assert "\nuv run --all-packages --all-extras pytest\n" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "\nexec uv run --all-packages --all-extras pytest\n" in ci, (
        ".ci/run must run exactly the README's test command"
    )


def test_committed_results_are_the_ones_the_benchmarks_page_cites() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no committed result files to check")
    listed = subprocess.run(
        ["git", "ls-files", "bench/results"], cwd=ROOT, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    committed = {Path(line).name for line in listed.stdout.split()}
    page = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    # The table of current figures names each run's file in its last column.
    cited = set(re.findall(r"\|\s*`([\w.-]+\.json)`\s*\|\s*$", page, re.MULTILINE))
    assert committed == cited, (
        f"committed but not cited: {sorted(committed - cited)}; "
        f"cited but not committed: {sorted(cited - committed)}"
    )
    benchmarks = [name.split("-")[0] for name in cited]
    assert len(benchmarks) == len(set(benchmarks)), "one result file per benchmark"
