"""MkDocs hooks: the repository's own Markdown files as pages of the docs site.

The README is the home page and each plugin's and example's README (and the benchmarks'
README) is a page, without copies that could drift: the pages are made from the files at
build time. Every page's relative links are written for a reader of the repository (GitHub, an
editor), so they are rewritten here to the site's paths. A link to a file that is not a
page of the site is left alone, and ``mkdocs build --strict`` then fails on it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

#: Markdown files outside docs/ that become pages: repository path -> site path.
_STATIC_PAGES = {
    "README.md": "index.md",
    "bench/README.md": "benchmarks.md",
}
#: Folders of distributions (a plugin, an example) whose READMEs become pages.
_PACKAGE_FOLDERS = ("plugins", "examples")
#: Per distribution: the file name -> the page's name suffix.
_PACKAGE_PAGES = {"README.md": "", "DESIGN.md": "-design"}
#: An inline link or image target: ](target) or ](target#anchor), no spaces.
_LINK = re.compile(r"(\]\()([^)\s#]*)(#[^)\s]*)?(\))")


def _root(config: Any) -> Path:
    return Path(config["config_file_path"]).parent


def site_pages(root: Path) -> dict[str, str]:
    """Repository path -> site path of every page made from a file outside docs/."""
    pages = {repo: site for repo, site in _STATIC_PAGES.items() if (root / repo).is_file()}
    for folder in _PACKAGE_FOLDERS:
        for package in sorted(p for p in (root / folder).glob("*") if p.is_dir()):
            for name, suffix in _PACKAGE_PAGES.items():
                if (package / name).is_file():
                    pages[f"{folder}/{package.name}/{name}"] = f"{folder}/{package.name}{suffix}.md"
    return pages


def on_files(files: Files, config: Any) -> Files:
    """Add the pages made from the README, the plugins' READMEs and the benchmarks'."""
    root = _root(config)
    for repo, site in site_pages(root).items():
        text = (root / repo).read_text(encoding="utf-8")
        files.append(File.generated(config, site, content=text))
    return files


def _repo_path(page_src: str, root: Path) -> str:
    """Where the page's Markdown lives in the repository (its links are relative to it)."""
    for repo, site in site_pages(root).items():
        if site == page_src:
            return repo
    return f"docs/{page_src}"


def rewrite_links(markdown: str, page_src: str, root: Path) -> str:
    """Rewrite each relative link from its repository target to its site target."""
    pages = site_pages(root)
    here = posixpath.dirname(_repo_path(page_src, root))
    site_here = posixpath.dirname(page_src)

    def rewrite(match: re.Match[str]) -> str:
        target = match.group(2)
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            return match.group(0)
        repo_target = posixpath.normpath(posixpath.join(here, target))
        if repo_target in pages:
            site_target = pages[repo_target]
        elif repo_target.startswith("docs/"):
            site_target = repo_target.removeprefix("docs/")
        else:
            return match.group(0)  # not part of the site: left for --strict to report
        new = posixpath.relpath(site_target, site_here or ".")
        return f"{match.group(1)}{new}{match.group(3) or ''}{match.group(4)}"

    return _LINK.sub(rewrite, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point the page's repository links at the site's pages."""
    return rewrite_links(markdown, page.file.src_uri, _root(config))
